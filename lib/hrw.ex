defmodule HRW do
  @moduledoc """
  Rendezvous hashing (highest random weight): which node owns a key, answered the
  same way on every machine, with few keys moving when nodes come and go.

  A drop-in replacement for the hrw 0.2.1 package with the same functions, options
  and return shapes, scored natively by the N3 function over canonical term ids
  (see the README's "Hashing contract"):

    * `owner/3` and `owners/4` on a plain list: stateless, every node is hashed on
      each call (one NIF call).

    * `HRW.Ring`: the same owners as the list, prepared once in a NIF resource.

  The `:scorer` option of `owner/3` and `owners/4` is ignored for a ring: its scorer
  was chosen when it was built.

  Weighted nodes (`{node, weight}` with `scorer: %HRW.Weighted{}`) are described in
  `HRW.Weighted`.

  Keys and nodes may be any terms. Repeated nodes count once.

  ## Scorers

    * `%HRW{}` (the default): N3 over canonical term ids, in native code.
    * `%HRW{hash_fn: fun}` or any module implementing `HRW.Scorer`: scored in
      Elixir with hrw 0.2.1's semantics. `%HRW{hash_fn: &:erlang.phash2/1}` gives
      exactly hrw 0.2.1's placements, a migration path.
  """
  @behaviour HRW.Scorer

  require HRW.Native
  alias HRW.Native

  defstruct [:hash_fn]

  @typedoc "The default scorer; with a `hash_fn` it scores like hrw 0.2.1."
  @type t :: %__MODULE__{hash_fn: (term() -> integer()) | nil}

  @typedoc "A plain list of nodes: any terms."
  @type nodes :: [term(), ...]

  @doc """
  Scores `node` for `key`; the highest score owns the key.

  With `hash_fn: nil` this is the N3 score of the two terms' canonical ids, an
  unsigned 64-bit integer. With a `hash_fn` it is `hash_fn.({key, node})`, as in
  hrw 0.2.1.

  ## Examples

      iex> HRW.score(%HRW{}, "user:42", "node-1")
      5081111893328632083
      iex> HRW.score(%HRW{hash_fn: &:erlang.phash2/1}, "key", "node")
      :erlang.phash2({"key", "node"})
  """
  @impl HRW.Scorer
  @spec score(t(), term(), term()) :: integer()
  def score(%__MODULE__{hash_fn: nil}, key, node) do
    Native.dirty_fallback(Native.score(key, node), Native.score_dirty(key, node))
  end

  def score(%__MODULE__{hash_fn: hash_fn}, key, node), do: hash_fn.({key, node})

  @doc """
  The canonical 64-bit id of any term, the input to every native score.

  A binary's id is XXH3-64 (seed 0) of its bytes, so other languages can
  reproduce it; other terms use the tagged scheme in the README.

  ## Examples

      iex> HRW.term_id("a")
      0xE6C632B61E964E1F
      iex> HRW.term_id(%{a: 1, b: 2}) == HRW.term_id(%{b: 2, a: 1})
      true
      iex> HRW.term_id(1) == HRW.term_id(1.0)
      false
  """
  @spec term_id(term()) :: non_neg_integer()
  def term_id(term) do
    Native.dirty_fallback(Native.term_id(term), Native.term_id_dirty(term))
  end

  @doc """
  Returns the node that owns `key`.

  ## Options

    * `:scorer` - a scorer struct (see the module doc). Defaults to `%HRW{}`.

  ## Examples

      iex> HRW.owner("user:42", ["cache-1", "cache-2", "cache-3"])
      "cache-2"

      iex> HRW.owner("192.168.0.1", ["server1", "server2", "server3"],
      ...>   scorer: %HRW{hash_fn: &:erlang.phash2/1})
      "server2"
  """
  @spec owner(term(), nodes() | HRW.Ring.t(), keyword()) :: term()
  def owner(key, nodes, opts \\ [])

  # The common call, with no options, skips option parsing.
  def owner(key, nodes, []) when is_list(nodes), do: list_owner(key, nodes)

  def owner(key, %HRW.Ring{} = ring, opts) do
    _ = scorer(opts, "HRW.owner/3")
    HRW.Ring.owner(ring, key)
  end

  def owner(key, nodes, opts) when is_list(nodes) do
    case scorer(opts, "HRW.owner/3") do
      :native -> list_owner(key, nodes)
      :weighted -> weighted_list_owner(key, nodes)
      scorer -> HRW.Compat.owner(key, checked_list(nodes), scorer)
    end
  end

  def owner(_key, nodes, _opts), do: raise(ArgumentError, not_nodes(nodes))

  @doc """
  Returns the `count` best nodes for `key`, best first, all distinct.

  `owners(key, nodes, 1) == [owner(key, nodes)]`; a `count` larger than the number
  of distinct nodes returns them all.

  ## Options

    * `:scorer` - a scorer struct (see the module doc). Defaults to `%HRW{}`.

  ## Examples

      iex> HRW.owners("user:42", ["cache-1", "cache-2", "cache-3"], 2)
      ["cache-2", "cache-1"]

      iex> HRW.owners("192.168.0.1", ["server1", "server2", "server3"], 2,
      ...>   scorer: %HRW{hash_fn: &:erlang.phash2/1})
      ["server2", "server3"]
  """
  @spec owners(term(), nodes() | HRW.Ring.t(), non_neg_integer(), keyword()) :: [term()]
  def owners(key, nodes, count, opts \\ [])

  def owners(key, %HRW.Ring{} = ring, count, opts) do
    _ = scorer(opts, "HRW.owners/4")
    HRW.Ring.owners(ring, key, checked_count(count))
  end

  def owners(key, nodes, count, opts) when is_list(nodes) do
    count = checked_count(count)

    case scorer(opts, "HRW.owners/4") do
      :native -> list_owners(key, nodes, count)
      :weighted -> weighted_list_owners(key, nodes, count)
      scorer -> HRW.Compat.owners(key, checked_list(nodes), count, scorer)
    end
  end

  def owners(_key, nodes, _count, _opts), do: raise(ArgumentError, not_nodes(nodes))

  # -- native calls ------------------------------------------------------------

  defp list_owner(key, nodes) do
    Native.dirty_fallback(Native.list_owner(key, nodes), Native.list_owner_dirty(key, nodes))
  end

  defp list_owners(key, nodes, count) do
    Native.dirty_fallback(
      Native.list_owners(key, nodes, count),
      Native.list_owners_dirty(key, nodes, count)
    )
  end

  defp weighted_list_owner(key, nodes) do
    Native.dirty_fallback(
      Native.weighted_list_owner(key, nodes),
      Native.weighted_list_owner_dirty(key, nodes)
    )
  end

  defp weighted_list_owners(key, nodes, count) do
    Native.dirty_fallback(
      Native.weighted_list_owners(key, nodes, count),
      Native.weighted_list_owners_dirty(key, nodes, count)
    )
  end

  # -- validation --------------------------------------------------------------

  # The NIF takes counts up to 2^32 - 1; nobody has more nodes than that.
  @max_count 0xFFFF_FFFF

  defp checked_count(count) when is_integer(count) and count >= 0, do: min(count, @max_count)

  defp checked_count(count) do
    raise ArgumentError, "count must be a non-negative integer, got: #{inspect(count)}"
  end

  defp checked_list([]), do: raise(ArgumentError, "nodes must be a non-empty list")

  defp checked_list(nodes) do
    if is_list(improper_tail(nodes)) do
      nodes
    else
      raise ArgumentError, "nodes must be a proper list, got an improper list"
    end
  end

  defp improper_tail([_ | tail]), do: improper_tail(tail)
  defp improper_tail(tail), do: tail

  defp not_nodes(nodes) do
    "expected nodes to be a non-empty list, got: #{inspect(nodes, limit: 5)}"
  end

  @doc false
  # Validates `opts` (only `allowed` keys) and resolves the `:scorer` option:
  # `:native` (N3), `:weighted` (native weighted) or a struct scored in Elixir.
  @spec scorer(keyword(), String.t(), [atom()]) :: :native | :weighted | struct()
  def scorer(opts, caller, allowed \\ [:scorer]) do
    unless Keyword.keyword?(opts) do
      raise ArgumentError, "#{caller} expects a keyword list of options, got: #{inspect(opts)}"
    end

    case Keyword.keys(opts) -- allowed do
      [] -> :ok
      unknown -> raise ArgumentError, "#{caller} got unknown options: #{inspect(unknown)}"
    end

    case Keyword.get(opts, :scorer) do
      nil ->
        :native

      %HRW{hash_fn: nil} ->
        :native

      %HRW.Weighted{hash_fn: nil} ->
        :weighted

      %struct{hash_fn: f} = scorer when struct in [HRW, HRW.Weighted] and is_function(f, 1) ->
        scorer

      %struct{hash_fn: f} when struct in [HRW, HRW.Weighted] ->
        raise ArgumentError, "hash_fn must be a function of arity 1, got: #{inspect(f)}"

      %mod{} = scorer ->
        if function_exported?(mod, :score, 3) do
          scorer
        else
          raise ArgumentError, "scorer #{inspect(mod)} does not implement HRW.Scorer.score/3"
        end

      other ->
        raise ArgumentError, "scorer must be a scorer struct, got: #{inspect(other)}"
    end
  end

  @doc false
  # For prepared structures: true when weighted, raises for Elixir-side scorers.
  @spec native_scorer!(keyword(), String.t(), [atom()]) :: boolean()
  def native_scorer!(opts, caller, allowed) do
    case scorer(opts, caller, allowed) do
      :native ->
        false

      :weighted ->
        true

      other ->
        raise ArgumentError,
              "#{caller} prepares nodes for the native scorers %HRW{} and %HRW.Weighted{}; " <>
                "#{inspect(other)} runs in Elixir, use it with a plain list"
    end
  end

  @doc false
  # A non-empty proper list, or ArgumentError.
  @spec checked_nodes!(term()) :: nodes()
  def checked_nodes!(nodes) when is_list(nodes), do: checked_list(nodes)
  def checked_nodes!(nodes), do: raise(ArgumentError, not_nodes(nodes))
end
