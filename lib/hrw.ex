defmodule HRW do
  @moduledoc """
  Rendezvous hashing (highest random weight): which node owns a key, answered the
  same way on every machine, with few keys moving when nodes come and go.

  A drop-in replacement for the hrw 0.2.1 package with the same functions, options
  and return shapes, scored natively by the N3 function over canonical term ids
  (the contract is docs/HASHING.md):

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

  import HRW.Prepared, only: [is_prepared: 1]

  alias HRW.{Native, Options, Prepared}

  defstruct [:hash_fn]

  @typedoc "The default scorer; with a `hash_fn` it scores like hrw 0.2.1."
  @type t :: %__MODULE__{hash_fn: (term() -> integer()) | nil}

  @typedoc "A plain list of nodes: any terms."
  @type nodes :: [term(), ...]

  @doc """
  Scores `node` for `key`; the highest score owns the key.

  With `hash_fn: nil` this is the N3 score of the two terms' canonical ids, an
  unsigned 64-bit integer. With a `hash_fn` it is `hash_fn.({key, node})`, as in
  hrw 0.2.1. A first argument that is not an `%HRW{}`, or a `hash_fn` that is not
  a function of arity 1, raises `ArgumentError`.

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

  def score(%__MODULE__{hash_fn: hash_fn}, key, node) when is_function(hash_fn, 1),
    do: hash_fn.({key, node})

  def score(%__MODULE__{} = scorer, _key, _node) do
    _ = Options.scorer_struct!(scorer, "scorer")
    raise ArgumentError, "HRW.score/3 expects an %HRW{} scorer, got: #{HRW.Brief.brief(scorer)}"
  end

  def score(other, _key, _node),
    do:
      raise(ArgumentError, "HRW.score/3 expects an %HRW{} scorer, got: #{HRW.Brief.brief(other)}")

  @doc """
  The canonical 64-bit id of any term, the input to every native score.

  A binary's id is XXH3-64 (seed 0) of its bytes, so other languages can
  reproduce it; other terms use the tagged scheme of docs/HASHING.md.

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

  # The common calls, with no options, skip option parsing. Any map goes to
  # `HRW.Prepared.owner/2`, which picks a ring's or skeleton's NIF (or refuses it).
  def owner(key, nodes, []) when is_list(nodes), do: Native.list_owner(key, nodes, false)
  def owner(key, target, []) when is_map(target), do: Prepared.owner(key, target)

  def owner(key, target, opts) when is_prepared(target) do
    _ = Options.scorer!(opts, "HRW.owner/3")
    Prepared.owner(key, target)
  end

  def owner(key, nodes, opts) when is_list(nodes) do
    case Options.scorer!(opts, "HRW.owner/3") do
      :native -> Native.list_owner(key, nodes, false)
      :weighted -> Native.list_owner(key, nodes, true)
      scorer -> HRW.Compat.owner(key, Options.nodes!(nodes), scorer)
    end
  end

  def owner(_key, nodes, _opts), do: raise(ArgumentError, Options.not_target(nodes))

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

  def owners(key, target, count, opts) when is_prepared(target) do
    _ = Options.scorer!(opts, "HRW.owners/4")
    Prepared.owners(key, target, Options.count!(count))
  end

  def owners(key, nodes, count, opts) when is_list(nodes) do
    count = Options.count!(count)

    case Options.scorer!(opts, "HRW.owners/4") do
      :native -> Native.list_owners(key, nodes, count, false)
      :weighted -> Native.list_owners(key, nodes, count, true)
      scorer -> HRW.Compat.owners(key, Options.nodes!(nodes), count, scorer)
    end
  end

  def owners(_key, nodes, _count, _opts), do: raise(ArgumentError, Options.not_target(nodes))

  @doc """
  Builds an O(log n) skeleton of `nodes` for `owner/3` and `owners/4`: fair,
  churn-stable, in a NIF resource. See `HRW.Skeleton`.

  ## Options

    * `:cluster_size` - the most nodes in a leaf of the trie, an integer in
      `1..4096`; a lookup scans one leaf exactly. Defaults to `16`. At or below this
      many nodes the skeleton's owners are exactly the list's. Larger leaves mean
      fewer levels, slightly slower lookups and larger (rarer) key movements when a
      leaf splits.
    * `:fanout` - accepted for compatibility with hrw 0.2.1 and **ignored**: the
      trie is binary whatever the value (one coin per level), so no value moves a
      key. It must still be an integer in `2..4096`, as hrw code passes; there is
      no default (the struct's `fanout` is `nil` when the option is not given), and
      `inspect` shows a given value as `fanout: 3 (ignored)`.
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
      #HRW.Skeleton<3 nodes, cluster_size: 16, scorer: %HRW{hash_fn: nil}>
      iex> HRW.owner("192.168.0.2", skeleton) == HRW.owner("192.168.0.2", ["server1", "server2", "server3"])
      true
      iex> HRW.build(["server1", "server2", "server3"], fanout: 3)
      #HRW.Skeleton<3 nodes, cluster_size: 16, fanout: 3 (ignored), scorer: %HRW{hash_fn: nil}>

      iex> skeleton = HRW.build(["server1", "server2", "server3"],
      ...>   overrides: %{"hot" => "big-server", "pinned" => ["server3", "server1"]})
      #HRW.Skeleton<3 nodes, cluster_size: 16, scorer: %HRW{hash_fn: nil}, overrides: 2>
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

  A batch whose work exceeds the normal-scheduler budget, or that has more keys
  than a normal-scheduler call takes, runs on a dirty CPU scheduler; large batches
  are spread over a pool of one thread fewer than the dirty CPU schedulers, leaving
  a core to the normal schedulers (docs/GUARANTEES.md, "Scheduling", gives the
  budget and both key counts). To choose the pool's size, set the application
  environment `config :hrw, batch_threads: n` (a whole number from 1 to 4 times the
  schedulers online; anything else raises `ArgumentError` at the next batch) before
  the first batch large enough to be spread: it creates the pool, once. The calling
  process waits, other processes keep running. A list target is prepared once for
  the whole batch. Options as for `owner/3`.

  Very large results land on the caller's heap: a process that receives a
  10M-element list spends a long time in garbage collection, as with any
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
  owner differs between `before` and `later` (node lists, rings or skeletons), in key
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
  def moves(keys, before, later, opts \\ []),
    do: HRW.Batch.moves(keys, before, later, opts, "HRW.moves/4")

  @doc """
  The fraction of `keys` whose owner differs between `before` and `later`: a sample
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
    case HRW.Batch.moves(keys, before, later, opts, "HRW.moved_fraction/4") do
      [] -> 0.0
      moved -> length(moved) / length(keys)
    end
  end
end
