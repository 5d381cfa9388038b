defmodule HRW.Native do
  @moduledoc false
  # The NIF stubs of native/hrw_nif, one line per NIF, and the stale-resource
  # retries of replicas and batches. Only `HRW.Native` loads the library; the other
  # modules call the functions below. Whether a target is looked up as a ring or a
  # skeleton, and how batch targets are encoded for the NIFs, is decided in
  # `HRW.Prepared` alone (`lookup/5`, `nif_target/1`).
  #
  # Every NIF `name` of the library (native/hrw_nif/src/nif.rs, `nif!`) comes as:
  #   * `name`: runs on the caller's scheduler within a work budget, and moves
  #     itself to a dirty CPU scheduler when its input would exceed it (the
  #     normal/dirty choice is made there, in Rust, once for every NIF);
  #   * `name_dirty`: the same on a dirty CPU scheduler from the start;
  #   * `name_probe`: the normal-scheduler version reporting `{outcome, charged,
  #     counted}` instead of its result (test/hrw/budget_test.exs).
  #
  # NIFs raise `ArgumentError` themselves for bad input. A ring or skeleton whose
  # resource cannot be used in this VM (it came from another node, or from a binary
  # whose resource was collected) makes the NIF raise `:hrw_stale_resource`: the
  # wrappers below, and `HRW.Prepared.lookup/5`, rebuild the struct
  # (`HRW.Prepared.rebuilt/1`, shared by the node's processes) and call once more.
  #
  # No fun in this module. Loading HRW.Native again (a hot upgrade, `r/1`) points
  # the funs of the loaded instance at the new one as soon as it is loaded, before
  # its on_load has replaced its stubs: a fun calling a stub would raise
  # `:nif_not_loaded` meanwhile, and any fun would dangle if that on_load failed
  # (test/hrw/reload_test.exs).
  #
  # Adding a NIF: one `nif!` line in native/hrw_nif/src, and its three stubs here.

  @on_load :load_nif

  @doc false
  def load_nif do
    path = :filename.join(:code.priv_dir(:hrw), ~c"native/libhrw_nif")
    :erlang.load_nif(path, 0)
  end

  # -- NIF stubs (native/hrw_nif/src: term_id/mod.rs, weighted.rs, list.rs, ring.rs,
  # skeleton.rs, batch.rs, bounded.rs, nif.rs) -----------------------------------

  @doc false
  def term_id(_term), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def term_id_dirty(_term), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def term_id_probe(_term), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def score(_key, _node), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def score_dirty(_key, _node), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def score_probe(_key, _node), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def weighted_score(_key, _entry), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def weighted_score_dirty(_key, _entry), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def weighted_score_probe(_key, _entry), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def list_owner(_key, _nodes, _weighted?), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def list_owner_dirty(_key, _nodes, _weighted?), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def list_owner_probe(_key, _nodes, _weighted?), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def list_owners(_key, _nodes, _count, _weighted?), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def list_owners_dirty(_key, _nodes, _count, _weighted?),
    do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def list_owners_probe(_key, _nodes, _count, _weighted?),
    do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def ring_new(_nodes, _weighted?), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_new_dirty(_nodes, _weighted?), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_new_probe(_nodes, _weighted?), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def ring_owner(_resource, _key), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_owner_dirty(_resource, _key), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_owner_probe(_resource, _key), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def ring_owners(_resource, _key, _count), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_owners_dirty(_resource, _key, _count), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def ring_owners_probe(_resource, _key, _count), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def skeleton_new(_nodes, _weighted?, _cluster_size), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def skeleton_new_dirty(_nodes, _weighted?, _cluster_size),
    do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def skeleton_new_probe(_nodes, _weighted?, _cluster_size),
    do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def skeleton_owner(_resource, _key), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def skeleton_owner_dirty(_resource, _key), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def skeleton_owner_probe(_resource, _key), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def skeleton_owners(_resource, _key, _count), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def skeleton_owners_dirty(_resource, _key, _count), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def skeleton_owners_probe(_resource, _key, _count), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def batch_owners(_keys, _target, _threads), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def batch_owners_dirty(_keys, _target, _threads), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def batch_owners_probe(_keys, _target, _threads), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def batch_groups(_keys, _target, _threads), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def batch_groups_dirty(_keys, _target, _threads), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def batch_groups_probe(_keys, _target, _threads), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def batch_moves(_keys, _before, _later, _threads), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def batch_moves_dirty(_keys, _before, _later, _threads),
    do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def batch_moves_probe(_keys, _before, _later, _threads),
    do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def bounded_assignments(_keys, _nodes, _epsilon), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def bounded_assignments_dirty(_keys, _nodes, _epsilon), do: :erlang.nif_error(:nif_not_loaded)
  @doc false
  def bounded_assignments_probe(_keys, _nodes, _epsilon), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  def dirty_runs, do: :erlang.nif_error(:nif_not_loaded)

  # -- replicas on a prepared structure, rebuilt once when stale ---------------------

  # `HRW.Prepared` matches the struct's fields and passes them with the struct,
  # which is needed again only for a stale rebuild. (Single owners are looked up
  # in `HRW.Prepared.lookup/5` itself: one call fewer on the hot path.)

  @doc false
  @spec ring_owners(reference(), tuple(), HRW.Ring.t(), term(), non_neg_integer()) :: [term()]
  def ring_owners(resource, nodes, ring, key, count) do
    pick(nodes, ring_owners(resource, key, count))
  catch
    :error, :hrw_stale_resource ->
      %{nodes: nodes, resource: resource} = HRW.Prepared.rebuilt(ring)
      pick(nodes, ring_owners(resource, key, count))
  end

  @doc false
  @spec skeleton_owners(reference(), tuple(), HRW.Skeleton.t(), term(), non_neg_integer()) ::
          [term()]
  def skeleton_owners(resource, nodes, skeleton, key, count) do
    pick(nodes, skeleton_owners(resource, key, count))
  catch
    :error, :hrw_stale_resource ->
      %{nodes: nodes, resource: resource} = HRW.Prepared.rebuilt(skeleton)
      pick(nodes, skeleton_owners(resource, key, count))
  end

  # Recursion, not a fun (see the module comment).
  defp pick(nodes, [i | rest]), do: [elem(nodes, i) | pick(nodes, rest)]
  defp pick(_nodes, []), do: []

  # -- batches, on targets rebuilt once when stale ------------------------------------

  @typedoc "A batch target: a prepared structure, or a node list and whether it is weighted."
  @type target :: HRW.Ring.t() | HRW.Skeleton.t() | {:list, list(), boolean()}

  @doc false
  @spec owners_of([term()], target(), pos_integer()) :: [term()]
  def owners_of(keys, target, threads) do
    batch_owners(keys, HRW.Prepared.nif_target(target), threads)
  catch
    :error, :hrw_stale_resource -> batch_owners(keys, rebuilt_target(target), threads)
  end

  @doc false
  @spec groups_of([term()], target(), pos_integer()) :: %{term() => [term()]}
  def groups_of(keys, target, threads) do
    batch_groups(keys, HRW.Prepared.nif_target(target), threads)
  catch
    :error, :hrw_stale_resource -> batch_groups(keys, rebuilt_target(target), threads)
  end

  @doc false
  @spec moves_of([term()], target(), target(), pos_integer()) :: [{term(), term(), term()}]
  def moves_of(keys, before, later, threads) do
    batch_moves(keys, HRW.Prepared.nif_target(before), HRW.Prepared.nif_target(later), threads)
  catch
    :error, :hrw_stale_resource ->
      batch_moves(keys, rebuilt_target(before), rebuilt_target(later), threads)
  end

  defp rebuilt_target(target), do: target |> HRW.Prepared.rebuilt() |> HRW.Prepared.nif_target()

  # -- test builds ---------------------------------------------------------------------

  @doc false
  # Runs the normal-scheduler version of the NIF `name` on `args` and returns
  # `{outcome, charged, counted}` (outcome `:ok`, `:needs_dirty`, `{:bad_arg, msg}`
  # or `:stale_resource`), the work units it charged to its budget and those it
  # counted (0 unless built for tests).
  @spec probe(atom(), [term()]) :: {term(), non_neg_integer(), non_neg_integer()}
  def probe(name, args), do: apply(__MODULE__, :"#{name}_probe", args)
end
