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
    * `build/2`: an O(log n) skeleton (`HRW.Skeleton`), fair and stable under churn,
      for large node sets.

  The `:scorer` option of `owner/3` and `owners/4` is ignored for rings and
  skeletons: their scorer was chosen when they were built.

  Rings and skeletons can pin chosen keys to chosen nodes (option `:overrides` of
  `HRW.Ring.new/2` and `build/2`); every lookup, batch and movement plan on them
  follows those overrides.

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
    Native.score(key, node)
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
    Native.term_id(term)
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
  @spec owner(term(), nodes() | HRW.Ring.t() | HRW.Skeleton.t(), keyword()) :: term()
  def owner(key, nodes, opts \\ [])

  # The common calls, with no options, skip option parsing.
  def owner(key, nodes, []) when is_list(nodes), do: list_owner(key, nodes, false)

  def owner(key, %HRW.Skeleton{resource: r, nodes: nodes, overrides: nil} = skeleton, [])
      when is_reference(r),
      do: Native.skeleton_owner(r, nodes, skeleton, key)

  def owner(key, %HRW.Ring{resource: r, nodes: nodes, overrides: nil} = ring, [])
      when is_reference(r),
      do: Native.ring_owner(r, nodes, ring, key)

  def owner(key, %HRW.Ring{} = ring, []), do: HRW.Ring.owner(ring, key)
  def owner(key, %HRW.Skeleton{} = skeleton, []), do: HRW.Skeleton.owner(skeleton, key)

  def owner(key, %HRW.Skeleton{} = skeleton, opts) do
    _ = scorer(opts, "HRW.owner/3")
    HRW.Skeleton.owner(skeleton, key)
  end

  def owner(key, %HRW.Ring{} = ring, opts) do
    _ = scorer(opts, "HRW.owner/3")
    HRW.Ring.owner(ring, key)
  end

  def owner(key, nodes, opts) when is_list(nodes) do
    case scorer(opts, "HRW.owner/3") do
      :native -> list_owner(key, nodes, false)
      :weighted -> list_owner(key, nodes, true)
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
  @spec owners(term(), nodes() | HRW.Ring.t() | HRW.Skeleton.t(), non_neg_integer(), keyword()) ::
          [term()]
  def owners(key, nodes, count, opts \\ [])

  def owners(key, %HRW.Skeleton{} = skeleton, count, opts) do
    _ = scorer(opts, "HRW.owners/4")
    HRW.Skeleton.owners(skeleton, key, checked_count(count))
  end

  def owners(key, %HRW.Ring{} = ring, count, opts) do
    _ = scorer(opts, "HRW.owners/4")
    HRW.Ring.owners(ring, key, checked_count(count))
  end

  def owners(key, nodes, count, opts) when is_list(nodes) do
    count = checked_count(count)

    case scorer(opts, "HRW.owners/4") do
      :native -> list_owners(key, nodes, count, false)
      :weighted -> list_owners(key, nodes, count, true)
      scorer -> HRW.Compat.owners(key, checked_list(nodes), count, scorer)
    end
  end

  def owners(_key, nodes, _count, _opts), do: raise(ArgumentError, not_nodes(nodes))

  @doc """
  Builds an O(log n) skeleton of `nodes` for `owner/3` and `owners/4`: fair,
  churn-stable, in a NIF resource. See `HRW.Skeleton`.

  ## Options

    * `:cluster_size` - the most nodes in a leaf of the trie; a lookup scans one
      leaf exactly. Defaults to `16`. At or below this many nodes the skeleton's
      owners are exactly the list's. Larger leaves mean fewer levels, slightly
      slower lookups and larger (rarer) key movements when a leaf splits.
    * `:fanout` - accepted for compatibility with hrw 0.2.1 and shown by `inspect`;
      the trie is binary (one coin per level) whatever its value. Defaults to `2`.
    * `:scorer` - `%HRW{}` (default), `%HRW.Weighted{}` for `{node, weight}` nodes
      (each node's share is `w/Σw`), or an Elixir scorer (lookups then score every
      node with it, exactly but in O(n)).
    * `:overrides` - `%{key => node | [node, ...]}`: pins keys to chosen nodes,
      which need not be members. An overridden key's owner is its first pinned
      node; `owners/4` lists the pinned nodes first, then the skeleton's own owners
      without those. Batches, `group_by_owner/3` and `moves/4` follow them. Keys
      match exactly, as map keys (`1` and `1.0` differ); a list value is always a
      list of nodes. A key nested deeper than 256 levels, which no lookup of a
      native skeleton accepts, is refused (a skeleton scored in Elixir takes any
      key). Read them back with `HRW.Skeleton.overrides/1`. The same
      option exists for `HRW.Ring.new/2`, where it is described in full. A
      skeleton without overrides pays nothing for the feature.

  ## Examples

      iex> skeleton = HRW.build(["server1", "server2", "server3"])
      #HRW.Skeleton<3 nodes, cluster_size: 16, fanout: 2, scorer: %HRW{hash_fn: nil}>
      iex> HRW.owner("192.168.0.2", skeleton) == HRW.owner("192.168.0.2", ["server1", "server2", "server3"])
      true

      iex> skeleton = HRW.build(["server1", "server2", "server3"],
      ...>   overrides: %{"hot" => "big-server", "pinned" => ["server3", "server1"]})
      #HRW.Skeleton<3 nodes, cluster_size: 16, fanout: 2, scorer: %HRW{hash_fn: nil}, overrides: 2>
      iex> HRW.owner("hot", skeleton)
      "big-server"
      iex> HRW.owners("pinned", skeleton, 3)
      ["server3", "server1", "server2"]
      iex> HRW.owner_batch(["hot", "pinned"], skeleton)
      ["big-server", "server3"]
  """
  @spec build(nodes(), keyword()) :: HRW.Skeleton.t()
  def build(nodes, opts \\ []), do: HRW.Skeleton.build(nodes, opts)

  @typedoc "Where keys are looked up: a node list, a ring or a skeleton."
  @type target :: nodes() | HRW.Ring.t() | HRW.Skeleton.t()

  @doc """
  The owners of many keys at once, in key order: equal to
  `Enum.map(keys, &HRW.owner(&1, target, opts))`, in one NIF call.

  Batches above ~0.5 ms of work run on a dirty CPU scheduler, and batches of
  20,000 keys or more are spread over a pool of one thread fewer than the dirty CPU
  schedulers (a core is left to the normal schedulers; set the application
  environment `config :hrw, batch_threads: n` to choose, before the first large
  batch creates the pool); the calling process waits, other processes keep running. A list target is prepared once for the whole batch.
  Options as for `owner/3`.

  Very large results land on the caller's heap: a process that receives a
  10M-element list spends tens of milliseconds in garbage collection, as with any
  list that size, so run such batches in a process of their own.

  On a ring or skeleton with overrides the batch is computed natively, then the
  overridden keys get their pinned owner.

  ## Examples

      iex> nodes = ["cache-1", "cache-2", "cache-3"]
      iex> HRW.owner_batch(["user:1", "user:2", "user:3", "user:4"], HRW.Ring.new(nodes))
      ["cache-3", "cache-3", "cache-3", "cache-1"]
      iex> HRW.owner_batch(["user:1", "user:2"], nodes) == Enum.map(["user:1", "user:2"], &HRW.owner(&1, nodes))
      true
  """
  @spec owner_batch([term()], target(), keyword()) :: [term()]
  def owner_batch(keys, target, opts \\ []), do: HRW.Batch.owners(keys, target, opts)

  @doc """
  Groups keys by owner: `%{node => keys}`, each group in key order, nodes that own
  no key left out. The shape a router needs to send one request per node. Runs like
  `owner_batch/3`, overrides included (a pinned node that is not a member gets a
  group too).

  ## Examples

      iex> HRW.group_by_owner(["user:1", "user:4", "user:2", "user:5"], ["cache-1", "cache-2", "cache-3"])
      %{"cache-1" => ["user:4", "user:5"], "cache-3" => ["user:1", "user:2"]}
  """
  @spec group_by_owner([term()], target(), keyword()) :: %{term() => [term()]}
  def group_by_owner(keys, target, opts \\ []), do: HRW.Batch.groups(keys, target, opts)

  @doc """
  The movement plan between two placements: `{key, from, to}` for every key whose
  owner differs between `before` and `after` (node lists, rings or skeletons), in key
  order. What a cache or store must copy when membership changes.

  Owners are compared exactly (`1` and `1.0` are different nodes; `nil` and `false`
  are owners like any other), and each structure's overrides count. The options
  are those of `owner/3` and apply to list targets (as for `owner_batch/3`): pass
  `scorer: %HRW.Weighted{}` when both lists hold `{node, weight}` entries, else each
  tuple is taken for a plain node.

  ## Examples

      iex> before = HRW.Ring.new(["a", "b", "c"])
      iex> later = HRW.Ring.new(["a", "b", "c", "d"])
      iex> keys = Enum.map(1..1000, &"key-\#{&1}")
      iex> moves = HRW.moves(keys, before, later)
      iex> Enum.all?(moves, fn {_key, _from, to} -> to == "d" end)
      true
  """
  @spec moves([term()], target(), target(), keyword()) :: [{term(), term(), term()}]
  def moves(keys, before, later, opts \\ []), do: HRW.Batch.moves(keys, before, later, opts)

  @doc """
  The fraction of `keys` whose owner differs between `before` and `after`: a sample
  estimate of how much a membership change moves (`0.0` for no keys). Owners
  compare and options work as for `moves/4`.

  ## Examples

      iex> keys = Enum.map(1..10_000, &"key-\#{&1}")
      iex> f = HRW.moved_fraction(keys, ["a", "b", "c"], ["a", "b"])
      iex> f > 0.28 and f < 0.39
      true
      iex> HRW.moved_fraction(keys, [{"a", 1}, {"b", 1}], [{"a", 1}, {"b", 1.0}],
      ...>   scorer: %HRW.Weighted{})
      0.0
  """
  @spec moved_fraction([term()], target(), target(), keyword()) :: float()
  def moved_fraction(keys, before, later, opts \\ []) do
    case moves(keys, before, later, opts) do
      [] -> 0.0
      moved -> length(moved) / length(keys)
    end
  end

  # -- native calls ------------------------------------------------------------

  defp list_owner(key, nodes, weighted?), do: Native.list_owner(key, nodes, weighted?)

  defp list_owners(key, nodes, count, weighted?),
    do: Native.list_owners(key, nodes, count, weighted?)

  # -- validation --------------------------------------------------------------

  # The NIF takes counts up to 2^32 - 1; nobody has more nodes than that.
  @max_count 0xFFFF_FFFF

  defp checked_count(count) when is_integer(count) and count >= 0, do: min(count, @max_count)

  defp checked_count(count) do
    raise ArgumentError, "count must be a non-negative integer, got: #{brief(count)}"
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
    "expected nodes to be a non-empty list, got: #{brief(nodes)}"
  end

  @doc false
  # Validates `opts` (only `allowed` keys) and resolves the `:scorer` option:
  # `:native` (N3), `:weighted` (native weighted) or a struct scored in Elixir.
  @spec scorer(keyword(), String.t(), [atom()]) :: :native | :weighted | struct()
  def scorer(opts, caller, allowed \\ [:scorer]) do
    options!(opts, caller, allowed)

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
        raise ArgumentError, "hash_fn must be a function of arity 1, got: #{brief(f)}"

      %mod{} = scorer ->
        if function_exported?(mod, :score, 3) do
          scorer
        else
          raise ArgumentError, "scorer #{inspect(mod)} does not implement HRW.Scorer.score/3"
        end

      other ->
        raise ArgumentError, "scorer must be a scorer struct, got: #{brief(other)}"
    end
  end

  @doc false
  # Checks that `opts` is a keyword list of `allowed` keys, each given at most once.
  @spec options!(term(), String.t(), [atom()]) :: :ok
  def options!(opts, caller, allowed) do
    unless Keyword.keyword?(opts) do
      raise ArgumentError, "#{caller} expects a keyword list of options, got: #{brief(opts)}"
    end

    keys = Keyword.keys(opts)

    # Not `keys -- allowed`: that removes one occurrence only, so a repeated allowed
    # option would be reported as unknown.
    case keys |> Enum.reject(&(&1 in allowed)) |> Enum.uniq() do
      [] -> :ok
      unknown -> raise ArgumentError, "#{caller} got unknown options: #{brief(unknown)}"
    end

    case Enum.uniq(keys -- Enum.uniq(keys)) do
      [] ->
        :ok

      repeated ->
        raise ArgumentError,
              "#{caller} got duplicated options: #{brief(repeated)} (give each option once)"
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
                "#{brief(other)} runs in Elixir, use it with a plain list"
    end
  end

  @doc false
  # A short rendering of a user's value for an error message, in bounded time and
  # size whatever the value: at most 3 levels and 5 elements per level are shown,
  # binaries and atoms are cut to 64 bytes, integers beyond 64 bits are described
  # by their size (converting a bignum to decimal is quadratic), and long or
  # improper lists are never walked to their end. Text is only ever cut between
  # characters (between graphemes where the cut allows it), so the result is valid
  # UTF-8 whatever the value. Every message that shows a user's value goes through
  # here.
  @spec brief(term()) :: String.t()
  def brief(value), do: value |> brief(3) |> IO.iodata_to_binary()

  @shown 5
  @shown_bytes 64

  defp brief(i, _depth) when is_integer(i) and abs(i) > 0xFFFF_FFFF_FFFF_FFFF do
    "an integer of #{byte_size(:binary.encode_unsigned(abs(i)))} bytes"
  end

  defp brief(v, _depth) when is_integer(v) or is_float(v), do: inspect(v)

  defp brief(a, _depth) when is_atom(a), do: cut(inspect(a))

  defp brief(b, _depth) when is_binary(b) and byte_size(b) > @shown_bytes do
    [inspect(prefix(b, @shown_bytes)), "... (#{byte_size(b)} bytes)"]
  end

  defp brief(b, _depth) when is_bitstring(b) and bit_size(b) > 8 * @shown_bytes do
    "a bitstring of #{bit_size(b)} bits"
  end

  defp brief(b, _depth) when is_bitstring(b), do: inspect(b)
  defp brief(_value, 0), do: "..."
  defp brief(%module{} = struct, depth) when is_atom(module), do: map(struct, depth)
  defp brief(m, depth) when is_map(m), do: map(m, depth)

  defp brief(t, depth) when is_tuple(t) do
    shown = for i <- 1..min(tuple_size(t), @shown)//1, do: brief(elem(t, i - 1), depth - 1)
    more = if tuple_size(t) > @shown, do: [", ..."], else: []
    ["{", Enum.intersperse(shown, ", "), more, "}"]
  end

  defp brief(l, depth) when is_list(l), do: ["[", list(l, @shown, depth), "]"]
  defp brief(other, _depth), do: inspect(other)

  defp list([], _left, _depth), do: []
  defp list([_ | _], 0, _depth), do: ["..."]
  defp list([h], _left, depth), do: [brief(h, depth - 1)]

  defp list([h | [_ | _] = t], left, depth),
    do: [brief(h, depth - 1), ", " | list(t, left - 1, depth)]

  defp list([h | t], _left, depth), do: [brief(h, depth - 1), " | ", brief(t, depth - 1)]

  # Maps are read with an iterator: only the entries shown are ever visited.
  defp map(m, depth) do
    {entries, more} = take(:maps.next(:maps.iterator(m)), @shown, [])
    shown = for {k, v} <- entries, do: [brief(k, depth - 1), " => ", brief(v, depth - 1)]
    prefix = if is_struct(m), do: ["%", cut(inspect(m.__struct__)), "{"], else: "%{"
    [prefix, Enum.intersperse(shown, ", "), if(more, do: ", ...", else: ""), "}"]
  end

  # Text (valid UTF-8, as `inspect` returns it) of at most @shown_bytes bytes, or its
  # first characters and "...".
  defp cut(text) when byte_size(text) <= @shown_bytes, do: text
  defp cut(text), do: [prefix(text, @shown_bytes), "..."]

  # The longest prefix of `bytes` of at most `max` bytes (`max < byte_size(bytes)`)
  # that does not end inside a UTF-8 character, nor, unless that leaves nothing,
  # inside a grapheme: a UTF-8 binary stays UTF-8. Other binaries are cut at `max`,
  # or just before bytes that look like the start of a character. Bounded work: at
  # most `max` + 4 bytes are read.
  defp prefix(bytes, max) do
    at = char_start(bytes, max, max)
    head = binary_part(bytes, 0, at)
    next = binary_part(bytes, at, min(4, byte_size(bytes) - at))

    with true <- String.valid?(head),
         {char, _} <- String.next_codepoint(next),
         [_, _ | _] = graphemes <- String.graphemes(head),
         # `char` continues the last grapheme (a combining mark, say): drop that one.
         true <- length(String.graphemes(head <> char)) == length(graphemes) do
      graphemes |> Enum.drop(-1) |> IO.iodata_to_binary()
    else
      _ -> head
    end
  end

  # `at` moved back over continuation bytes (0b10xxxxxx) to the start of the
  # character the byte at `at` belongs to; `max` when no start is within 3 bytes
  # (not UTF-8 there anyway).
  defp char_start(bytes, at, max) do
    cond do
      max - at > 3 or at == 0 -> max
      Bitwise.band(:binary.at(bytes, at), 0xC0) == 0x80 -> char_start(bytes, at - 1, max)
      true -> at
    end
  end

  defp take(:none, _left, acc), do: {Enum.reverse(acc), false}
  defp take(_iter, 0, acc), do: {Enum.reverse(acc), true}
  defp take({k, v, iter}, left, acc), do: take(:maps.next(iter), left - 1, [{k, v} | acc])

  @doc false
  # A non-empty proper list, or ArgumentError.
  @spec checked_nodes!(term()) :: nodes()
  def checked_nodes!(nodes) when is_list(nodes), do: checked_list(nodes)
  def checked_nodes!(nodes), do: raise(ArgumentError, not_nodes(nodes))
end
