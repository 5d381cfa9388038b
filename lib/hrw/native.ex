defmodule HRW.Native do
  @moduledoc false
  # The NIF stubs of native/hrw_nif, one line per NIF, and `load_nif/0`: nothing
  # else. Only `HRW.Native` loads the library; the other modules call the stubs.
  # Which NIF a ring or a skeleton is looked up with, how batch targets are
  # encoded, and what happens when a NIF raises `:hrw_stale_resource` (a ring or
  # skeleton whose resource cannot be used in this VM) is `HRW.Prepared`'s alone.
  #
  # Every NIF `name` of the library (native/hrw_nif/src/nif.rs, `nif!`) runs on
  # the caller's scheduler within a work budget, and moves itself to a dirty CPU
  # scheduler (`enif_schedule_nif`) when its input would exceed it: the
  # normal/dirty choice is made there, in Rust, once for every NIF.
  #
  # Test builds have more: the library is built with the cargo feature
  # `work-probes` (the compile task's `cargo_options/1` for the Mix env says so),
  # which adds `name_dirty` (the same on a dirty CPU scheduler from the start),
  # `name_probe` (the normal-scheduler version reporting `{outcome, charged,
  # counted}` instead of its result: test/support/native_probe.ex,
  # test/hrw/budget_test.exs), `dirty_runs/0`, `sub_binary_layout/1`,
  # `atom_cache/1` and `batch_check/1`. A library loads only when its
  # NIFs and this module's stubs are the same set, so the stubs of those follow
  # the same switch (`@test_hooks`); a production build has neither.
  #
  # NIFs raise `ArgumentError` themselves for bad input.
  #
  # No fun in this module. Loading HRW.Native again (a hot upgrade, `r/1`) points
  # the funs of the loaded instance at the new one as soon as it is loaded, before
  # its on_load has replaced its stubs: a fun calling a stub would raise
  # `:nif_not_loaded` meanwhile, and any fun would dangle if that on_load failed
  # (test/hrw/reload_test.exs). Code that needs funs lives in the callers.
  #
  # Adding a NIF: one `nif!` line in native/hrw_nif/src, its entry in init.rs's
  # table, and its stub here (the test builds' twins come from `@twinned`).

  @on_load :load_nif

  @doc false
  def load_nif do
    path = :filename.join(:code.priv_dir(:hrw), ~c"native/libhrw_nif")
    :erlang.load_nif(path, 0)
  end

  # -- NIF stubs (native/hrw_nif/src: term_id/mod.rs, weighted.rs, list.rs, ring.rs,
  # skeleton.rs, batch.rs, bounded.rs) -------------------------------------------

  @doc false
  def term_id(_term), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def score(_key, _node), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def weighted_score(_key, _entry), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def list_owner(_key, _nodes, _weighted?), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def list_owners(_key, _nodes, _count, _weighted?), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_new(_nodes, _weighted?), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_owner(_resource, _key), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_owners(_resource, _key, _count), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def skeleton_new(_nodes, _weighted?, _cluster_size), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def skeleton_owner(_resource, _key), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def skeleton_owners(_resource, _key, _count), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def batch_owners(_keys, _target, _threads), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def batch_groups(_keys, _target, _threads), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def batch_moves(_keys, _before, _later, _threads), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def bounded_assignments(_keys, _nodes, _epsilon), do: :erlang.nif_error(:nif_not_loaded)

  # -- test builds only: the twins of every NIF above, and the test hooks ------------

  @test_hooks "hrw_nif/work-probes" in Mix.Tasks.Compile.HrwNative.cargo_options(Mix.env())

  if @test_hooks do
    # Not `@nifs`: since Elixir 1.15 that attribute declares the module's NIFs to
    # the loader, which then refuses a library with any other.
    @twinned [
      term_id: 1,
      score: 2,
      weighted_score: 2,
      list_owner: 3,
      list_owners: 4,
      ring_new: 2,
      ring_owner: 2,
      ring_owners: 3,
      skeleton_new: 3,
      skeleton_owner: 2,
      skeleton_owners: 3,
      batch_owners: 3,
      batch_groups: 3,
      batch_moves: 4,
      bounded_assignments: 3
    ]

    for {name, arity} <- @twinned, twin <- [:"#{name}_dirty", :"#{name}_probe"] do
      args = for i <- 1..arity, do: Macro.var(:"_arg#{i}", nil)
      @doc false
      def unquote(twin)(unquote_splicing(args)), do: :erlang.nif_error(:nif_not_loaded)
    end

    @doc false
    def dirty_runs, do: :erlang.nif_error(:nif_not_loaded)
    @doc false
    def sub_binary_layout(_on?), do: :erlang.nif_error(:nif_not_loaded)
    @doc false
    def atom_cache(_on?), do: :erlang.nif_error(:nif_not_loaded)
    @doc false
    def batch_check(_on?), do: :erlang.nif_error(:nif_not_loaded)
  end
end
