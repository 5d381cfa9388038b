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
  hung or restarting server slows no lookup. The guide, docs/CLUSTER.md, explains
  the concepts the functions' docs refer to, section by section.
  """

  alias HRW.Cluster.{Agreement, Check, History, Moves, Options, Server}

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
          | {:lease, pos_integer() | nil}

  @typedoc "Options of the lookups: which generation to answer for (default `back: 0`)."
  @type lookup_option :: {:back, non_neg_integer()}

  @typedoc "A subscriber's message, see docs/CLUSTER.md, \"Subscriptions\"."
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
  A child specification with id `{HRW.Cluster, name}` (one supervisor can run
  several clusters); `opts` (docs/CLUSTER.md, "Options") are checked here, so a bad
  one raises `ArgumentError` before the supervisor starts.

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
  Starts a cluster server linked to the caller (`opts`: docs/CLUSTER.md,
  "Options"); its first structure is published before this returns. Raises
  `ArgumentError` for a bad option; returns `{:error, {:pg_scope_not_started,
  scope}}` or `{:error, {:not_a_pg_scope, scope}}` when `source: {:pg, scope,
  group}` names no running `:pg` scope (docs/CLUSTER.md, "Members").

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_cluster)
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
  `start_link/1` without the link: for a shell, or another node with
  `:erpc.call(node, HRW.Cluster, :start, [opts])`.

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
  The member that owns `key` (`HRW.owner(key, structure(name, opts))`), `nil`
  without members or quorum (with a `:lease`, also once it lapsed by the clock:
  docs/CLUSTER.md, "Silent partitions and the lease"); `back: b` answers for the
  generation `b` changes ago (docs/CLUSTER.md, "History"). Raises `ArgumentError`
  when `name` is not an atom or has published no entry, or for a bad option.

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
  The `count` best members for `key`, best first (`[]` without members or quorum);
  `back: b` as in `owner/3`. Raises `ArgumentError` as `owner/3`, or for a bad count.

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
    # HRW.owners/3 checks the count; without a structure it is checked alone.
    case structure(name, opts) do
      nil ->
        _ = Check.count!(count)
        []

      structure ->
        HRW.owners(key, structure, count)
    end
  end

  @doc """
  The distinct `count` best owners of `key` over every kept generation, newest
  first; it begins with `owners(name, key, count)` (docs/CLUSTER.md, "History").
  Raises `ArgumentError` as `owners/4`.

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_stable, depth: 3)
      iex> HRW.Cluster.stable_owners(:doc_stable, "user:42", 2) == HRW.Cluster.owners(:doc_stable, "user:42", 2)
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec stable_owners(name(), term(), non_neg_integer()) :: [node()]
  def stable_owners(name, key, count), do: History.stable_owners(name, key, count)

  @doc """
  The number of structures published under `name`, 1 for the first, one more per
  change (docs/CLUSTER.md, "History", "Failures"). Raises `ArgumentError` when
  `name` has no entry.

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_generation)
      iex> HRW.Cluster.generation(:doc_generation)
      1
      iex> GenServer.stop(pid)
      :ok
  """
  @spec generation(name()) :: pos_integer()
  def generation(name), do: History.generation(name)

  @doc """
  The current generation, members, fingerprint, quorum and structure from one read,
  an `HRW.Cluster.Snapshot` (docs/CLUSTER.md, "Snapshots").
  Raises `ArgumentError` when `name` has no entry.

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
  The `HRW.Cluster.Fingerprint` of the current members (docs/CLUSTER.md,
  "Fingerprints"). Raises `ArgumentError` when `name` has no entry.

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_fingerprint)
      iex> HRW.Cluster.fingerprint(:doc_fingerprint) == HRW.Cluster.Fingerprint.of([node()])
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec fingerprint(name()) :: non_neg_integer()
  def fingerprint(name), do: Server.snapshot!(name).fingerprint

  @doc """
  Waits at most `timeout` ms until every member of this node's view has this node's
  fingerprint: `{:ok, fingerprint}`, else `{:error, disagreement}` as of the last
  round (docs/CLUSTER.md, "Agreement"). Raises `ArgumentError` when `name` has no
  entry here, or for a bad timeout.

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
    timeout = Check.integer!(timeout, "HRW.Cluster.await_agreement/2", :timeout, 0, 4_294_967_295)

    _ = snapshot(name)
    Agreement.await(name, System.monotonic_time(:millisecond) + timeout)
  end

  @doc """
  What a store holding `keys` must move: `{key, owners_before, owners_later}` for
  each key whose `count` best owners differ between the views `before` and `later`
  (snapshots, structures or `nil`; docs/CLUSTER.md, "Moves"). Raises
  `ArgumentError` for bad keys, count or view.

      iex> before = HRW.Ring.new([:"a@h", :"b@h"])
      iex> later = HRW.Ring.new([:"a@h", :"b@h", :"c@h"])
      iex> moves = HRW.Cluster.replica_moves(["k1", "k2", "k3", "k4"], before, later, 2)
      iex> Enum.all?(moves, fn {_key, _before, owners_later} -> :"c@h" in owners_later end)
      true
      iex> HRW.Cluster.replica_moves(["k1"], nil, later, 2) == [{"k1", [], HRW.owners("k1", later, 2)}]
      true
  """
  @spec replica_moves(
          [term()],
          HRW.Cluster.Snapshot.t() | structure(),
          HRW.Cluster.Snapshot.t() | structure(),
          non_neg_integer()
        ) ::
          [{term(), [node()], [node()]}]
  def replica_moves(keys, before, later, count \\ 1) do
    keys = Check.keys!(keys)
    count = Check.count!(count)
    Moves.between(keys, before, later, count)
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
  The members, sorted (bare nodes, also when weighted); `back: b` and
  `ArgumentError` as in `owner/3`.

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
  The published `HRW.Skeleton` or `HRW.Ring` (`nil` without members or quorum), for
  `HRW.owner_batch/3`, `HRW.group_by_owner/3` and the like; `back: b` and
  `ArgumentError` as in `owner/3`.

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
  Replaces the overrides with `overrides`, `%{key => node | [node, ...]}`, and
  publishes them in a new generation before it returns (docs/CLUSTER.md,
  "Overrides"). Raises `ArgumentError` for a bad map, or when no server called
  `name` is running.

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
    overrides = Check.overrides!(overrides, "HRW.Cluster.put_overrides/2")

    case GenServer.call(Server.pid!(name), {:put_overrides, overrides}, 60_000) do
      :ok -> :ok
      {:error, message} -> raise ArgumentError, message
    end
  end

  # -- subscriptions ---------------------------------------------------------------

  @doc """
  Subscribes the caller to `{:hrw_cluster_changed, name, old_structure,
  new_structure}` after each change (docs/CLUSTER.md, "Subscriptions"). Raises
  `ArgumentError`, sending nothing, when no server called `name` is running, or
  when the process registered under its server's name is not that server
  (docs/CLUSTER.md, "Names").

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_subscribe)
      iex> HRW.Cluster.subscribe(:doc_subscribe)
      :ok
      iex> GenServer.stop(pid)
      :ok
  """
  @spec subscribe(name()) :: :ok
  def subscribe(name), do: GenServer.call(Server.pid!(name), {:subscribe, self()})

  @doc """
  Subscribes the caller in `format`: `:structures` as `subscribe/1`, or `:snapshots`,
  `{:hrw_cluster_snapshot, name, old_snapshot, new_snapshot}` after each change
  (docs/CLUSTER.md, "Subscriptions"). Raises `ArgumentError` as `subscribe/1`, or
  for another format.

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
    format = Check.one_of!(format, "HRW.Cluster.subscribe/2", [:structures, :snapshots])
    GenServer.call(Server.pid!(name), {:subscribe, self(), format})
  end

  @doc """
  Ends the caller's subscription (`:ok` also without one); messages already sent
  stay. Raises `ArgumentError` when no server called `name` is running.

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_unsubscribe)
      iex> HRW.Cluster.unsubscribe(:doc_unsubscribe)
      :ok
      iex> GenServer.stop(pid)
      :ok
  """
  @spec unsubscribe(name()) :: :ok
  def unsubscribe(name), do: GenServer.call(Server.pid!(name), {:unsubscribe, self()})
end
