defmodule HRW.Overrides do
  @moduledoc false
  # Key overrides of a prepared structure (`HRW.Ring.new/2` and `HRW.build/2`, option
  # `:overrides`): pure functions over the normalized map `%{key => [node, ...]}`
  # (distinct nodes, in the given order). A structure without overrides stores `nil`
  # and never calls this module on a lookup (one `case` on `nil` in its hot path).
  #
  # Keys match with map-key semantics (exact terms: `1` and `1.0` differ); node
  # comparisons here are exact too, as in the native batch code.

  @typedoc "Normalized overrides: every value a non-empty list of distinct nodes."
  @type t :: %{optional(term()) => [term(), ...]}

  @doc """
  Validates the `:overrides` option given to `caller` and normalizes it: `nil` when
  there is nothing to override (option absent, `nil` or `%{}`), else a map whose
  values are non-empty lists of distinct nodes. A value that is not a list is one
  node; a list is always a list of nodes.

  `hashed?` says whether the structure looks keys up by their term id (every native
  ring and skeleton): then every key must have one (`HRW.term_id/1`, which refuses
  terms nested deeper than 256 levels), because a key that every lookup refuses
  could only be answered by some entry points and refused by others. Structures
  scored in Elixir (`hash_fn`, custom scorers) never hash a key natively and take
  any key.
  """
  @spec new!(term(), String.t(), boolean()) :: t() | nil
  def new!(nil, _caller, _hashed?), do: nil
  def new!(overrides, _caller, _hashed?) when overrides == %{}, do: nil

  def new!(overrides, caller, hashed?) when is_map(overrides) and not is_struct(overrides) do
    Map.new(overrides, fn {key, value} ->
      if hashed?, do: hashable!(key, caller)
      {key, pinned!(key, value, caller)}
    end)
  end

  def new!(other, caller, _hashed?) do
    raise ArgumentError,
          "#{caller} option :overrides must be a map of key => node or [node, ...], " <>
            "got: #{HRW.Brief.brief(other)}"
  end

  # The same check, and so the same refusal, as every lookup of the key makes.
  defp hashable!(key, caller) do
    _ = HRW.Native.term_id(key)
    :ok
  rescue
    error in ArgumentError ->
      raise ArgumentError,
            "#{caller} option :overrides: key #{HRW.Brief.brief(key)} can never be looked up " <>
              "(#{Exception.message(error)}), so it cannot be overridden; leave it out"
  end

  defp pinned!(key, [_ | _] = nodes, caller) do
    if HRW.Options.proper?(nodes) do
      Enum.uniq(nodes)
    else
      raise ArgumentError,
            "#{caller} option :overrides: the nodes for key #{HRW.Brief.brief(key)} " <>
              "must be a proper list, got an improper list"
    end
  end

  defp pinned!(key, [], caller) do
    raise ArgumentError,
          "#{caller} option :overrides: the node list for key #{HRW.Brief.brief(key)} is empty " <>
            "(give at least one node, or leave the key out)"
  end

  defp pinned!(_key, node, _caller), do: [node]

  @doc "The overrides as a map (`%{}` when there are none)."
  @spec to_map(t() | nil) :: t()
  def to_map(nil), do: %{}
  def to_map(overrides) when is_map(overrides), do: overrides

  @doc "The pinned nodes of `key`, or `:error` when it is not overridden."
  @spec fetch(t(), term()) :: {:ok, [term(), ...]} | :error
  def fetch(overrides, key) do
    case overrides do
      %{^key => [_ | _] = nodes} -> {:ok, nodes}
      %{^key => _} -> corrupt!()
      %{} -> :error
      _ -> corrupt!()
    end
  end

  @doc "The first pinned node of `key`, or `:error` when it is not overridden."
  @spec owner(t(), term()) :: {:ok, term()} | :error
  def owner(overrides, key) do
    case fetch(overrides, key) do
      {:ok, [node | _]} -> {:ok, node}
      :error -> :error
    end
  end

  @doc """
  `count` owners of `key`: its pinned nodes first, then the structure's own owners
  (`own.(n)` returns its best `n`) without those, `count` in all (fewer when there
  are not enough distinct nodes).
  """
  @spec owners(t(), term(), non_neg_integer(), (non_neg_integer() -> [term()])) :: [term()]
  def owners(overrides, key, count, own) do
    case fetch(overrides, key) do
      :error ->
        own.(count)

      {:ok, pinned} ->
        case take(pinned, count, []) do
          {taken, 0} ->
            taken

          {taken, missing} ->
            # At most length(pinned) of the structure's own owners are pinned ones.
            rest =
              (count + length(pinned))
              |> HRW.Options.count!()
              |> own.()
              |> Enum.reject(&:lists.member(&1, pinned))
              |> Enum.take(missing)

            taken ++ rest
        end
    end
  end

  # The first `count` elements, and how many were missing.
  defp take(_list, 0, acc), do: {Enum.reverse(acc), 0}
  defp take([], count, acc), do: {Enum.reverse(acc), count}
  defp take([x | rest], count, acc), do: take(rest, count - 1, [x | acc])

  @doc """
  Replaces, in a batch's `owners` (one per key, in key order), the owner of every
  overridden key by its first pinned node.
  """
  @spec patch([term()], [term()], t()) :: [term()]
  def patch(keys, owners, overrides) do
    check_map!(overrides)
    do_patch(keys, owners, overrides)
  end

  defp do_patch([key | keys], [owner | owners], overrides) do
    case overrides do
      %{^key => [node | _]} -> [node | do_patch(keys, owners, overrides)]
      %{^key => _} -> corrupt!()
      _ -> [owner | do_patch(keys, owners, overrides)]
    end
  end

  defp do_patch([], [], _overrides), do: []

  @doc """
  True when some element of `keys` is overridden. An improper tail is ignored (the
  native call that follows reports it).
  """
  @spec any_key?(list(), t()) :: boolean()
  def any_key?(keys, overrides) do
    check_map!(overrides)
    do_any_key?(keys, overrides)
  end

  defp do_any_key?([key | keys], overrides),
    do: is_map_key(overrides, key) or do_any_key?(keys, overrides)

  defp do_any_key?(_, _overrides), do: false

  @doc """
  Patches a batch's `groups` (`%{node => keys}`, each in key order, computed
  without the overrides) for the overrides. `own_owner.(key)` is the structure's
  owner of a key without overrides. Only the groups that overridden keys leave or
  join change; at most one more walk over `keys`, when a pinned node already owns
  some of them.
  """
  @spec regroup([term()], %{term() => [term()]}, t(), (term() -> term())) ::
          %{term() => [term()]}
  def regroup(keys, groups, overrides, own_owner) do
    check_map!(overrides)

    case pinned_in_batch(keys, overrides, []) do
      [] -> groups
      pinned -> regroup(keys, groups, overrides, own_owner, pinned)
    end
  end

  defp regroup(keys, groups, overrides, own_owner, pinned) do
    # The groups the overridden keys leave.
    groups =
      pinned
      |> Enum.map(fn {key, _node} -> key end)
      |> Enum.uniq()
      |> Enum.map(own_owner)
      |> Enum.uniq()
      |> Enum.reduce(groups, fn node, groups ->
        case Enum.reject(Map.get(groups, node, []), &is_map_key(overrides, &1)) do
          [] -> Map.delete(groups, node)
          kept -> Map.put(groups, node, kept)
        end
      end)

    # The groups they join: new ones are the pinned keys alone; a node that already
    # owns keys gets both, merged in key order by one walk.
    {merge, new} =
      pinned |> group_pairs() |> Enum.split_with(fn {node, _} -> is_map_key(groups, node) end)

    groups = Map.merge(groups, Map.new(new))
    merge = Map.new(merge)

    if merge == %{} do
      groups
    else
      queues = Map.new(merge, fn {node, _} -> {node, Map.fetch!(groups, node)} end)
      heads = Map.new(queues, fn {node, [head | _]} -> {head, node} end)
      merged = merge_walk(keys, overrides, merge, queues, heads, %{})
      Map.merge(groups, Map.new(merged, fn {node, rev} -> {node, :lists.reverse(rev)} end))
    end
  end

  # `{key, first pinned node}` for every overridden key of the batch, in key order.
  defp pinned_in_batch([key | keys], overrides, acc) do
    case overrides do
      %{^key => [node | _]} -> pinned_in_batch(keys, overrides, [{key, node} | acc])
      %{^key => _} -> corrupt!()
      _ -> pinned_in_batch(keys, overrides, acc)
    end
  end

  defp pinned_in_batch(_end, _overrides, acc), do: :lists.reverse(acc)

  defp group_pairs(pairs) do
    pairs
    |> :lists.reverse()
    |> Enum.reduce(%{}, fn {key, node}, acc -> Map.update(acc, node, [key], &[key | &1]) end)
  end

  # Walks the batch once, rebuilding (reversed) the groups of `merge`'s nodes: a key
  # is an overridden one pinned to such a node, or the next key of the node's own
  # group (`queues`; `heads` maps each queue's next key to its node: a key that is
  # not overridden has one own owner, so two queues never share a head).
  defp merge_walk([key | keys], overrides, merge, queues, heads, out) do
    cond do
      is_map_key(overrides, key) ->
        [node | _] = Map.fetch!(overrides, key)

        out = if is_map_key(merge, node), do: prepend(out, node, key), else: out
        merge_walk(keys, overrides, merge, queues, heads, out)

      is_map_key(heads, key) ->
        node = Map.fetch!(heads, key)
        [^key | rest] = Map.fetch!(queues, node)

        heads =
          case rest do
            [^key | _] -> heads
            [next | _] -> heads |> Map.delete(key) |> Map.put(next, node)
            [] -> Map.delete(heads, key)
          end

        merge_walk(
          keys,
          overrides,
          merge,
          Map.put(queues, node, rest),
          heads,
          prepend(out, node, key)
        )

      true ->
        merge_walk(keys, overrides, merge, queues, heads, out)
    end
  end

  defp merge_walk([], _overrides, _merge, _queues, _heads, out), do: out

  defp prepend(out, node, key), do: Map.update(out, node, [key], &[key | &1])

  @doc """
  `{key, from, to}` for every key whose owner differs (exactly: `1` and `1.0` are
  different nodes, `nil` and `false` are owners like any other), in key order.
  """
  @spec moves([term()], [term()], [term()]) :: [{term(), term(), term()}]
  def moves([key | keys], [from | froms], [to | tos]) do
    if from === to do
      moves(keys, froms, tos)
    else
      [{key, from, to} | moves(keys, froms, tos)]
    end
  end

  def moves([], [], []), do: []

  @doc "What `Inspect` adds for the overrides."
  @spec label(t() | nil) :: [String.t()]
  def label(nil), do: []
  def label(overrides) when is_map(overrides), do: ["overrides: #{map_size(overrides)}"]
  def label(_), do: ["overrides: corrupt"]

  defp check_map!(overrides) when is_map(overrides), do: :ok
  defp check_map!(_), do: corrupt!()

  defp corrupt! do
    raise ArgumentError,
          "the struct's :overrides field was changed by hand: " <>
            "build the structure with the :overrides option instead"
  end
end
