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
  same owners (generation numbers, below, are local to each node).

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
  are *debounced*: the first event starts a `:debounce` ms timer (default 100), and
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

  The functions given as options (`:allow`, `:deny`, `:weight_fn`) and the build
  run in a short-lived process that the server spawns for each evaluation, never in
  the server itself. The evaluation fails when a callback raises, throws, exits,
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
  give a different structure. Subscriptions belong to the server and end with it; a
  restarted server has none. When the server stops with reason `:normal`
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
    * `:cluster_size` - passed to `HRW.build/2` (`:skeleton` only).
    * `:poll_interval` - with `{:pg, ...}`: poll the group every that many ms
      (an integer in 1..4294967295) instead of monitoring it. Defaults to
      monitoring, or to 1000 ms polling where `:pg.monitor/2` does not exist.
    * `:callback_timeout` - the most milliseconds one evaluation (the callbacks and
      the build together) may take, an integer in 1..4294967295 (default 5000).
    * `:overrides` - `%{key => node | [node, ...]}`, see "Overrides" (default none).

  Options are validated when the server starts (and by `child_spec/1`); a bad
  option raises `ArgumentError` with a bounded message.
  """

  use GenServer

  require Logger

  @default_debounce 100
  @default_poll 1000
  @default_callback_timeout 5_000
  @max_ms 4_294_967_295
  @max_depth 64
  @max_weight 9_007_199_254_740_992
  @first_retry 1_000
  @max_retry 30_000
  @prefix "HRW.Cluster:"
  # The VM's limit on an atom's length (in code points), less the prefix's.
  @max_name 255 - length(String.to_charlist(@prefix))

  # The published entry: {@tag, generation, history, {spec, overrides_option}}.
  # `history` is a tuple of `depth` structures, newest first (nil for an empty
  # generation); `spec` = {structure, build_opts, overrides, entries} is what the
  # current structure was built from, so a new server can tell whether it differs;
  # `overrides_option` is the :overrides option of the server that published it.
  @tag :"$hrw_cluster"
  @missing :"$hrw_cluster_missing"
  @result :"$hrw_cluster_result"
  @timeout :"$hrw_cluster_timeout"
  @failed :"$hrw_cluster_failed"

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

  @typedoc "Options of the lookups: which generation to answer for (default `back: 0`)."
  @type lookup_option :: {:back, non_neg_integer()}

  @typedoc "The message a subscriber receives after each change."
  @type change :: {:hrw_cluster_changed, name(), structure(), structure()}

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
    config = config!(opts)

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
    config = config!(opts)
    GenServer.start_link(__MODULE__, config, name: server_name(config.name))
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
    config = config!(opts)
    GenServer.start(__MODULE__, config, name: server_name(config.name))
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
    count = count!(count)
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
    {@tag, _generation, history, _meta} = entry!(name)
    count = count!(count)

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
    {@tag, generation, _history, _meta} = entry!(name)
    generation
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
    {@tag, _generation, history, _meta} = entry!(name)
    elem(history, 0)
  end

  def structure(name, opts) do
    {@tag, _generation, history, _meta} = entry!(name)
    elem(history, back!(opts, tuple_size(history), name))
  end

  defp back!([back: back], depth, _name) when is_integer(back) and back >= 0 and back < depth,
    do: back

  defp back!([back: back], depth, name) when is_integer(back) and back >= 0 do
    raise ArgumentError,
          "back: #{HRW.brief(back)} is beyond the history of HRW.Cluster #{HRW.brief(name)}, " <>
            "which keeps #{depth} #{if depth == 1, do: "generation", else: "generations"} " <>
            "(depth: #{depth})"
  end

  defp back!([back: back], _depth, _name) do
    raise ArgumentError, "back must be a non-negative integer, got: #{HRW.brief(back)}"
  end

  defp back!(opts, _depth, _name) do
    raise ArgumentError,
          "HRW.Cluster lookups take only the option :back, got: #{HRW.brief(opts)}"
  end

  defp count!(count) when is_integer(count) and count >= 0, do: count

  defp count!(count) do
    raise ArgumentError, "count must be a non-negative integer, got: #{HRW.brief(count)}"
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

    case GenServer.call(server!(name), {:put_overrides, overrides}, 60_000) do
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
  def subscribe(name), do: GenServer.call(server!(name), {:subscribe, self()})

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
  def unsubscribe(name), do: GenServer.call(server!(name), {:unsubscribe, self()})

  defp entry!(name) do
    case :persistent_term.get({__MODULE__, name}, @missing) do
      {@tag, _generation, _history, {_spec, _option}} = entry -> entry
      _ -> raise ArgumentError, not_running(name)
    end
  end

  defp server!(name) do
    # No atom is created for a name that was never started.
    server = valid_name?(name) and String.to_existing_atom(@prefix <> Atom.to_string(name))

    case server && GenServer.whereis(server) do
      pid when is_pid(pid) -> pid
      _ -> raise ArgumentError, not_running(name)
    end
  rescue
    ArgumentError -> reraise ArgumentError, not_running(name), __STACKTRACE__
  end

  defp valid_name?(name) do
    is_atom(name) and name not in [nil, true, false] and
      length(Atom.to_charlist(name)) <= @max_name
  end

  defp server_name(name), do: String.to_atom(@prefix <> Atom.to_string(name))

  defp not_running(name), do: "no HRW.Cluster named #{HRW.brief(name)} is running"

  # -- options ---------------------------------------------------------------------

  @options [
    :name,
    :structure,
    :source,
    :debounce,
    :depth,
    :allow,
    :deny,
    :weight_fn,
    :cluster_size,
    :poll_interval,
    :callback_timeout,
    :overrides
  ]

  defp config!(opts) do
    unless is_list(opts) and Keyword.keyword?(opts) do
      raise ArgumentError,
            "HRW.Cluster expects a keyword list of options, got: #{HRW.brief(opts)}"
    end

    keys = Keyword.keys(opts)

    case Enum.uniq(keys) -- @options do
      [] -> :ok
      unknown -> raise ArgumentError, "HRW.Cluster got unknown options: #{HRW.brief(unknown)}"
    end

    case Enum.uniq(keys -- Enum.uniq(keys)) do
      [] -> :ok
      twice -> raise ArgumentError, "HRW.Cluster got options more than once: #{HRW.brief(twice)}"
    end

    name = name!(opts)
    structure = Keyword.get(opts, :structure, :skeleton)

    unless structure in [:skeleton, :ring] do
      raise ArgumentError,
            "HRW.Cluster :structure must be :skeleton or :ring, got: #{HRW.brief(structure)}"
    end

    %{
      name: name,
      structure: structure,
      build_opts: build_opts!(opts, structure),
      source: source!(Keyword.get(opts, :source, :nodes)),
      debounce: integer!(opts, :debounce, @default_debounce, 0, @max_ms),
      depth: integer!(opts, :depth, 1, 1, @max_depth),
      poll_interval: poll_interval!(opts),
      callback_timeout: integer!(opts, :callback_timeout, @default_callback_timeout, 1, @max_ms),
      allow: filter!(opts, :allow),
      deny: filter!(opts, :deny),
      weight_fn: weight_fn!(Keyword.get(opts, :weight_fn)),
      overrides_option: HRW.Overrides.new!(Keyword.get(opts, :overrides), "HRW.Cluster", true)
    }
  end

  defp name!(opts) do
    case Keyword.fetch(opts, :name) do
      {:ok, name} ->
        if valid_name?(name) do
          name
        else
          raise ArgumentError,
                "HRW.Cluster :name must be an atom other than nil, true and false, " <>
                  "at most #{@max_name} characters (code points) long, got: #{HRW.brief(name)}"
        end

      :error ->
        raise ArgumentError, "HRW.Cluster requires a :name option"
    end
  end

  defp build_opts!(opts, structure) do
    case Keyword.fetch(opts, :cluster_size) do
      :error ->
        []

      {:ok, _} when structure != :skeleton ->
        raise ArgumentError, "HRW.Cluster :cluster_size applies to structure: :skeleton only"

      {:ok, size} when is_integer(size) and size > 0 and size <= @max_ms ->
        # Range checked by HRW.build/2 itself, on a throwaway skeleton, now rather
        # than at the first change.
        _ = HRW.build([:probe], cluster_size: size)
        [cluster_size: size]

      {:ok, other} ->
        raise ArgumentError,
              "HRW.Cluster :cluster_size must be a positive integer, got: #{HRW.brief(other)}"
    end
  end

  defp source!(:nodes), do: :nodes
  defp source!({:pg, scope, _group} = source) when is_atom(scope), do: source

  defp source!(other) do
    raise ArgumentError,
          "HRW.Cluster :source must be :nodes or {:pg, scope, group}, got: #{HRW.brief(other)}"
  end

  defp integer!(opts, key, default, min, max) do
    case Keyword.get(opts, key, default) do
      value when is_integer(value) and value >= min and value <= max ->
        value

      other ->
        raise ArgumentError,
              "HRW.Cluster #{inspect(key)} must be an integer in #{min}..#{max}, " <>
                "got: #{HRW.brief(other)}"
    end
  end

  defp poll_interval!(opts) do
    if Keyword.has_key?(opts, :poll_interval),
      do: integer!(opts, :poll_interval, nil, 1, @max_ms),
      else: nil
  end

  defp filter!(opts, key) do
    case Keyword.get(opts, key) do
      nil ->
        nil

      fun when is_function(fun, 1) ->
        fun

      regexes when is_list(regexes) ->
        if Enum.all?(regexes, &regex?/1) do
          # Kept as source and options, compiled where they are matched: since OTP
          # 28 a compiled regex is a reference that only the VM that compiled it
          # can run, and options may come from another node or a binary.
          {:regexes, Enum.map(regexes, &{&1.source, &1.opts})}
        else
          raise ArgumentError, bad_filter(key, regexes)
        end

      other ->
        raise ArgumentError, bad_filter(key, other)
    end
  end

  defp regex?(%Regex{source: source} = regex) when is_binary(source) do
    match?({:ok, _}, Regex.compile(source, regex.opts))
  end

  defp regex?(_other), do: false

  defp bad_filter(key, value) do
    "HRW.Cluster #{inspect(key)} must be a function of arity 1 or a list of regexes, " <>
      "got: #{HRW.brief(value)}"
  end

  defp weight_fn!(nil), do: nil
  defp weight_fn!(fun) when is_function(fun, 1), do: fun

  defp weight_fn!(other) do
    raise ArgumentError,
          "HRW.Cluster :weight_fn must be a function of arity 1, got: #{HRW.brief(other)}"
  end

  # -- the server ------------------------------------------------------------------

  @impl GenServer
  def init(config) do
    # Trapping exits lets `terminate/2` run when the parent stops us, and keeps the
    # evaluation processes' exits (they are linked) from killing the server.
    Process.flag(:trap_exit, true)

    state =
      Map.merge(config, %{
        generation: 0,
        history: Tuple.duplicate(nil, config.depth),
        spec: nil,
        overrides: config.overrides_option,
        timer: nil,
        eval: nil,
        dirty: false,
        failures: 0,
        subscribers: %{}
      })

    {state, previous?} = take_over(state)

    with {:ok, state} <- follow(state) do
      case evaluate_now(state) do
        :unchanged ->
          {:ok, state}

        {:changed, spec, structure} ->
          {:ok, publish(state, spec, structure)}

        {:error, message} when previous? ->
          {:ok, failed(state, message)}

        {:error, message} ->
          {:stop, {:evaluation_failed, message}}
      end
    end
  end

  # A previous server's entry (after a crash, a kill or a :shutdown): continue its
  # generations, resized to this server's depth.
  defp take_over(state) do
    case :persistent_term.get(key(state), @missing) do
      {@tag, generation, history, {spec, option} = meta} ->
        resized = resize(history, state.depth)

        if resized != history,
          do: :persistent_term.put(key(state), {@tag, generation, resized, meta})

        # Overrides put since the previous server started stay, unless this server
        # was started with another :overrides option.
        {_structure, _build_opts, overrides, _entries} = spec
        overrides = if option == state.overrides_option, do: overrides, else: state.overrides
        state = %{state | generation: generation, history: resized, spec: spec}
        {%{state | overrides: overrides}, true}

      _ ->
        {state, false}
    end
  end

  defp resize(history, depth) do
    kept = history |> Tuple.to_list() |> Enum.take(depth)
    List.to_tuple(kept ++ List.duplicate(nil, depth - length(kept)))
  end

  defp follow(%{source: :nodes} = state) do
    :ok = :net_kernel.monitor_nodes(true, node_type: :visible)
    {:ok, Map.put(state, :pg_ref, nil)}
  end

  defp follow(%{source: {:pg, scope, group}} = state) do
    cond do
      Process.whereis(scope) == nil ->
        {:stop, {:pg_scope_not_started, scope}}

      state.poll_interval == nil and pg_monitor?() ->
        {ref, _pids} = :pg.monitor(scope, group)
        {:ok, Map.put(state, :pg_ref, ref)}

      true ->
        state = %{state | poll_interval: state.poll_interval || @default_poll}
        Process.send_after(self(), :poll, state.poll_interval)
        {:ok, Map.put(state, :pg_ref, nil)}
    end
  end

  defp pg_monitor? do
    Code.ensure_loaded?(:pg) and function_exported?(:pg, :monitor, 2)
  end

  @impl GenServer
  def handle_call({:subscribe, pid}, _from, state) do
    if Enum.any?(state.subscribers, fn {_ref, p} -> p == pid end) do
      {:reply, :ok, state}
    else
      ref = Process.monitor(pid)
      {:reply, :ok, put_in(state.subscribers[ref], pid)}
    end
  end

  def handle_call({:unsubscribe, pid}, _from, state) do
    {gone, kept} = Enum.split_with(state.subscribers, fn {_ref, p} -> p == pid end)
    Enum.each(gone, fn {ref, _} -> Process.demonitor(ref, [:flush]) end)
    {:reply, :ok, %{state | subscribers: Map.new(kept)}}
  end

  def handle_call({:put_overrides, overrides}, _from, state) do
    # A running evaluation was given the old overrides: its result will be dropped
    # (see evaluated/2) and the members evaluated again.
    state = %{state | overrides: overrides}

    case state.spec do
      {structure, build_opts, old, entries} when old != overrides ->
        spec = {structure, build_opts, overrides, entries}

        try do
          build(spec)
        rescue
          error ->
            message =
              "HRW.Cluster #{HRW.brief(state.name)}: building with the overrides " <>
                describe(:error, error)

            {:reply, {:error, message}, state}
        else
          new -> {:reply, :ok, publish(state, spec, new)}
        end

      _same_or_none ->
        {:reply, :ok, state}
    end
  end

  def handle_call(request, _from, state) do
    Logger.debug("HRW.Cluster #{HRW.brief(state.name)} ignored the call #{HRW.brief(request)}")
    {:reply, {:error, :unknown_call}, state}
  end

  @impl GenServer
  def handle_cast(request, state) do
    Logger.debug("HRW.Cluster #{HRW.brief(state.name)} ignored the cast #{HRW.brief(request)}")
    {:noreply, state}
  end

  @impl GenServer
  def handle_info({event, _node, _info}, state) when event in [:nodeup, :nodedown],
    do: {:noreply, schedule(state)}

  def handle_info({ref, event, _group, _pids}, %{pg_ref: ref} = state)
      when event in [:join, :leave],
      do: {:noreply, schedule(state)}

  def handle_info(:poll, state) do
    Process.send_after(self(), :poll, state.poll_interval)
    {:noreply, schedule(state)}
  end

  def handle_info(:rebuild, state), do: {:noreply, start_evaluation(%{state | timer: nil})}

  def handle_info({@result, tag, result}, %{eval: %{tag: tag} = eval} = state) do
    Process.demonitor(eval.mref, [:flush])
    Process.cancel_timer(eval.timer)
    {:noreply, evaluated(%{state | eval: nil}, result)}
  end

  def handle_info({@timeout, tag}, %{eval: %{tag: tag} = eval} = state) do
    Process.exit(eval.pid, :kill)
    Process.demonitor(eval.mref, [:flush])
    {:noreply, evaluated(%{state | eval: nil}, {:error, timed_out(state)})}
  end

  def handle_info({:DOWN, mref, :process, _pid, reason}, %{eval: %{mref: mref} = eval} = state) do
    Process.cancel_timer(eval.timer)
    {:noreply, evaluated(%{state | eval: nil}, {:error, exited(reason)})}
  end

  # A result or a timeout of an evaluation that has already been settled.
  def handle_info({tag, _ref, _result}, state) when tag == @result, do: {:noreply, state}
  def handle_info({tag, _ref}, state) when tag == @timeout, do: {:noreply, state}

  def handle_info({:DOWN, ref, :process, _pid, _reason}, state) do
    {:noreply, %{state | subscribers: Map.delete(state.subscribers, ref)}}
  end

  # Evaluation processes are linked (so they die with the server); their exits are
  # seen through their monitors. Links other than the parent's (handled by
  # GenServer) are not ours to act on either.
  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  def handle_info(message, state) do
    Logger.debug("HRW.Cluster #{HRW.brief(state.name)} ignored #{HRW.brief(message)}")
    {:noreply, state}
  end

  @impl GenServer
  def terminate(reason, state) do
    if state.eval, do: Process.exit(state.eval.pid, :kill)
    # Only a deliberate, normal stop erases the entry: after a crash, a kill or a
    # :shutdown (possibly half of a restart) lookups keep the last structure.
    if reason == :normal, do: :persistent_term.erase(key(state))
    :ok
  end

  # Crash reports and :sys.get_status/1 show a summary, not every member.
  @impl GenServer
  def format_status(_reason, [_pdict, state]) do
    [
      data: [
        {~c"State",
         %{
           name: state.name,
           generation: state.generation,
           depth: state.depth,
           members: length(members_of(state.spec)),
           evaluating: state.eval != nil,
           failures: state.failures,
           subscribers: map_size(state.subscribers)
         }}
      ]
    ]
  end

  defp members_of({_structure, _opts, _overrides, entries}), do: entries
  defp members_of(nil), do: []

  defp key(state), do: {__MODULE__, state.name}

  # The first event of a burst starts the timer; the rest ride on it (or on a
  # pending retry). Events during an evaluation ask for one more after it.
  defp schedule(%{eval: eval} = state) when eval != nil, do: %{state | dirty: true}

  defp schedule(%{timer: nil} = state) do
    %{state | timer: Process.send_after(self(), :rebuild, state.debounce)}
  end

  defp schedule(state), do: state

  defp evaluated(state, {:error, message}), do: failed(state, message)

  # Built with overrides that have been replaced since (put_overrides/2 during the
  # evaluation): not published, evaluated again.
  defp evaluated(state, {:changed, {_, _, overrides, _}, _structure})
       when overrides != state.overrides,
       do: schedule(%{state | failures: 0, dirty: false})

  defp evaluated(state, result) do
    state =
      case result do
        :unchanged -> state
        {:changed, spec, structure} -> publish(state, spec, structure)
      end

    state = %{state | failures: 0}
    if state.dirty, do: schedule(%{state | dirty: false}), else: state
  end

  defp failed(state, message) do
    failures = state.failures + 1
    delay = min(@first_retry * 2 ** min(failures - 1, 5), @max_retry)

    Logger.warning(
      "HRW.Cluster #{HRW.brief(state.name)}: #{message}; " <>
        "kept the previous members, next attempt in #{delay} ms"
    )

    timer = Process.send_after(self(), :rebuild, delay)
    %{state | failures: failures, timer: timer, dirty: false}
  end

  # Still no member (only the overrides or options changed): the new spec is kept,
  # with no new generation and no message.
  defp publish(%{generation: generation} = state, spec, nil)
       when generation > 0 and elem(state.history, 0) == nil do
    meta = {spec, state.overrides_option}
    :persistent_term.put(key(state), {@tag, generation, state.history, meta})
    %{state | spec: spec}
  end

  defp publish(state, spec, structure) do
    old = elem(state.history, 0)
    depth = tuple_size(state.history)
    history = state.history |> Tuple.insert_at(0, structure) |> Tuple.delete_at(depth)
    generation = state.generation + 1
    :persistent_term.put(key(state), {@tag, generation, history, {spec, state.overrides_option}})
    message = {:hrw_cluster_changed, state.name, old, structure}
    Enum.each(state.subscribers, fn {_ref, pid} -> send(pid, message) end)
    %{state | generation: generation, history: history, spec: spec}
  end

  defp timed_out(state) do
    "the evaluation of the members did not finish within #{state.callback_timeout} ms " <>
      "(:callback_timeout) and was killed"
  end

  defp exited(reason), do: "the evaluation of the members exited: #{HRW.brief(reason)}"

  # -- evaluations -------------------------------------------------------------------

  # Everything user-supplied runs in a process of its own, linked (it dies with the
  # server) and monitored (its end is seen), never in the server.
  defp spawn_evaluation(state) do
    server = self()
    tag = make_ref()

    job =
      Map.take(state, [:source, :allow, :deny, :weight_fn, :structure, :build_opts, :overrides])
      |> Map.put(:spec, state.spec)

    {pid, mref} =
      Process.spawn(fn -> send(server, {@result, tag, evaluate(job)}) end, [:link, :monitor])

    %{tag: tag, pid: pid, mref: mref}
  end

  defp start_evaluation(%{eval: nil} = state) do
    eval = spawn_evaluation(state)
    timer = Process.send_after(self(), {@timeout, eval.tag}, state.callback_timeout)
    %{state | eval: Map.put(eval, :timer, timer)}
  end

  defp start_evaluation(state), do: %{state | dirty: true}

  # At start, the first evaluation is waited for (so the first structure is
  # published before start_link returns), under the same timeout.
  defp evaluate_now(state) do
    %{tag: tag, pid: pid, mref: mref} = spawn_evaluation(state)

    receive do
      {@result, ^tag, result} ->
        Process.demonitor(mref, [:flush])
        result

      {:DOWN, ^mref, :process, _pid, reason} ->
        {:error, exited(reason)}
    after
      state.callback_timeout ->
        Process.exit(pid, :kill)
        Process.demonitor(mref, [:flush])

        receive do
          {@result, ^tag, _result} -> :ok
        after
          0 -> :ok
        end

        {:error, timed_out(state)}
    end
  end

  # Runs in the evaluation process: :unchanged, {:changed, spec, structure} or
  # {:error, bounded_message}.
  defp evaluate(job) do
    nodes = phase("reading the :source", fn -> source_nodes(job.source) end)

    allow = compiled(job.allow)
    deny = compiled(job.deny)

    members =
      nodes
      |> Enum.uniq()
      |> Enum.filter(
        &(allowed?(allow, :allow, &1, true) and not allowed?(deny, :deny, &1, false))
      )
      |> Enum.sort()

    entries =
      case job.weight_fn do
        nil -> members
        weight_fn -> Enum.map(members, &{&1, weight!(weight_fn, &1)})
      end

    spec = {job.structure, job.build_opts, job.overrides, entries}

    if spec == job.spec do
      :unchanged
    else
      {:changed, spec, phase("building the structure", fn -> build(spec) end)}
    end
  catch
    {@failed, message} -> {:error, message}
    kind, reason -> {:error, "the evaluation of the members #{describe(kind, reason)}"}
  end

  defp phase(what, fun) do
    fun.()
  catch
    kind, reason -> throw({@failed, "#{what} #{describe(kind, reason)}"})
  end

  defp source_nodes(:nodes), do: [node() | Node.list(:visible)]

  defp source_nodes({:pg, scope, group}) do
    scope |> :pg.get_members(group) |> Enum.map(&node/1)
  end

  # A filter's regexes compiled in this VM (see `filter!/2`).
  defp compiled({:regexes, sources}),
    do: Enum.map(sources, fn {source, opts} -> Regex.compile!(source, opts) end)

  defp compiled(filter), do: filter

  defp allowed?(nil, _key, _node, default), do: default

  defp allowed?(fun, key, node, _default) when is_function(fun, 1),
    do: !!callback(fun, key, node)

  defp allowed?(regexes, _key, node, _default) do
    name = Atom.to_string(node)
    Enum.any?(regexes, &Regex.match?(&1, name))
  end

  defp weight!(weight_fn, node) do
    case callback(weight_fn, :weight_fn, node) do
      w when is_number(w) and w > 0 and w <= @max_weight ->
        w

      other ->
        throw(
          {@failed,
           ":weight_fn returned #{HRW.brief(other)} for #{HRW.brief(node)}, " <>
             "not a positive number at most 2^53"}
        )
    end
  end

  defp callback(fun, key, node) do
    fun.(node)
  catch
    kind, reason ->
      throw({@failed, "#{inspect(key)} #{describe(kind, reason)} for #{HRW.brief(node)}"})
  end

  defp describe(:error, %{__exception__: true, message: message} = exception)
       when is_binary(message),
       do: "raised #{HRW.brief(exception.__struct__)}: #{HRW.brief(message)}"

  defp describe(:error, reason), do: "raised #{HRW.brief(reason)}"
  defp describe(:throw, value), do: "threw #{HRW.brief(value)}"
  defp describe(:exit, reason), do: "exited with #{HRW.brief(reason)}"

  defp build({_structure, _build_opts, _overrides, []}), do: nil

  defp build({structure, build_opts, overrides, entries}) do
    # Entries are all bare nodes, or all {node, weight} (with :weight_fn).
    scorer = if match?([{_, _} | _], entries), do: [scorer: %HRW.Weighted{}], else: []
    overrides = if overrides, do: [overrides: overrides], else: []

    case structure do
      :skeleton -> HRW.build(entries, build_opts ++ scorer ++ overrides)
      :ring -> HRW.Ring.new(entries, scorer ++ overrides)
    end
  end
end
