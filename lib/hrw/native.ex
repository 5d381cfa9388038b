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
  #     (`HRW.Prepared.rebuilt/1`, shared by the node's processes) and the call
  #     repeated once.
  #
  # Which structure is which, and the tuples the batch NIFs take, is
  # `HRW.Prepared`'s to know.
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

  # One owner and one owners lookup per kind of prepared structure, written once:
  # `ring_owner/4`, `ring_owners/5`, `skeleton_owner/4`, `skeleton_owners/5`.
  # `HRW.Prepared` matches the struct's fields and passes them with the struct, which
  # is needed again only for a stale rebuild. (Matching them here, in the function
  # that holds the `try`, measured ~13 ns slower per call.)
  for kind <- [:ring, :skeleton] do
    owner = :"#{kind}_owner"
    owners = :"#{kind}_owners"

    @spec unquote(owner)(reference(), tuple(), HRW.Prepared.t(), term()) :: term()
    def unquote(owner)(resource, nodes, prepared, key) do
      elem(nodes, twin(unquote(owner), [resource, key]))
    catch
      :error, :hrw_stale_resource ->
        %{nodes: nodes, resource: resource} = HRW.Prepared.rebuilt(prepared)
        elem(nodes, twin(unquote(owner), [resource, key]))
    end

    @spec unquote(owners)(reference(), tuple(), HRW.Prepared.t(), term(), non_neg_integer()) ::
            [term()]
    def unquote(owners)(resource, nodes, prepared, key, count) do
      pick(nodes, twin(unquote(owners), [resource, key, count]))
    catch
      :error, :hrw_stale_resource ->
        %{nodes: nodes, resource: resource} = HRW.Prepared.rebuilt(prepared)
        pick(nodes, twin(unquote(owners), [resource, key, count]))
    end
  end

  # Recursion, not a fun: see "No fun in this module" under batches.
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

  # `batch_owners/3` and `batch_groups/3`: the same shape, written once.
  for name <- [:batch_owners, :batch_groups] do
    @spec unquote(name)([term()], target(), pos_integer()) :: term()
    def unquote(name)(keys, target, threads) do
      unquote(name)(keys, batch_target(target), threads, longer_than?(keys, @dirty_keys))
    catch
      :error, :hrw_stale_resource ->
        unquote(name)(keys, rebuilt_target(target), threads, longer_than?(keys, @dirty_keys))
    end

    defp unquote(name)(keys, t, threads, true), do: dirty(unquote(name), [keys, t, threads])
    defp unquote(name)(keys, t, threads, false), do: twin(unquote(name), [keys, t, threads])
  end

  @spec batch_moves([term()], target(), target(), pos_integer()) :: [{term(), term(), term()}]
  def batch_moves(keys, before, later, threads) do
    dirty? = longer_than?(keys, @dirty_keys)
    batch_moves(keys, batch_target(before), batch_target(later), threads, dirty?)
  catch
    :error, :hrw_stale_resource ->
      {a, b} = {rebuilt_target(before), rebuilt_target(later)}
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

  defp rebuilt_target(target), do: target |> HRW.Prepared.rebuilt() |> batch_target()

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
  # The tuple a batch NIF takes for `target` (`HRW.Prepared.batch_target/1`).
  @spec batch_target(target()) :: tuple()
  def batch_target(target), do: HRW.Prepared.batch_target(target)
end
