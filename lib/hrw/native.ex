defmodule HRW.Native do
  @moduledoc false
  # The one boundary between lib/ and the NIF (native/hrw_nif). Nothing else in lib/
  # knows that a NIF exists: the other modules call the plain functions below.
  #
  # What happens here, and only here:
  #   * scheduling: each NIF is a normal/dirty pair (`HRW.Native.Twins`); the
  #     normal-scheduler half charges a work budget before it works and says when
  #     the input is too large, and the call moves to the dirty half. Key lists long
  #     enough to exceed any budget go to the dirty half directly;
  #   * stale resources: a ring or skeleton whose resource cannot be used in this VM
  #     (it came from another node, or from a binary whose resource was collected)
  #     makes the NIF raise `:hrw_stale_resource`; the struct is rebuilt
  #     (`HRW.Prepared.rebuilt/1`, cached per fingerprint) and the call repeated once;
  #   * the tuple protocol of batch targets.
  #
  # NIFs raise `ArgumentError` themselves for bad input.
  #
  # Adding a NIF: one `twin_nifs!` line in Rust, its `name: arity` in `nifs` below,
  # and a wrapper here.

  import HRW.Native.Twins

  @on_load :load_nif

  @doc false
  def load_nif do
    path = :filename.join(:code.priv_dir(:hrw), ~c"native/libhrw_nif")
    :erlang.load_nif(path, 0)
  end

  nifs(
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
  )

  # Above this many keys a batch exceeds the budget whatever its target (a key costs
  # far more than 50 units): trying the normal scheduler first would only waste it.
  @dirty_keys 8192

  # -- terms and scores ---------------------------------------------------------

  @spec term_id(term()) :: non_neg_integer()
  def term_id(term), do: twin(:term_id, [term])

  @spec score(term(), term()) :: non_neg_integer()
  def score(key, node), do: twin(:score, [key, node])

  @spec weighted_score(term(), term()) :: non_neg_integer()
  def weighted_score(key, entry), do: twin(:weighted_score, [key, entry])

  # -- lists ---------------------------------------------------------------------

  @spec list_owner(term(), list(), boolean()) :: term()
  def list_owner(key, nodes, weighted?), do: twin(:list_owner, [key, nodes, weighted?])

  @spec list_owners(term(), list(), non_neg_integer(), boolean()) :: [term()]
  def list_owners(key, nodes, count, weighted?),
    do: twin(:list_owners, [key, nodes, count, weighted?])

  # -- prepared structures ---------------------------------------------------------

  @typedoc "What a build returns: `{resource, nodes, weights_or_nil, fingerprint}`."
  @type built :: {reference(), tuple(), tuple() | nil, non_neg_integer()}

  @spec ring_new(list(), boolean()) :: built()
  def ring_new(nodes, weighted?), do: twin(:ring_new, [nodes, weighted?])

  @spec skeleton_new(list(), boolean(), pos_integer()) :: built()
  def skeleton_new(nodes, weighted?, leaf_size),
    do: twin(:skeleton_new, [nodes, weighted?, leaf_size])

  @spec ring_owner(HRW.Ring.t(), term()) :: term()
  def ring_owner(%HRW.Ring{nodes: nodes, resource: resource} = ring, key),
    do: ring_owner(resource, nodes, ring, key)

  # The hot path of `HRW.owner/2`: the caller has matched the struct's fields, and
  # the struct is only needed again for a stale rebuild. (Matching them here, in the
  # function that holds the `try`, measured ~13 ns slower per call.)
  @spec ring_owner(reference(), tuple(), HRW.Ring.t(), term()) :: term()
  def ring_owner(resource, nodes, ring, key) do
    elem(nodes, twin(:ring_owner, [resource, key]))
  catch
    :error, :hrw_stale_resource ->
      %HRW.Ring{nodes: nodes, resource: resource} = HRW.Prepared.rebuilt(ring)
      elem(nodes, twin(:ring_owner, [resource, key]))
  end

  @spec ring_owners(HRW.Ring.t(), term(), non_neg_integer()) :: [term()]
  def ring_owners(%HRW.Ring{nodes: nodes, resource: resource} = ring, key, count) do
    pick(nodes, twin(:ring_owners, [resource, key, count]))
  catch
    :error, :hrw_stale_resource ->
      %HRW.Ring{nodes: nodes, resource: resource} = HRW.Prepared.rebuilt(ring)
      pick(nodes, twin(:ring_owners, [resource, key, count]))
  end

  @spec skeleton_owner(HRW.Skeleton.t(), term()) :: term()
  def skeleton_owner(%HRW.Skeleton{nodes: nodes, resource: resource} = skeleton, key),
    do: skeleton_owner(resource, nodes, skeleton, key)

  # As `ring_owner/4`.
  @spec skeleton_owner(reference(), tuple(), HRW.Skeleton.t(), term()) :: term()
  def skeleton_owner(resource, nodes, skeleton, key) do
    elem(nodes, twin(:skeleton_owner, [resource, key]))
  catch
    :error, :hrw_stale_resource ->
      %HRW.Skeleton{nodes: nodes, resource: resource} = HRW.Prepared.rebuilt(skeleton)
      elem(nodes, twin(:skeleton_owner, [resource, key]))
  end

  @spec skeleton_owners(HRW.Skeleton.t(), term(), non_neg_integer()) :: [term()]
  def skeleton_owners(%HRW.Skeleton{nodes: nodes, resource: resource} = skeleton, key, count) do
    pick(nodes, twin(:skeleton_owners, [resource, key, count]))
  catch
    :error, :hrw_stale_resource ->
      %HRW.Skeleton{nodes: nodes, resource: resource} = HRW.Prepared.rebuilt(skeleton)
      pick(nodes, twin(:skeleton_owners, [resource, key, count]))
  end

  # Recursion, not a fun: see "No fun below" under batches.
  defp pick(nodes, [i | rest]), do: [elem(nodes, i) | pick(nodes, rest)]
  defp pick(_nodes, []), do: []

  # -- batches ---------------------------------------------------------------------

  @typedoc "A batch target: a prepared structure, or a node list and whether it is weighted."
  @type target :: HRW.Ring.t() | HRW.Skeleton.t() | {:list, list(), boolean()}

  # No fun in this module. Loading HRW.Native again (a hot upgrade, `r/1`) points
  # the funs of the loaded instance at the new one as soon as it is loaded, before
  # its on_load has replaced its stubs: a fun calling a stub would raise
  # `:nif_not_loaded` meanwhile, and any fun would dangle if that on_load failed
  # (test/hrw/reload_test.exs).

  @spec batch_owners([term()], target(), pos_integer()) :: [term()]
  def batch_owners(keys, target, threads) do
    dirty? = longer_than?(keys, @dirty_keys)
    batch_owners(keys, native_target(target), threads, dirty?)
  catch
    :error, :hrw_stale_resource ->
      batch_owners(keys, native_target(rebuilt(target)), threads, longer_than?(keys, @dirty_keys))
  end

  defp batch_owners(keys, t, threads, true), do: dirty(:batch_owners, [keys, t, threads])
  defp batch_owners(keys, t, threads, false), do: twin(:batch_owners, [keys, t, threads])

  @spec batch_groups([term()], target(), pos_integer()) :: %{term() => [term()]}
  def batch_groups(keys, target, threads) do
    dirty? = longer_than?(keys, @dirty_keys)
    batch_groups(keys, native_target(target), threads, dirty?)
  catch
    :error, :hrw_stale_resource ->
      batch_groups(keys, native_target(rebuilt(target)), threads, longer_than?(keys, @dirty_keys))
  end

  defp batch_groups(keys, t, threads, true), do: dirty(:batch_groups, [keys, t, threads])
  defp batch_groups(keys, t, threads, false), do: twin(:batch_groups, [keys, t, threads])

  @spec batch_moves([term()], target(), target(), pos_integer()) :: [{term(), term(), term()}]
  def batch_moves(keys, before, later, threads) do
    dirty? = longer_than?(keys, @dirty_keys)
    batch_moves(keys, native_target(before), native_target(later), threads, dirty?)
  catch
    :error, :hrw_stale_resource ->
      {a, b} = {native_target(rebuilt(before)), native_target(rebuilt(later))}
      batch_moves(keys, a, b, threads, longer_than?(keys, @dirty_keys))
  end

  defp batch_moves(keys, a, b, threads, true), do: dirty(:batch_moves, [keys, a, b, threads])
  defp batch_moves(keys, a, b, threads, false), do: twin(:batch_moves, [keys, a, b, threads])

  @spec bounded_assignments([term()], list(), float()) :: %{term() => term()}
  def bounded_assignments(keys, nodes, epsilon) do
    if longer_than?(keys, @dirty_keys) do
      dirty(:bounded_assignments, [keys, nodes, epsilon])
    else
      twin(:bounded_assignments, [keys, nodes, epsilon])
    end
  end

  defp native_target(%HRW.Ring{resource: r, nodes: nodes}), do: {:ring, r, nodes}
  defp native_target(%HRW.Skeleton{resource: r, nodes: nodes}), do: {:skeleton, r, nodes}
  defp native_target({:list, _nodes, _weighted?} = list), do: list

  defp rebuilt(%HRW.Ring{} = ring), do: HRW.Prepared.rebuilt(ring)
  defp rebuilt(%HRW.Skeleton{} = skeleton), do: HRW.Prepared.rebuilt(skeleton)
  defp rebuilt(other), do: other

  # Counts at most `limit + 1` cells, so a long list costs no more than a short one.
  defp longer_than?([_ | rest], limit) when limit > 0, do: longer_than?(rest, limit - 1)
  defp longer_than?([_ | _], 0), do: true
  defp longer_than?(_, _), do: false

  # -- test builds -----------------------------------------------------------------

  @doc false
  # Test builds only: runs the normal-scheduler NIF `name` on `args` and returns
  # `{outcome, charged, counted}` (outcome `:ok`, `:needs_dirty`, `{:bad_arg, msg}` or
  # `:stale_resource`), the work units it charged to its budget and those it counted.
  @spec probe(atom(), [term()]) :: {term(), non_neg_integer(), non_neg_integer()}
  def probe(name, args), do: apply(__MODULE__, :"#{name}_probe", args)

  @doc false
  @spec batch_target(target()) :: tuple()
  def batch_target(target), do: native_target(target)
end
