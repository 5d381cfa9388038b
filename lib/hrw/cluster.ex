defmodule HRW.Cluster do
  @moduledoc """
  A prepared structure of the cluster's members, kept up to date as members come
  and go, and readable from any process without a message or a copy.

  Add it to a supervision tree:

      children = [
        {HRW.Cluster, name: :cache_cluster}
      ]

  then ask from anywhere:

      HRW.Cluster.owner(:cache_cluster, "user:42")      #=> :"cache@10.0.0.3"
      HRW.Cluster.owners(:cache_cluster, "user:42", 2)  #=> replicas, best first

  ## How it works

  A server follows a membership source, builds an `HRW.Skeleton` (or `HRW.Ring`)
  of the members and publishes it in one `:persistent_term` entry per cluster, under
  the key `{HRW.Cluster, name}`. Lookups read that entry with `:persistent_term.get/2`,
  which neither copies the term nor sends a message, and hash in the NIF: the server
  is never on the lookup path, so a busy, hung or restarting server slows no lookup.
  The entry's layout is private: read it through the functions here. Every node
  running an `HRW.Cluster` with the same options and the same members computes the
  same owners (generation numbers, below, are local to each node; the member set's
  fingerprint, below, is the same on all of them).

  ## Names

  `:name` is an atom (not `nil`, `true` or `false`) of at most 243 characters,
  counted as the VM counts an atom's length: in Unicode code points (`"é"` written
  as `"e\u0301"` is two), not graphemes or bytes. The
  server is registered locally as the atom `:"HRW.Cluster:" <> Atom.to_string(name)`
  (for `name: :cache`, `:"HRW.Cluster:cache"`; for `name: MyApp.Ring`,
  `:"HRW.Cluster:Elixir.MyApp.Ring"`). That rule is injective: two different names
  never share a server or an entry (`Foo` and `:Foo` are two clusters), and `name`
  itself stays free for a process of your own, such as the cache the cluster routes
  for. (An atom holds at most 255 code points, and the prefix takes 12 of them.)

  ## Members

    * `source: :nodes` (default): the visible nodes, `[node() | Node.list()]`,
      followed with `:net_kernel.monitor_nodes(true, node_type: :visible)`. Hidden
      nodes (such as remote shells started with `--hidden`) are never members.
    * `source: {:pg, scope, group}`: the nodes that have at least one process in the
      `:pg` group `group` of the (already started) scope `scope`. Members are the
      nodes, `node(pid)`, not the pids: an owner stays the same when its process
      restarts, two processes on one node count once, and `:allow`, `:deny` and
      `:weight_fn` see nodes in both sources. To reach the owner's process, look it
      up on that node (a locally registered name, or `:pg.get_members/2` filtered by
      `node/1`). The group is followed with `:pg.monitor/2` when the running OTP
      has it (OTP 25.1 and later), else polled every `:poll_interval` ms.

  Members are sorted (Erlang term order) before building, so a structure depends
  only on the member set (and the members' weights).

  ## Changes and their cost

  `:persistent_term.put/2` replacing a value makes the runtime scan every process
  for references to the old one (a global garbage-collection pass, proportional to
  the number of processes), and copies the whole new entry. So membership events
  are *debounced* (except departures, which also take effect at once: see "Leaving
  at once"): the first event starts a `:debounce` ms timer (default 100), and
  when it fires the server evaluates the membership once (reads the source, applies
  `:allow`, `:deny` and `:weight_fn`) and publishes a new entry only if the result
  differs from the published one (a member joined or left, or a member's weight
  changed). A node that flaps down and up within the window costs nothing; a burst
  of joins costs one rebuild. Lookups in the meantime keep using the previous
  structure. Events that arrive while an evaluation runs start one more debounced
  evaluation after it.

  After each published change every subscriber (`subscribe/1`) receives
  `{:hrw_cluster_changed, name, old_structure, new_structure}`, so a cache can move
  what `HRW.moves(keys, old_structure, new_structure)` lists. A structure is `nil`
  while the cluster has no member (possible with `{:pg, ...}` or filters): then
  `owner/3` returns `nil` and `owners/4` returns `[]`.

  ## Leaving at once

  Joins are debounced; departures are not. With `source: :nodes`, a `:nodedown`
  (the node stopped, was killed, or its link dropped) removes the node from the
  published members while the server handles that message: the structure without
  it is built (in an evaluation process, under `:callback_timeout`) and published
  before the server takes its next message, so no lookup made after the server has
  seen the nodedown names the node. The same holds with `{:pg, scope, group}` (when
  monitored, not polled) when the last process of a node leaves the group. A
  debounced evaluation still follows, and an evaluation that was running when the
  node left is dropped (it may have read the node) and run again.

  A flapping link therefore costs two generations per flap, one at once (down) and
  one after the debounce (up), each with its `:persistent_term` scan; a link that
  goes down and up within the debounce is still removed and added back. Keys of a
  flapping node move away and back: `stable_owners/3` with `depth: 2` or more
  still lists it while it is out. See docs/CLUSTER.md.

  ## Snapshots, fingerprints and agreement

  `snapshot/1` returns an `HRW.Cluster.Snapshot`: generation, members, quorum,
  structure and the member set's `fingerprint` (`HRW.Cluster.Fingerprint`,
  defined in docs/HASHING.md §7), all from one read of the entry. Generations are
  local, fingerprints are not: two nodes with the same fingerprint route every key
  alike (given the same options). `await_agreement/2` waits, bounded, until every
  member answers with this node's fingerprint, and names those that do not.
  `subscribe(name, :snapshots)` sends snapshots, old and new, after each change.

  ## Quorum

  With `quorum: n` (or `quorum: {:majority, expected}`, that is
  `div(expected, 2) + 1`), a node whose view holds fewer than `n` members owns no
  key: `owner/3` answers `nil`, `owners/4` and `members/2` `[]`, `structure/2`
  `nil` (so batches, `HRW.owner_batch(keys, structure)`, must treat it as "no
  owner", as for an empty cluster), `stable_owners/3` the owners of older
  generations that had a quorum, and `snapshot/1` the members it does see with
  `quorum?: false`, `structure: nil` and their fingerprint. Losing or regaining
  the quorum publishes a generation like any change. In a partition of a cluster of
  at most `expected` nodes, at most one side reaches a majority of `expected`, so
  at most one side owns keys; without a
  quorum every side owns every key. See docs/CLUSTER.md.

  ## History

  With `depth: d` the entry keeps the last `d` published structures (default 1:
  the current one only), still as one `:persistent_term` entry, so a change costs
  one global scan whatever the depth; it copies every kept structure, so time and
  memory per change grow with `d` × members. `generation/1` counts the published
  changes: the first structure is generation 1 and each change adds one.

    * `owner(name, key, back: b)`, `owners(name, key, count, back: b)`,
      `structure(name, back: b)` and `members(name, back: b)` answer for the
      generation published `b` changes ago (`back: 0`, the default, is now).
      `b` must be below the depth, else `ArgumentError` (which names the depth).
      Generations before the first one are empty: a cluster whose generation is
      1 answers `back: 1` with `nil` owners and `[]` members.
    * `stable_owners(name, key, count)` lists the distinct owners of `key` over
      every kept generation: the `count` best owners in each generation, newest
      generation first, each owner once at its first place. So the result has at
      most `d × count` owners and begins with `owners(name, key, count)`: read
      from all of them while data migrates.

  ## Overrides

  `overrides: %{key => node | [node, ...]}` pins keys to chosen nodes in every
  structure the server builds (it is the `:overrides` option of `HRW.Ring.new/2` and
  `HRW.build/2`): an overridden key's owner is its first pinned node, and `owners/4`
  lists the pinned nodes first (distinct, in the given order), then the structure's
  own owners without them. A pinned node need not be a member, and `members/2` does
  not list it. `put_overrides/2` replaces the overrides at run time and publishes a
  new generation. Each generation keeps the overrides it was built with, so `back:`
  and `stable_owners/3` answer with the overrides in force then (and every kept
  generation holds a copy of its overrides). While the cluster has no member every
  owner is `nil`, overridden keys included. A server that takes an entry over (see
  "Failures") keeps the overrides put into it, unless its own `:overrides` option
  differs from that of the server that published the entry: then its option applies.

  ## Failures

  The functions given as options (`:allow`, `:deny`, `:weight_fn`) and every build
  (including the one `put_overrides/2` waits for) run in a short-lived process that
  the server spawns for each evaluation, never in the server itself. The evaluation fails when a callback raises, throws, exits,
  returns a weight that is not a positive number at most 2^53 or kills the process,
  when the build raises, or when it does not finish within `:callback_timeout` ms
  (default 5000; the process is then killed). The server then logs a warning with a
  bounded message (callback, node and a shortened rendering of the error),
  publishes nothing (lookups keep the previous members), keeps running, and tries
  again 1 s later, then 2, 4, … up to 30 s between attempts, until an attempt
  succeeds. Membership events in the meantime wait for the next attempt. A failed
  evaluation fails a start only when it is the first one of a server started
  without an entry in place: the start returns `{:error, {:evaluation_failed,
  message}}`.

  The entry outlives its server. When the server crashes, is killed, or is stopped
  with any reason other than `:normal` (including the `:shutdown` of its supervisor,
  which may be the first half of a restart of its subtree), the last published
  entry stays readable: lookups keep answering with the last members, even if the
  supervisor gives up. A server started later under the same name takes the entry
  over: it continues its generation count and history (resized to its own depth)
  and publishes a new generation only if its members, weights, overrides or options
  give a different structure, or its `:quorum` differs (its snapshot then says
  what its own quorum makes of the members, before `start/1` returns).
  Subscriptions belong to the server and end with it; a restarted server has none. When the server stops with reason `:normal`
  (`GenServer.stop/1`), it erases the entry, and lookups raise `ArgumentError`
  until a server with that name publishes again (a `:permanent` child of a
  supervisor is restarted even after a `:normal` stop, and publishes at once).

  ## Options

    * `:name` - an atom, required, see "Names".
    * `:structure` - `:skeleton` (default, `HRW.build/2`: O(log n), churn-stable) or
      `:ring` (`HRW.Ring.new/2`: exact list owners, O(n) lookups).
    * `:source` - `:nodes` (default) or `{:pg, scope, group}`, see "Members".
    * `:debounce` - milliseconds to gather membership events before applying them
      (an integer in 0..4294967295, default 100).
    * `:depth` - how many generations to keep, an integer in 1..64 (default 1),
      see "History".
    * `:allow` - keep only the nodes it accepts: a function `node -> as_boolean`,
      or a list of regexes, any of which must match `Atom.to_string(node)`.
    * `:deny` - drop the nodes it accepts (same forms as `:allow`; applied after it).
    * `:weight_fn` - `node -> positive number`: the node's weight; when given the
      structure is built from `{node, weight}` with `scorer: %HRW.Weighted{}`. A
      weight that is not a positive number at most 2^53 fails the evaluation, see
      "Failures".
    * `:cluster_size` - passed to `HRW.build/2` (`:skeleton` only): an integer in
      1..4096, default 16.
    * `:poll_interval` - with `{:pg, ...}`: poll the group every that many ms
      (an integer in 1..4294967295) instead of monitoring it. Defaults to
      monitoring, or to 1000 ms polling where `:pg.monitor/2` does not exist.
    * `:callback_timeout` - the most milliseconds one evaluation (the callbacks and
      the build together) may take, an integer in 1..4294967295 (default 5000).
    * `:overrides` - `%{key => node | [node, ...]}`, see "Overrides" (default none).
    * `:quorum` - an integer in 1..65536, or `{:majority, expected}` with `expected`
      in 1..65536: the fewest members that own keys, see "Quorum" (default 1).
    * `:lease` - `nil` (default, off) or ms, an integer in 100..4294967295: only
      this node and the members whose server answered a heartbeat sent less than
      that many ms ago (one goes to each member every lease / 3) count toward
      `:quorum`, so a side cut off silently owns no key within the lease, before
      any `:nodedown`. See docs/CLUSTER.md, "Silent partitions and the lease".

  Options are validated when the server starts (and by `child_spec/1`); a bad
  option raises `ArgumentError` with a bounded message.
  """

  alias HRW.Cluster.{Options, Server}

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
  A child specification for a supervisor; `opts` as in the module doc (validated
  here, so a bad option raises `ArgumentError` before the supervisor starts). The
  child's id is `{HRW.Cluster, name}`, so one supervisor can run several clusters.

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
  Starts a cluster server linked to the caller; `opts` as in the module doc. Its
  first structure is published before this returns.

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
  generation published `b` changes ago (see "History" in the module doc). Raises
  `ArgumentError` when no cluster called `name` has published an entry, or for a
  bad option.

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
  def stable_owners(name, key, count) do
    {_generation, history} = Server.entry!(name)
    count = HRW.Options.count!(count)

    history
    |> Tuple.to_list()
    |> Enum.flat_map(fn
      nil -> []
      structure -> HRW.owners(key, structure, count)
    end)
    |> Enum.uniq()
  end

  @doc """
  The number of structures published so far under `name`: 1 once the first is
  published, one more per change. It survives server restarts (see "Failures" in
  the module doc) and starts again from 1 after a `:normal` stop. Raises
  `ArgumentError` when no cluster called `name` has published an entry.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_generation)
      iex> HRW.Cluster.generation(:doc_generation)
      1
      iex> GenServer.stop(pid)
      :ok
  """
  @spec generation(name()) :: pos_integer()
  def generation(name) do
    {generation, _history} = Server.entry!(name)
    generation
  end

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
    agreement(name, System.monotonic_time(:millisecond) + timeout)
  end

  defp agreement(name, deadline) do
    started = System.monotonic_time(:millisecond)
    %{fingerprint: local, members: members} = snapshot(name)
    others = List.delete(members, node())
    left = max(deadline - System.monotonic_time(:millisecond), 0)

    answers =
      if others == [],
        do: [],
        else:
          Enum.zip(
            others,
            :erpc.multicall(others, __MODULE__, :remote_fingerprint, [name], max(left, 1))
          )

    {disagree, no_answer} =
      Enum.reduce(answers, {%{}, %{}}, fn
        {_node, {:ok, ^local}}, acc -> acc
        {node, {:ok, :not_running}}, {d, n} -> {d, Map.put(n, node, :not_running)}
        {node, {:ok, other}}, {d, n} -> {Map.put(d, node, other), n}
        {node, error}, {d, n} -> {d, Map.put(n, node, error)}
      end)

    now = System.monotonic_time(:millisecond)

    cond do
      disagree == %{} and no_answer == %{} and snapshot(name).fingerprint == local ->
        {:ok, local}

      # A round cut short by the deadline would report its own timeouts instead
      # of the members' answers: none starts without the time this one took.
      now + 20 + (now - started) > deadline ->
        {:error, %{fingerprint: local, disagree: disagree, no_answer: no_answer}}

      true ->
        Process.sleep(20)
        agreement(name, deadline)
    end
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
    old = view_structure(old)
    new = view_structure(new)

    keys
    |> Enum.uniq()
    |> Enum.flat_map(fn key ->
      before = view_owners(key, old, count)
      later = view_owners(key, new, count)
      if before == later, do: [], else: [{key, before, later}]
    end)
  end

  defp view_structure(%HRW.Cluster.Snapshot{structure: structure}), do: structure
  defp view_structure(structure), do: structure

  defp view_owners(_key, nil, _count), do: []
  defp view_owners(key, structure, count), do: HRW.owners(key, structure, count)

  @doc false
  # Called by `await_agreement/2` on the other members.
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
  def structure(name, opts \\ [])

  def structure(name, []) do
    {_generation, history} = Server.entry!(name)
    elem(history, 0)
  end

  def structure(name, opts) do
    {_generation, history} = Server.entry!(name)
    elem(history, Options.back!(opts, tuple_size(history), name))
  end

  # -- overrides -------------------------------------------------------------------

  @doc """
  Replaces the cluster's overrides (see "Overrides" in the module doc) with
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
  may be `nil`, see the module doc). The server monitors subscribers and forgets
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
