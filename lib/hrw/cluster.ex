defmodule HRW.Cluster do
  @moduledoc """
  A prepared structure of the cluster's members, kept up to date as members come
  and go, and readable from any process without a message or a copy.

      children = [{HRW.Cluster, name: :cache_cluster}]   # in a supervision tree

      HRW.Cluster.owner(:cache_cluster, "user:42")      #=> :"cache@10.0.0.3"
      HRW.Cluster.owners(:cache_cluster, "user:42", 2)  #=> replicas, best first

  A server follows the members (the visible nodes, or the nodes of a `:pg` group),
  builds an `HRW.Skeleton` (or `HRW.Ring`) of them and publishes it in one
  `:persistent_term` entry; lookups read that entry and hash in the NIF, so a busy,
  hung or restarting server slows no lookup. Every node running an `HRW.Cluster`
  with the same options and members computes the same owners.

  The guide is docs/CLUSTER.md: "Membership and quorum" (sources, debouncing,
  departures at once, `:quorum`), "Options" (every option, and names), "History"
  (`:depth`, `back:`), "Snapshots and subscriptions" (fingerprints, agreement),
  "Overrides", "Moves", "Failures" (callbacks, crashes, take-overs), and what a
  store built on it must do itself.
  """

  alias HRW.Cluster.{Agreement, History, Moves, Options, Server}

  @typedoc "A cluster's name, as given in `:name`."
  @type name :: atom()

  @typedoc "The prepared structure of the members, `nil` while there are none."
  @type structure :: HRW.Skeleton.t() | HRW.Ring.t() | nil

  @typedoc "A node filter: a predicate, or regexes matched against the node's name."
  @type filter :: (node() -> as_boolean(term())) | [Regex.t()]

  @type option ::
          {:name, name()}
          | {:structure, :skeleton | :ring}
          | {:source, :nodes | {:pg, atom(), term()}}
          | {:debounce, non_neg_integer()}
          | {:depth, pos_integer()}
          | {:allow, filter()}
          | {:deny, filter()}
          | {:weight_fn, (node() -> number())}
          | {:cluster_size, pos_integer()}
          | {:poll_interval, pos_integer()}
          | {:callback_timeout, pos_integer()}
          | {:overrides, %{optional(term()) => node() | [node()]}}
          | {:quorum, pos_integer() | {:majority, pos_integer()}}

  @typedoc "Options of the lookups: which generation to answer for (default `back: 0`)."
  @type lookup_option :: {:back, non_neg_integer()}

  @typedoc """
  The message a subscriber receives after each change: structures with
  `subscribe/1`, snapshots (generation and fingerprint included) with
  `subscribe(name, :snapshots)`.
  """
  @type change ::
          {:hrw_cluster_changed, name(), structure(), structure()}
          | {:hrw_cluster_snapshot, name(), HRW.Cluster.Snapshot.t(), HRW.Cluster.Snapshot.t()}

  @typedoc "What `await_agreement/2` found when the members did not all agree in time."
  @type disagreement :: %{
          fingerprint: non_neg_integer(),
          disagree: %{optional(node()) => non_neg_integer()},
          no_answer: %{optional(node()) => term()}
        }

  # -- starting --------------------------------------------------------------------

  @doc """
  A child specification for a supervisor; `opts` as in "Options" in
  docs/CLUSTER.md (validated here, so a bad option raises `ArgumentError` before
  the supervisor starts). The child's id is `{HRW.Cluster, name}`, so one
  supervisor can run several clusters.

  ## Examples

      iex> HRW.Cluster.child_spec(name: :my_cluster).id
      {HRW.Cluster, :my_cluster}
  """
  @spec child_spec([option()]) :: Supervisor.child_spec()
  def child_spec(opts) do
    config = Options.config!(opts)

    %{
      id: {__MODULE__, config.name},
      start: {__MODULE__, :start_link, [opts]},
      type: :worker,
      shutdown: 5_000
    }
  end

  @doc """
  Starts a cluster server linked to the caller; `opts` as in "Options" in
  docs/CLUSTER.md. Its first structure is published before this returns.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_cluster)
      iex> node() in HRW.Cluster.members(:doc_cluster)
      true
      iex> HRW.Cluster.owner(:doc_cluster, "user:42") in HRW.Cluster.members(:doc_cluster)
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec start_link([option()]) :: GenServer.on_start()
  def start_link(opts) do
    config = Options.config!(opts)
    GenServer.start_link(Server, config, name: Options.server_name(config.name))
  end

  @doc """
  Starts a cluster server that is not linked to the caller (from a shell, or on
  another node with `:erpc.call(node, HRW.Cluster, :start, [opts])`). Prefer
  `start_link/1` under a supervisor.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start(name: :doc_start)
      iex> HRW.Cluster.members(:doc_start) == [node()]
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec start([option()]) :: GenServer.on_start()
  def start(opts) do
    config = Options.config!(opts)
    GenServer.start(Server, config, name: Options.server_name(config.name))
  end

  # -- lookups ---------------------------------------------------------------------

  @doc """
  The member that owns `key`, or `nil` while the cluster has no member.

  Reads the published entry (no message, no copy) and hashes `key` natively:
  `HRW.owner(key, structure(name, opts))`. With `back: b`, answers for the
  generation published `b` changes ago (see "History" in docs/CLUSTER.md).
  Raises `ArgumentError` when no cluster called `name` has published an entry, or
  for a bad option.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_owner, depth: 2)
      iex> HRW.Cluster.owner(:doc_owner, "user:42") == HRW.owner("user:42", HRW.Cluster.members(:doc_owner))
      true
      iex> HRW.Cluster.owner(:doc_owner, "user:42", back: 1)
      nil
      iex> GenServer.stop(pid)
      iex> HRW.Cluster.owner(:doc_owner, "user:42")
      ** (ArgumentError) no HRW.Cluster named :doc_owner is running
  """
  @spec owner(name(), term(), [lookup_option()]) :: node() | nil
  def owner(name, key, opts \\ []) do
    case structure(name, opts) do
      nil -> nil
      structure -> HRW.owner(key, structure)
    end
  end

  @doc """
  The `count` best members for `key`, best first (`[]` while there is no member).
  With `back: b`, answers for the generation published `b` changes ago. Raises
  `ArgumentError` when no cluster called `name` has published an entry, or for a
  bad count or option.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_owners)
      iex> [first | _] = HRW.Cluster.owners(:doc_owners, "user:42", 3)
      iex> first == HRW.Cluster.owner(:doc_owners, "user:42")
      true
      iex> HRW.Cluster.owners(:doc_owners, "user:42", -1)
      ** (ArgumentError) count must be a non-negative integer, got: -1
      iex> GenServer.stop(pid)
      :ok
  """
  @spec owners(name(), term(), non_neg_integer(), [lookup_option()]) :: [node()]
  def owners(name, key, count, opts \\ []) do
    structure = structure(name, opts)
    count = HRW.Options.count!(count)
    if structure == nil, do: [], else: HRW.owners(key, structure, count)
  end

  @doc """
  The distinct owners of `key` over every kept generation: the `count` best owners
  in each generation (as `owners/4` with `back: 0`, `1`, … up to the depth minus
  one), concatenated newest first, each owner kept at its first place. The result
  begins with `owners(name, key, count)` and holds at most depth × `count` owners.
  Raises `ArgumentError` when no cluster called `name` has published an entry, or
  for a bad count.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_stable, depth: 3)
      iex> HRW.Cluster.stable_owners(:doc_stable, "user:42", 2) == HRW.Cluster.owners(:doc_stable, "user:42", 2)
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec stable_owners(name(), term(), non_neg_integer()) :: [node()]
  def stable_owners(name, key, count), do: History.stable_owners(name, key, count)

  @doc """
  The number of structures published so far under `name`: 1 once the first is
  published, one more per change. It survives server restarts (see "Failures" in
  docs/CLUSTER.md) and starts again from 1 after a `:normal` stop. Raises
  `ArgumentError` when no cluster called `name` has published an entry.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_generation)
      iex> HRW.Cluster.generation(:doc_generation)
      1
      iex> GenServer.stop(pid)
      :ok
  """
  @spec generation(name()) :: pos_integer()
  def generation(name), do: History.generation(name)

  @doc """
  The current generation, its members, fingerprint, quorum and structure, from one
  read of the entry: a consistent sample, where `generation/1`, `members/2` and
  `structure/2` called one after the other may straddle a change. See
  `HRW.Cluster.Snapshot`. Raises `ArgumentError` when no cluster called `name` has
  published an entry.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_snapshot)
      iex> snapshot = HRW.Cluster.snapshot(:doc_snapshot)
      iex> {snapshot.generation, snapshot.members, snapshot.quorum?}
      {1, [node()], true}
      iex> snapshot.fingerprint == HRW.Cluster.Fingerprint.of([node()])
      true
      iex> HRW.owner("user:42", snapshot.structure) == HRW.Cluster.owner(:doc_snapshot, "user:42")
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec snapshot(name()) :: HRW.Cluster.Snapshot.t()
  def snapshot(name), do: Server.snapshot!(name)

  @doc """
  The fingerprint of the current members (`HRW.Cluster.Fingerprint`): the same on
  every node whose view holds the same members (and weights). Raises
  `ArgumentError` when no cluster called `name` has published an entry.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_fingerprint)
      iex> HRW.Cluster.fingerprint(:doc_fingerprint) == HRW.Cluster.Fingerprint.of([node()])
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec fingerprint(name()) :: non_neg_integer()
  def fingerprint(name), do: Server.snapshot!(name).fingerprint

  @doc """
  Waits at most `timeout` ms until every member of this node's view runs the
  cluster `name` with the same fingerprint as this node. Asks the members with
  `:erpc.multicall/5` (each round bounded by the time left), again 20 ms after a
  round in which some disagree, and reads this node's view again each round (it
  may change meanwhile). A new round starts only while the time left is at least
  as long as the last round took, so the answer is that of a whole round.

  Returns `{:ok, fingerprint}`, or `{:error, disagreement}` when the time is up:
  the local `:fingerprint`, the members whose fingerprint differs (`:disagree`,
  node => theirs) and those that did not answer (`:no_answer`, node => the
  `:erpc` error, or `:not_running` when no cluster of that name runs there), as
  of the last round. Raises `ArgumentError` when no cluster called `name` has
  published an entry here, or for a bad timeout.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_agreement)
      iex> {:ok, fingerprint} = HRW.Cluster.await_agreement(:doc_agreement, 1_000)
      iex> fingerprint == HRW.Cluster.fingerprint(:doc_agreement)
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec await_agreement(name(), non_neg_integer()) ::
          {:ok, non_neg_integer()} | {:error, disagreement()}
  def await_agreement(name, timeout) do
    timeout =
      HRW.Options.integer!(timeout, "HRW.Cluster.await_agreement/2", :timeout, 0, 4_294_967_295)

    _ = snapshot(name)
    Agreement.await(name, System.monotonic_time(:millisecond) + timeout)
  end

  @doc """
  What a store holding `keys` must move between two views: `{key, old_owners,
  new_owners}` for each key whose `count` best owners differ (as lists: a new
  first owner counts, so `count: 1` lists the keys of `HRW.moves/3`). `old` and
  `new` are snapshots (`snapshot/1`, or those of a `:snapshots` message),
  structures, or `nil`: a view without a member or without quorum owns nothing, so
  its owners are `[]` and every key moves to (or from) it. Keys are taken in the
  given order, each once. Raises `ArgumentError` for a bad count or structure.

  ## Examples

      iex> old = HRW.Ring.new([:"a@h", :"b@h"])
      iex> new = HRW.Ring.new([:"a@h", :"b@h", :"c@h"])
      iex> moves = HRW.Cluster.moves(["k1", "k2", "k3", "k4"], old, new, 2)
      iex> Enum.all?(moves, fn {_key, _old, new_owners} -> :"c@h" in new_owners end)
      true
      iex> HRW.Cluster.moves(["k1"], nil, new, 2) == [{"k1", [], HRW.owners("k1", new, 2)}]
      true
  """
  @spec moves(
          [term()],
          HRW.Cluster.Snapshot.t() | structure(),
          HRW.Cluster.Snapshot.t() | structure(),
          non_neg_integer()
        ) ::
          [{term(), [node()], [node()]}]
  def moves(keys, old, new, count \\ 1) do
    keys = HRW.Options.keys!(keys, proper: true)
    count = HRW.Options.count!(count)
    Moves.between(keys, old, new, count)
  end

  @doc false
  # Called over `:erpc` on the other members by `await_agreement/2`'s rounds
  # (`HRW.Cluster.Agreement`): nodes running other versions call it by this name.
  @spec remote_fingerprint(name()) :: non_neg_integer() | :not_running
  def remote_fingerprint(name) do
    fingerprint(name)
  rescue
    ArgumentError -> :not_running
  end

  @doc """
  The members, sorted (bare nodes, also when weighted); with `back: b`, those of
  the generation published `b` changes ago. Raises `ArgumentError` when no cluster
  called `name` has published an entry, or for a bad option.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_members, deny: [~r/.*/])
      iex> HRW.Cluster.members(:doc_members)
      []
      iex> GenServer.stop(pid)
      :ok
  """
  @spec members(name(), [lookup_option()]) :: [node()]
  def members(name, opts \\ []) do
    case structure(name, opts) do
      nil -> []
      %{nodes: nodes} -> Tuple.to_list(nodes)
    end
  end

  @doc """
  The published structure (an `HRW.Skeleton` or `HRW.Ring`, `nil` while there is no
  member), for `HRW.owner_batch/3`, `HRW.group_by_owner/3` and the like; with
  `back: b`, the one published `b` changes ago. Raises `ArgumentError` when no
  cluster called `name` has published an entry, or for a bad option.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_structure, structure: :ring, depth: 2)
      iex> %HRW.Ring{} = ring = HRW.Cluster.structure(:doc_structure)
      iex> HRW.owner_batch(["a", "b"], ring) == Enum.map(["a", "b"], &HRW.Cluster.owner(:doc_structure, &1))
      true
      iex> HRW.Cluster.structure(:doc_structure, back: 1)
      nil
      iex> HRW.Cluster.structure(:doc_structure, back: 2)
      ** (ArgumentError) back: 2 is beyond the history of HRW.Cluster :doc_structure, which keeps 2 generations (depth: 2)
      iex> GenServer.stop(pid)
      :ok
  """
  @spec structure(name(), [lookup_option()]) :: structure()
  def structure(name, opts \\ []), do: History.structure(name, opts)

  # -- overrides -------------------------------------------------------------------

  @doc """
  Replaces the cluster's overrides (see "Overrides" in docs/CLUSTER.md) with
  `overrides`, `%{key => node | [node, ...]}` (`%{}` removes them all), and
  publishes a new generation built from the current members with them before it
  returns, so a lookup made after it answers with them. Nothing is published when
  the overrides are the same, or while the cluster has no member (they apply from
  its next structure). Raises `ArgumentError` for a bad map, or when no server
  called `name` is running.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_put_overrides, depth: 2)
      iex> HRW.Cluster.put_overrides(:doc_put_overrides, %{"hot" => [:"pinned@host", node()]})
      :ok
      iex> HRW.Cluster.owner(:doc_put_overrides, "hot")
      :"pinned@host"
      iex> HRW.Cluster.owners(:doc_put_overrides, "hot", 3) == [:"pinned@host", node()]
      true
      iex> HRW.Cluster.owner(:doc_put_overrides, "hot", back: 1) == node()
      true
      iex> HRW.Cluster.generation(:doc_put_overrides)
      2
      iex> GenServer.stop(pid)
      :ok
  """
  @spec put_overrides(name(), %{optional(term()) => node() | [node()]}) :: :ok
  def put_overrides(name, overrides) do
    overrides = HRW.Overrides.new!(overrides, "HRW.Cluster.put_overrides/2", true)

    case GenServer.call(Server.pid!(name), {:put_overrides, overrides}, 60_000) do
      :ok -> :ok
      {:error, message} -> raise ArgumentError, message
    end
  end

  # -- subscriptions ---------------------------------------------------------------

  @doc """
  Subscribes the calling process to changes: after each published change it
  receives `{:hrw_cluster_changed, name, old_structure, new_structure}` (either
  may be `nil`: no member, or no quorum). The server monitors subscribers and forgets
  those that exit. Subscribing twice is the same as once. A subscription ends with
  the server (a restarted server has no subscriber). Raises `ArgumentError` when no
  server called `name` is running.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_subscribe)
      iex> HRW.Cluster.subscribe(:doc_subscribe)
      :ok
      iex> GenServer.stop(pid)
      :ok
  """
  @spec subscribe(name()) :: :ok
  def subscribe(name), do: GenServer.call(Server.pid!(name), {:subscribe, self()})

  @doc """
  Subscribes the calling process to changes in the given format: `:structures`
  is `subscribe/1`; with `:snapshots` it receives, after each published change,
  `{:hrw_cluster_snapshot, name, old, new}` where `old` and `new` are
  `HRW.Cluster.Snapshot`s (generation, fingerprint, members, quorum and structure
  before and after; before the first generation `old` is generation 0 with no
  member). Subscribing again changes the format. Raises `ArgumentError` when no
  server called `name` is running, or for another format.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_subscribe_snapshots)
      iex> HRW.Cluster.subscribe(:doc_subscribe_snapshots, :snapshots)
      :ok
      iex> HRW.Cluster.put_overrides(:doc_subscribe_snapshots, %{"hot" => :"pinned@host"})
      iex> receive do
      ...>   {:hrw_cluster_snapshot, :doc_subscribe_snapshots, old, new} -> {old.generation, new.generation}
      ...> end
      {1, 2}
      iex> GenServer.stop(pid)
      :ok
  """
  @spec subscribe(name(), :structures | :snapshots) :: :ok
  def subscribe(name, format) do
    format = HRW.Options.one_of!(format, "HRW.Cluster.subscribe/2", [:structures, :snapshots])
    GenServer.call(Server.pid!(name), {:subscribe, self(), format})
  end

  @doc """
  Undoes `subscribe/1` for the calling process (`:ok` also when not subscribed).
  Messages already sent stay in the mailbox. Raises `ArgumentError` when no server
  called `name` is running.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_unsubscribe)
      iex> HRW.Cluster.unsubscribe(:doc_unsubscribe)
      :ok
      iex> GenServer.stop(pid)
      :ok
  """
  @spec unsubscribe(name()) :: :ok
  def unsubscribe(name), do: GenServer.call(Server.pid!(name), {:unsubscribe, self()})
end
