defmodule HRW.Native do
  @moduledoc false
  # The NIFs of native/hrw_nif (their stubs, and the choice of scheduler) and
  # `load_nif/0`: nothing else. Only `HRW.Native` loads the library; the other
  # modules call the functions below.
  # Which NIF a ring or a skeleton is looked up with, how batch targets are
  # encoded, and what happens when a NIF raises `:hrw_stale_resource` (a ring or
  # skeleton whose resource cannot be used in this VM) is `HRW.Prepared`'s alone.
  #
  # Every NIF `name/arity` that lib/ calls is an Elixir function here (generated
  # below from `@nif_functions`) that runs the NIF `name_normal` on the caller's
  # scheduler within a work budget and, when its input would exceed that budget
  # (the NIF stops within it and raises `:hrw_needs_dirty`), the NIF `name_dirty`
  # on a dirty CPU scheduler, which runs it whole: the normal/dirty choice is made here,
  # once for every NIF (native/hrw_nif/src/nif.rs, `nif!`).
  #
  # Test builds have more: the library is built with the cargo feature
  # `work-probes` (the compile task's `cargo_options/1` for the Mix env says so),
  # which adds `name_probe` (the normal-scheduler version reporting `{outcome,
  # charged, counted}` instead of its result: test/support/native_probe.ex,
  # test/hrw/budget_test.exs), `dirty_runs/0` and `sub_binary_layout/1`. A
  # library loads only when its NIFs and this module's stubs are the same set, so
  # the stubs of those follow the same switch (`@test_hooks`); a production build
  # has neither.
  #
  # NIFs raise `ArgumentError` themselves for bad input.
  #
  # No fun in this module. Loading HRW.Native again (a hot upgrade, `r/1`) points
  # the funs of the loaded instance at the new one as soon as it is loaded, before
  # its on_load has replaced its stubs: a fun calling a stub would raise
  # `:nif_not_loaded` meanwhile, and any fun would dangle if that on_load failed
  # (test/hrw/reload_test.exs). Code that needs funs lives in the callers.
  #
  # Adding a NIF: one `nif!` line in native/hrw_nif/src, and its name and arity in
  # `@nif_functions`.

  @on_load :load_nif

  @doc false
  def load_nif do
    path = :filename.join(:code.priv_dir(:hrw), ~c"native/libhrw_nif")
    :erlang.load_nif(path, 0)
  end

  # -- the NIFs ---------------------------------------------------------------------

  # Every NIF of the library, by the name and arity lib/ calls it with
  # (native/hrw_nif/src: term_id/mod.rs, weighted.rs, list.rs, ring.rs,
  # skeleton.rs, batch.rs, bounded.rs). Not `@nifs`: since Elixir 1.15 that
  # attribute declares the module's NIFs to the loader, which then refuses a
  # library with any other.
  @nif_functions [
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

  @test_hooks "hrw_nif/work-probes" in Mix.Tasks.Compile.HrwNative.cargo_options(Mix.env())

  # `name/arity`: `name_normal`, else `name_dirty` (above); test builds add
  # `name_probe`.
  for {name, arity} <- @nif_functions do
    args = Macro.generate_arguments(arity, __MODULE__)
    stub_args = for i <- 1..arity, do: Macro.var(:"_arg#{i}", __MODULE__)
    normal = :"#{name}_normal"
    dirty = :"#{name}_dirty"

    @doc false
    def unquote(name)(unquote_splicing(args)) do
      unquote(normal)(unquote_splicing(args))
    catch
      :error, :hrw_needs_dirty -> unquote(dirty)(unquote_splicing(args))
    end

    @doc false
    def unquote(normal)(unquote_splicing(stub_args)), do: :erlang.nif_error(:nif_not_loaded)
    @doc false
    def unquote(dirty)(unquote_splicing(stub_args)), do: :erlang.nif_error(:nif_not_loaded)

    if @test_hooks do
      @doc false
      def unquote(:"#{name}_probe")(unquote_splicing(stub_args)),
        do: :erlang.nif_error(:nif_not_loaded)
    end
  end

  # -- test builds only: the dirty-run count and the layout switch ----------------------

  if @test_hooks do
    @doc false
    def dirty_runs, do: :erlang.nif_error(:nif_not_loaded)
    @doc false
    def sub_binary_layout(_on?), do: :erlang.nif_error(:nif_not_loaded)
  end
end
