defmodule ShardedStore do
  @moduledoc """
  A replicated key-value store sharded with `HRW.Cluster`: every key lives on its
  two owners, `HRW.Cluster.owners(cluster, key, 2)`, in memory.

    * **Keys** are any terms the library hashes (`HRW.term_id/1`; it refuses a
      term nested deeper than 256 levels). `put/3`, `get/1` and `get_many/1`
      check the key before anything is sent: a refused key is the caller's
      `ArgumentError`. A replica answers any request, whatever its terms, with a
      reply (an error for a refused key or a request of unknown shape), never by
      exiting: an exit would take every entry it holds with it.
    * **Writes** (`put/3`) carry an integer version chosen by the writer. The node
      that takes the write sends it to both owners of its snapshot, with the
      snapshot's fingerprint; a replica takes it only when it has processed the same
      member set (same fingerprint), its cluster still publishes it, it is an
      owner there, and it did not see both owners of the key leave its view within
      `forget:` (the rule reads follow, below: those owners may hold a higher
      version; the write is answered `{:error, :unavailable}`), and the other
      owner's replica is not known to have ended (its monitor fired; the write
      could then be left on one copy: refused with `:owner_down`, so `put/3`
      answers `{:error, {:not_acknowledged, replies}}`). The write is
      acknowledged (`:ok`) once both replicas hold it, if the writing node's view
      has not changed meanwhile.
    * **Order and tie-break**: entries `{version, value}` are ordered by version,
      then by value, on every replica alike, by `ShardedStore.Order`: Erlang's term
      order made exact, so `1` and `1.0` are two values (the integer wins the
      tie-break) and only identical values are the same. A lower version
      than the one held is refused with `{:error, {:stale, held_version}}`; the
      same version with another value is kept only if the value is larger, else
      refused with `{:error, {:conflict, held_value}}` (`put(k, 1, 1.0)` after
      `put(k, 1, 1)` is a conflict); the same version and value
      again is `:ok` (a retry). So two writers that pick one version end with the
      same value everywhere, the larger, whatever the order their writes arrive
      in. The smaller one is told (`{:error, {:conflict, larger}}`) only when the
      larger reached an owner first; when the smaller reached both owners first,
      both writes are `:ok`, and the smaller is overwritten by the larger like
      any write that wins over it (`put(k, 1, 1)` and `put(k, 1, 1.0)` at once
      from two nodes: the integer write `:ok`, the float one `:ok` or told, the
      key read back `{1, 1}`).
    * **Handoff**: each replica subscribes to the cluster's snapshots and
      monitors the other replicas (the `:pg` group's members). A key's copies go
      to its *targets*: its two owners in the view processed, where an owner whose
      replica ended (its monitor fired, and no new replica of that node is seen)
      is replaced by the next owner, `HRW.Cluster.owners(cluster, key, 3)`
      without it. Whenever the targets of a key held change (a view processed, a
      replica ended, a new one seen), it is pushed to the new targets, again until
      they acknowledge it or stop being targets. So a killed member's keys are
      copied to the next owner as soon as its monitor fires, without waiting for
      the view to drop it (with `lease:`, the view waits about the lease). A
      replica never drops an entry, so the former owners still hold it.
    * **Restarts**: a replica that starts (its node restarted, or the process
      alone) is empty, whatever the view did meanwhile (a restart inside the
      view's departure wait does not change the view). It asks every member of
      its view for the entries it owns there and for the departures they
      recorded (below), and counts as not done (`status/0`'s pending) until each
      has answered; a member that sees a new replica of a node it had seen end
      pushes it its keys back as well.
    * **Reads** (`get/1`) ask every member of this node's view and answer with the
      highest entry, only when every member answered from this node's view; they
      refuse (`{:error, :unavailable}`) while a change is in progress, or when a
      member saw both owners of the key leave its view within `forget:` (5 s by
      default, see `start/1`; they may hold writes nobody else has: a partition that
      cut both off, or two kills). A replica that starts learns those departures
      from the members that recorded them, with their age. A read costs one call
      per member.
    * **Quorum**: the cluster runs with `quorum: {:majority, expected}`: a side of a
      partition without a majority owns no key, so it acknowledges no write and
      answers no read (`{:error, :no_quorum}`).

  ## What it guarantees

  With at most one failure per handoff window: a node killed, stopped, leaving,
  joining or restarting, its replica alone restarting, or a clean partition, and
  the next one only once the window has closed. The window runs from the failure
  until every survivor has seen it (the replica's monitor or the view, whichever
  comes first), has pushed what it changes and had it acknowledged, and every
  replica that started has heard from every member; after a heal, until every
  replica has processed the view that holds both sides again (it reads the `:pg`
  group with each view, so it sees the other side's replicas with it) and
  pushed what that changes. `status/0` shows no pending work on any node then. It does not wait for the view: with `lease:` a killed
  member stays in the views for about the lease, and its keys have two copies
  again long before. Measured on 5 `:peer` nodes on one host (a 2-core Xeon VM
  shared with other work, load average 7-10; 300 keys at one version; commit
  3741c71, 2026-12-06; `SHARDED_STORE_REPORT=1 MIX_ENV=test mix test
  test/sharded_store_restart_test.exs --only test:"test after a kill
  (lease: 3000) every key has two copies again before the view drops the killed
  member"`, and the same with `lease: nil`, 5 runs of each): the last of the
  killed node's 110-136 keys had two copies again a median 54 ms (43-64) after
  a SIGKILL with `lease: 3000`, while every survivor's view still named it (they
  dropped it 3,090-3,109 ms after the kill), and a median 69 ms (59-87) without
  a lease, where the views dropped it at about the same time. Those are upper
  bounds set mostly by the measurement: the test polls the 4 survivors'
  replica states, one whole state each, every 10 ms plus the time a poll takes.
  (When the survivors waited for the view instead, one copy lasted as long as
  the lease.)

  A restart inside the view's departure wait is a failure like any other: the
  restarted replica refills from the others (the test kills a member of 5 and
  restarts it under its name, with `lease: 3000` and without: once `status/0`
  shows no pending work it holds every key it owns, and killing another owner
  then loses none).

  With failures one window apart, then:

    * every acknowledged write stays readable, until a write that wins over it
      (a higher version, or the same version with a larger value);
    * a read that answers (`{:ok, entry}` or `:not_found`) never returns a version
      older than a write acknowledged before the read began;
    * a side without quorum acknowledges no write and answers no read;
    * `:ok` is never returned for a write that both owners do not hold.

  A partition counts as clean when it is transitive when the members' views
  change (every `:nodedown`): a cut that leaves links across it (A–B and B–C up,
  A–C down) is clean only because OTP's `prevent_overlapping_partitions` (on by
  default since OTP 25) makes it so, and that guard acts only while the kernel's
  `connect_all` is on as well (the default; `-connect_all false` turns the guard
  off with it). A silent partition (no `:nodedown` yet) counts with `lease:`
  under the condition stated in "Silent partitions and `lease:`" below.

  ## What it does not guarantee

    * **Two failures within one handoff window** lose the keys owned by both
      victims: their two in-memory copies are gone (two owners killed 0-10 ms
      apart: every key they both owned loses the writes acknowledged before the
      kill, unless a former owner still held the same version). Other keys keep
      everything. Reads of such a key, and writes to it, answer `{:error,
      :unavailable}` for `forget:` (5 s), then reads answer what the survivors
      hold (older, or `:not_found`) and writes are taken on it. A restarted
      member whose other owner fails before its refill is done is such a case.
    * **Two owners that leave one after the other** (each window closed): their
      keys keep every write (the next owners hold them), but as for any key whose
      two owners left within `forget:`, its reads and writes refuse until
      `forget:` has passed since the second left the view.
    * **A partition longer than `forget:`** that cuts both owners of a key off the
      majority: until then the majority refuses the key's reads and writes; after
      it, reads of that key on the majority side answer what it holds, which may
      be older than a write the cut-off owners acknowledged before the cut, and
      writes to it are acknowledged on what it holds, so a version below one
      acknowledged earlier may be `:ok`; at the heal the higher version wins.
      The writes the cut-off owners may hold are those acknowledged before the
      cut and, with `lease:`, those their side acknowledged after it, within its
      lease (below): a majority read refuses the key for `forget:`, then answers
      without them. (The store cannot tell a dead node from a cut one;
      `forget:` is its guess.) The refusal lives in the members' records of the
      departure, each counted from when that member's view dropped the two
      owners; a replica that starts (a member that joins, or restarts) copies
      the records of every member of its view when it asks them for its keys.
      So a read refuses while any member of the view holds a record, and a write
      while either of the key's current owners does; once no member holds one
      (every member that saw the departure left or restarted before a newer
      member had asked it), or `forget:` has passed, reads answer what the
      members hold (older, or `:not_found`) and a version below the one
      acknowledged may be `:ok`. At the heal the higher version wins.
    * **Restarts**: nothing is on disk, so a node that restarts comes back empty
      and is refilled from the others (above): a restart counts as a failure,
      until its refill is done.
    * **Silent partitions without `lease:`** (packets dropped, no `:nodedown`
      yet): until failure detection fires (`net_ticktime`), every side keeps its
      quorum, and a side without a majority goes on acknowledging writes to the
      keys whose two owners are both on it; nothing here is promised for them
      (see "Silent partitions and `lease:`").
    * **Overlapping (non-transitive) partitions** with
      `prevent_overlapping_partitions` or `connect_all` off: once the
      `:nodedown`s come, views such as {1, 2, 3} and {3, 4, 5} each hold a
      majority, each names owners for every key among its own members, and both
      acknowledge writes to the same keys. The fingerprint check does not stop
      it: the two owners on each side have processed that side's view. Nothing is
      promised for them. With both on, the guard disconnects every node that hears of a
      `:nodedown` from the node it lost, which may leave no majority anywhere
      (each node alone) until the links are made again: no split, no answer.
    * An error from `put/3` other than `:stale` and `:conflict` does not mean that
      no replica took the write; the caller retries with the same version.

  To survive two close failures, keep more copies: three owners
  (`owners(key, 3)`) with every write acknowledged by all three survives any two
  failures per window; acknowledged by two of the three, a write is lost only
  when both failures take the two that held it before the third did. Or keep
  the copies on disk.

  ## Silent partitions and `lease:`

  A partition is silent when packets stop and no connection closes (a switch
  dropping them, a paused VM): no `:nodedown` fires before `net_ticktime` (OTP's
  default 60 s; a node is dropped 0.75 to 1.25 times it after its last byte), and
  until then every member stays in every view. Without `lease:` both sides keep
  their quorum meanwhile: in one manual run of the silent test without it, the
  minority acknowledged 26,200 writes after the cut, the last 10.2 s after it
  (`net_ticktime` 10).

  With `lease: ms` (`start/1`, passed to `HRW.Cluster`'s `:lease`), a node counts
  toward the majority only the members whose cluster answered one of its
  heartbeats within the last `ms`. A silent partition that leaves a majority on
  one side is then one more single fault, and the guarantees above hold for it,
  **on one condition the store takes from the cluster**: the majority's cluster
  gives a departed member's keys to new owners only once that member's lease
  must have lapsed (cluster/docs/CLUSTER.md, "Silent partitions and the lease", says
  when a new owner takes over). Where it takes them sooner, at its own
  `:nodedown`s while the minority still holds its lease (the majority's side of
  the links drops first, or a lease longer than failure detection), both sides
  acknowledge writes to the same keys until the minority's lease lapses, and
  nothing is promised for those keys. The test cuts [2 | 3] silently with
  `lease: 1000` and `net_ticktime` 10, where the lease lapses seconds before
  any `:nodedown`: no acknowledged write lost, no stale read, in three runs.

    * **the window up to the lease**: the side that hears no majority still
      acknowledges writes to keys whose two owners are both on it, for at most the
      lease after the cut plus the time its cluster takes to publish the lapse
      (the last one 669-868 ms after the cut in the test, 1,151-1,250 writes
      acknowledged meanwhile); they are kept and read back after the heal like any
      other, but until the heal the majority side has not seen them: its reads of
      those keys refuse for `forget:` after its views drop the cut-off owners,
      then answer without them (none of those writes is lost at the heal).
      After that it
      acknowledges nothing; its reads, which ask every member, refuse throughout;
    * **the majority side**, until its `:nodedown`s (`net_ticktime`) take the
      others out of its views, acknowledges writes to keys whose two owners are
      both on it; a write to a key with an owner across the cut waits for `put/3`'s
      5 s timeout and is not acknowledged, and every read (it asks every member)
      waits as long and answers `{:error, :unavailable}`. Once its views settle it
      owns every key again, except that keys whose two owners are both cut off
      refuse reads and writes for `forget:`;
    * the `forget:` time counts from the majority's `:nodedown`s: a key whose two
      owners are cut off answers on the majority side what it holds once it has
      passed (see "A partition longer than `forget:`" above).

  What it costs: the cluster's heartbeats. Each node sends one to each other
  member every `ms / 3` and answers theirs: 2(n - 1) × 3000 / `ms` messages a
  second per node (5 nodes with `lease: 1000`: 24 each, 120 in the cluster), see
  cluster/docs/CLUSTER.md, "What it costs". And a lapse without a cut (a long garbage
  collection, an overloaded scheduler, a lease below the links' worst round trip)
  makes a node refuse writes and reads until its quorum is back, which is when
  the answers to its next heartbeats arrive: heartbeats go out every `ms / 3`, so
  up to that period plus a round trip after the members can answer again. Pick a lease well above the links'
  worst round trip and well below `net_ticktime`. The lease does not make an
  overlapping partition clean (above).

  Start it on each node with `start/1`; members are the nodes running a replica
  (a `:pg` group).
  """

  alias ShardedStore.{Order, Replica}

  @cluster :sharded_store
  @scope :sharded_store
  @group :replicas

  @doc """
  The name of the `HRW.Cluster` the store routes with.

  ## Examples

      iex> ShardedStore.cluster()
      :sharded_store
  """
  @spec cluster() :: atom()
  def cluster, do: @cluster

  @doc """
  The `:pg` scope and group whose members are the replicas.

  ## Examples

      iex> ShardedStore.group()
      {:sharded_store, :replicas}
  """
  @spec group() :: {atom(), atom()}
  def group, do: {@scope, @group}

  @doc """
  Starts the `:pg` scope, the cluster and this node's replica (not linked to the
  caller). `opts`: `expected:` the number of nodes for the majority (default 5),
  `debounce:` the cluster's (default 50 ms), `forget:` how long reads and writes
  of a key whose two owners left the view refuse (default 5000 ms), `lease:` the
  cluster's `:lease` in ms (default `nil`, off; see "Silent partitions" in the
  module doc): with it, a node counts toward the majority only the members that
  answered its heartbeats within the lease, so a side cut off silently stops
  acknowledging writes within the lease instead of at the `:nodedown`.
  """
  def start(opts \\ []) do
    expected = Keyword.get(opts, :expected, 5)

    with {:ok, _} <- ok(:pg.start(@scope)),
         {:ok, _} <-
           HRW.Cluster.start(
             name: @cluster,
             source: {:pg, @scope, @group},
             debounce: Keyword.get(opts, :debounce, 50),
             depth: 2,
             quorum: {:majority, expected},
             lease: Keyword.get(opts, :lease)
           ) do
      {:ok, _} = ShardedStore.Probe.start()
      Replica.start(Keyword.get(opts, :forget, 5_000))
    end
  end

  defp ok({:error, {:already_started, pid}}), do: {:ok, pid}
  defp ok(other), do: other

  @doc """
  Writes `value` under `key` with `version`, and says what happened:

    * `:ok`: both owners hold this version and value (or a write that wins over
      it, arrived since), and the writing node's view did not change meanwhile.
      Writing the same version and value again is `:ok` (a retry).
    * `{:error, {:stale, stored_version}}`: an owner holds a higher version.
    * `{:error, {:conflict, stored_value}}`: an owner holds this version with
      another value that wins the tie-break (see the module doc: values are
      compared exactly, so `1` and `1.0` are two values).
    * `{:error, :no_quorum}`: this node's side has no quorum.
    * `{:error, :unavailable}`: an owner saw both owners of the key leave its view
      within `forget:` (see `start/1`); they may hold a higher version, so the
      write is refused as a read of the key would be.
    * `{:error, reason}` otherwise (`:view_changed`, `{:not_acknowledged,
      replies}`, `:too_few_replicas`): not acknowledged.

  After any error but `:stale` and `:conflict` the caller retries with the same
  version. An error does not mean that no replica took the write: one owner may
  hold it (the other refused, or the view changed). Nothing is promised for it.

  Raises `ArgumentError`, before anything is sent, when `version` is not an
  integer or `key` is a term the library cannot hash (`HRW.term_id/1` refuses
  it: nested deeper than 256 levels).

  ## Examples

      iex> ShardedStore.put("k", 1.5, :v)
      ** (ArgumentError) version must be an integer, got: 1.5
  """
  @spec put(term(), integer(), term()) :: :ok | {:error, term()}
  def put(key, version, value) when is_integer(version) do
    check_key!(key)
    snapshot = HRW.Cluster.snapshot(@cluster)

    cond do
      not snapshot.quorum? ->
        {:error, :no_quorum}

      true ->
        case HRW.owners(key, snapshot.structure, 2) do
          [_, _] = owners ->
            request = {:write, key, version, value, snapshot.fingerprint}
            replies = Replica.call_all(owners, request, 5_000)
            write_outcome(replies, snapshot.fingerprint, HRW.Cluster.fingerprint(@cluster))

          _ ->
            {:error, :too_few_replicas}
        end
    end
  end

  def put(_key, version, _value),
    do: raise(ArgumentError, "version must be an integer, got: #{inspect(version, limit: 10)}")

  # The library's rule for keys, checked where the client calls: a key it
  # cannot hash is the caller's ArgumentError, never a replica's.
  defp check_key!(key) do
    _ = HRW.term_id(key)
    :ok
  rescue
    error in ArgumentError ->
      reraise ArgumentError, "invalid key: #{Exception.message(error)}", __STACKTRACE__
  end

  # A refusal on the merits (stale, conflict) is reported even when the other
  # owner took the write: retrying would not change it. Values compare exactly.
  # `published`: this node's fingerprint once the replies are in. Public for the
  # test suite's simulator, which decides with the same code.
  @doc false
  def write_outcome(replies, fingerprint, published) do
    stale = for {:error, {:stale, version}} <- replies, do: version
    conflicts = for {:error, {:conflict, value}} <- replies, do: value

    cond do
      stale != [] -> {:error, {:stale, Enum.max(stale)}}
      conflicts != [] -> {:error, {:conflict, Order.max(conflicts)}}
      Enum.member?(replies, {:error, :unavailable}) -> {:error, :unavailable}
      not Enum.all?(replies, &(&1 === :ok)) -> {:error, {:not_acknowledged, replies}}
      # A write that straddles a change of this node's view (a cut link, a node
      # down) may be kept, but is not promised.
      published !== fingerprint -> {:error, :view_changed}
      true -> :ok
    end
  end

  @doc """
  Reads `key`: `{:ok, {version, value}}`, the highest entry held by any member
  of this node's view, or `:not_found` when every member answered and none holds
  it. `{:error, :no_quorum}` on a side without quorum, and `{:error,
  :unavailable}` when this node cannot know: a member did not answer, a member
  has processed another view than this node's (a change is in progress), or a
  member saw both owners of the key leave its view within `forget:` (cut off
  by a partition, or killed: they may hold writes the others never saw).

  Asks every member, not only the owners: after a partition heals, the owners
  (the nodes of the minority side) have not yet received what the majority side
  took meanwhile, and their own history holds no view of that side. A change in
  progress, or writes that only departed nodes may hold, make it refuse rather
  than guess.

  Raises `ArgumentError`, before anything is sent, when `key` is a term the
  library cannot hash (as `put/3`).

  ## Examples

      iex> deep = Enum.reduce(1..300, :k, fn _, term -> [term] end)
      iex> ShardedStore.get(deep)
      ** (ArgumentError) invalid key: term nested deeper than 256 levels cannot be hashed
  """
  @spec get(term()) :: {:ok, {integer(), term()}} | :not_found | {:error, term()}
  def get(key) do
    check_key!(key)
    snapshot = HRW.Cluster.snapshot(@cluster)

    cond do
      not snapshot.quorum? ->
        {:error, :no_quorum}

      true ->
        snapshot.members
        |> Replica.call_all({:read, key}, 5_000)
        |> read_outcome(snapshot.fingerprint)
    end
  end

  @doc false
  def read_outcome(replies, fingerprint) do
    if Enum.all?(replies, &match?({:entry, ^fingerprint, _, false}, &1)) do
      # Entries compare as the replicas merge them: version first, then value,
      # exactly (ShardedStore.Order).
      case for({:entry, _, {_, _} = entry, _} <- replies, do: entry) do
        [] -> :not_found
        entries -> {:ok, Order.max(entries)}
      end
    else
      {:error, :unavailable}
    end
  end

  @doc """
  `get/1` of each key of a list, as a map key => result. Every key is checked
  first: a key the library cannot hash raises `ArgumentError` before any is read.

  ## Examples

      iex> deep = Enum.reduce(1..300, :k, &{&1, &2})
      iex> ShardedStore.get_many(["fine", deep])
      ** (ArgumentError) invalid key: term nested deeper than 256 levels cannot be hashed
  """
  @spec get_many([term()]) :: %{
          term() => {:ok, {integer(), term()}} | :not_found | {:error, term()}
        }
  def get_many(keys) when is_list(keys) do
    Enum.each(keys, &check_key!/1)
    Map.new(keys, &{&1, get(&1)})
  end

  def get_many(keys),
    do: raise(ArgumentError, "keys must be a list, got: #{inspect(keys, limit: 10)}")

  @doc """
  This node's replica status: `{fingerprint processed, pending, keys held}`,
  where pending counts the keys still to push and, for a replica that started,
  the members of its view that have not yet answered its request for its keys.
  With every node at the same fingerprint and nothing pending, and every failure
  seen by the survivors, the handoff window (module doc) has closed.
  """
  @spec status() ::
          {non_neg_integer(), non_neg_integer(), non_neg_integer()} | {:error, term()}
  def status, do: Replica.call(node(), :status, 30_000)

  @doc """
  Leaves the store: the replica leaves the group (the others take this node out at
  once), hands every key it holds to the remaining owners and returns `:ok` once
  they all hold them, or `{:error, :timeout}` once `timeout` ms passed. Again
  after that: `:ok`; while a leave is under way: `{:error, :leaving}`.

  ## Examples

      iex> ShardedStore.leave(:soon)
      ** (ArgumentError) timeout must be a non-negative integer, got: :soon
  """
  @spec leave(non_neg_integer()) :: :ok | {:error, term()}
  def leave(timeout \\ 60_000)

  def leave(timeout) when is_integer(timeout) and timeout >= 0,
    do: Replica.call(node(), {:leave, timeout}, timeout + 5_000)

  def leave(timeout),
    do:
      raise(
        ArgumentError,
        "timeout must be a non-negative integer, got: #{inspect(timeout, limit: 10)}"
      )

  @doc "What `ShardedStore.Probe` measured here: `[{node, microseconds}]` from a nodedown to the snapshot without that node."
  def down_delays, do: ShardedStore.Probe.delays()
end
