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
  of the members and publishes it with
  `:persistent_term.put({HRW.Cluster, name}, structure)`. Lookups read it with
  `:persistent_term.get/2`, which neither copies the term nor sends a message, and
  hash in the NIF: the server is never on the lookup path, so a busy or restarting
  server slows no lookup. Every node running an `HRW.Cluster` with the same options
  and the same members computes the same owners.

  The server is registered locally as `Module.concat(HRW.Cluster, name)` (for
  `name: :cache`, `HRW.Cluster.cache`), so `name` itself stays free for a process of
  your own, such as the cache the cluster routes for.

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
  only on the member set.

  ## Changes and their cost

  `:persistent_term.put/2` replacing a value makes the runtime scan every process
  for references to the old one (a global garbage-collection pass, proportional to
  the number of processes). So membership events are *debounced*: the first event
  starts a `:debounce` ms timer (default 100), and when it fires the server reads
  the current membership once and publishes a new structure only if the member set
  actually changed. A node that flaps down and up within the window costs nothing;
  a burst of joins costs one rebuild. Lookups in the meantime keep using the
  previous structure.

  After each published change every subscriber (`subscribe/1`) receives
  `{:hrw_cluster_changed, name, old_structure, new_structure}`, so a cache can move
  what `HRW.moves(keys, old_structure, new_structure)` lists. A structure is `nil`
  while the cluster has no member (possible with `{:pg, ...}` or filters): then
  `owner/2` returns `nil` and `owners/3` returns `[]`.

  ## Options

    * `:name` - an atom, required: the cluster's name in every function here and
      in its `:persistent_term` key `{HRW.Cluster, name}`.
    * `:structure` - `:skeleton` (default, `HRW.build/2`: O(log n), churn-stable) or
      `:ring` (`HRW.Ring.new/2`: exact list owners, O(n) lookups).
    * `:source` - `:nodes` (default) or `{:pg, scope, group}`, see "Members".
    * `:debounce` - milliseconds to gather membership events before applying them
      (a non-negative integer, default 100).
    * `:allow` - keep only the nodes it accepts: a function `node -> boolean`, or a
      list of regexes, any of which must match `Atom.to_string(node)`.
    * `:deny` - drop the nodes it accepts (same forms as `:allow`; applied after it).
    * `:weight_fn` - `node -> positive number`: the node's weight; when given the
      structure is built from `{node, weight}` with `scorer: %HRW.Weighted{}`. A
      weight that is not a positive number (or above 2^53) makes the build raise,
      which stops the server (and its start fails with it).
    * `:cluster_size` - passed to `HRW.build/2` (`:skeleton` only).
    * `:poll_interval` - with `{:pg, ...}`: poll the group every that many ms
      instead of monitoring it. Defaults to monitoring, or to 1000 ms polling where
      `:pg.monitor/2` does not exist.

  Options are validated when the server starts; a bad option raises
  `ArgumentError`. Functions passed as options run in the server process.

  When the server stops (its supervisor shuts it down, or `GenServer.stop/1`), the
  `:persistent_term` entry is erased and lookups raise again. If it crashes, the
  last structure stays readable until the supervisor's restart replaces it.
  """

  use GenServer

  require Logger

  @default_debounce 100
  @default_poll 1000
  @missing :"$hrw_cluster_missing"

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
          | {:allow, filter()}
          | {:deny, filter()}
          | {:weight_fn, (node() -> number())}
          | {:cluster_size, pos_integer()}
          | {:poll_interval, pos_integer()}

  @typedoc "The message a subscriber receives after each change."
  @type change :: {:hrw_cluster_changed, name(), structure(), structure()}

  # -- starting --------------------------------------------------------------------

  @doc """
  A child specification for a supervisor; `opts` as in the module doc. The child's
  id is `{HRW.Cluster, name}`, so one supervisor can run several clusters.

  ## Examples

      iex> HRW.Cluster.child_spec(name: :my_cluster).id
      {HRW.Cluster, :my_cluster}
  """
  @spec child_spec([option()]) :: Supervisor.child_spec()
  def child_spec(opts) do
    %{
      id: {__MODULE__, Keyword.get(opts, :name)},
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
  """
  @spec start([option()]) :: GenServer.on_start()
  def start(opts) do
    config = config!(opts)
    GenServer.start(__MODULE__, config, name: server_name(config.name))
  end

  # -- lookups ---------------------------------------------------------------------

  @doc """
  The member that owns `key`, or `nil` while the cluster has no member.

  Reads the published structure (no message, no copy) and hashes `key` natively:
  `HRW.owner(key, structure(name))`. Raises `ArgumentError` when no cluster called
  `name` is running.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_owner)
      iex> HRW.Cluster.owner(:doc_owner, "user:42") == HRW.owner("user:42", HRW.Cluster.members(:doc_owner))
      true
      iex> GenServer.stop(pid)
      iex> HRW.Cluster.owner(:doc_owner, "user:42")
      ** (ArgumentError) no HRW.Cluster named :doc_owner is running
  """
  @spec owner(name(), term()) :: node() | nil
  def owner(name, key) do
    case fetch!(name) do
      nil -> nil
      structure -> HRW.owner(key, structure)
    end
  end

  @doc """
  The `count` best members for `key`, best first (`[]` while there is no member).
  Raises `ArgumentError` when no cluster called `name` is running.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_owners)
      iex> [first | _] = HRW.Cluster.owners(:doc_owners, "user:42", 3)
      iex> first == HRW.Cluster.owner(:doc_owners, "user:42")
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec owners(name(), term(), non_neg_integer()) :: [node()]
  def owners(name, key, count) do
    case fetch!(name) do
      nil when is_integer(count) and count >= 0 ->
        []

      nil ->
        raise ArgumentError,
              "count must be a non-negative integer, got: #{inspect(count, limit: 5)}"

      structure ->
        HRW.owners(key, structure, count)
    end
  end

  @doc """
  The current members, sorted (bare nodes, also when weighted). Raises
  `ArgumentError` when no cluster called `name` is running.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_members, deny: [~r/.*/])
      iex> HRW.Cluster.members(:doc_members)
      []
      iex> GenServer.stop(pid)
      :ok
  """
  @spec members(name()) :: [node()]
  def members(name) do
    case fetch!(name) do
      nil -> []
      %{nodes: nodes} -> Tuple.to_list(nodes)
    end
  end

  @doc """
  The published structure (an `HRW.Skeleton` or `HRW.Ring`, `nil` while there is no
  member), for `HRW.owner_batch/3`, `HRW.group_by_owner/3` and the like. Raises
  `ArgumentError` when no cluster called `name` is running.

  ## Examples

      iex> {:ok, pid} = HRW.Cluster.start_link(name: :doc_structure, structure: :ring)
      iex> %HRW.Ring{} = ring = HRW.Cluster.structure(:doc_structure)
      iex> HRW.owner_batch(["a", "b"], ring) == Enum.map(["a", "b"], &HRW.Cluster.owner(:doc_structure, &1))
      true
      iex> GenServer.stop(pid)
      :ok
  """
  @spec structure(name()) :: structure()
  def structure(name), do: fetch!(name)

  # -- subscriptions ---------------------------------------------------------------

  @doc """
  Subscribes the calling process to changes: after each published change it
  receives `{:hrw_cluster_changed, name, old_structure, new_structure}` (either
  may be `nil`, see the module doc). The server monitors subscribers and forgets
  those that exit. Subscribing twice is the same as once. Raises `ArgumentError`
  when no cluster called `name` is running.

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
  Messages already sent stay in the mailbox.
  """
  @spec unsubscribe(name()) :: :ok
  def unsubscribe(name), do: GenServer.call(server!(name), {:unsubscribe, self()})

  defp fetch!(name) do
    case :persistent_term.get({__MODULE__, name}, @missing) do
      @missing -> raise ArgumentError, not_running(name)
      structure -> structure
    end
  end

  defp server!(name) do
    # No atom is created for a name that was never started.
    server = is_atom(name) and Module.safe_concat(__MODULE__, name)

    case server && GenServer.whereis(server) do
      pid when is_pid(pid) -> pid
      _ -> raise ArgumentError, not_running(name)
    end
  rescue
    ArgumentError -> reraise ArgumentError, not_running(name), __STACKTRACE__
  end

  defp server_name(name), do: Module.concat(__MODULE__, name)

  defp not_running(name), do: "no HRW.Cluster named #{inspect(name, limit: 5)} is running"

  # -- options ---------------------------------------------------------------------

  @options [
    :name,
    :structure,
    :source,
    :debounce,
    :allow,
    :deny,
    :weight_fn,
    :cluster_size,
    :poll_interval
  ]

  defp config!(opts) do
    unless Keyword.keyword?(opts) do
      raise ArgumentError, "HRW.Cluster expects a keyword list of options, got: #{inspect(opts)}"
    end

    case Keyword.keys(opts) -- @options do
      [] -> :ok
      unknown -> raise ArgumentError, "HRW.Cluster got unknown options: #{inspect(unknown)}"
    end

    name =
      case Keyword.fetch(opts, :name) do
        {:ok, name} when is_atom(name) and name not in [nil, true, false] ->
          name

        {:ok, other} ->
          raise ArgumentError, "HRW.Cluster :name must be an atom, got: #{inspect(other)}"

        :error ->
          raise ArgumentError, "HRW.Cluster requires a :name option"
      end

    structure = Keyword.get(opts, :structure, :skeleton)

    unless structure in [:skeleton, :ring] do
      raise ArgumentError,
            "HRW.Cluster :structure must be :skeleton or :ring, got: #{inspect(structure)}"
    end

    build_opts =
      case Keyword.fetch(opts, :cluster_size) do
        :error ->
          []

        {:ok, size} when structure == :skeleton ->
          # Validated now, by building a throwaway skeleton, rather than at the first change.
          _ = HRW.build([:probe], cluster_size: size)
          [cluster_size: size]

        {:ok, _} ->
          raise ArgumentError, "HRW.Cluster :cluster_size applies to structure: :skeleton only"
      end

    %{
      name: name,
      structure: structure,
      build_opts: build_opts,
      source: source!(Keyword.get(opts, :source, :nodes)),
      debounce: non_neg!(opts, :debounce, @default_debounce),
      poll_interval: poll_interval!(opts),
      allow: filter!(opts, :allow),
      deny: filter!(opts, :deny),
      weight_fn: weight_fn!(Keyword.get(opts, :weight_fn))
    }
  end

  defp source!(:nodes), do: :nodes
  defp source!({:pg, scope, _group} = source) when is_atom(scope), do: source

  defp source!(other) do
    raise ArgumentError,
          "HRW.Cluster :source must be :nodes or {:pg, scope, group}, got: #{inspect(other)}"
  end

  defp non_neg!(opts, key, default) do
    case Keyword.get(opts, key, default) do
      ms when is_integer(ms) and ms >= 0 ->
        ms

      other ->
        raise ArgumentError,
              "HRW.Cluster #{inspect(key)} must be a non-negative integer, got: #{inspect(other)}"
    end
  end

  defp poll_interval!(opts) do
    case Keyword.get(opts, :poll_interval) do
      nil ->
        nil

      ms when is_integer(ms) and ms > 0 ->
        ms

      other ->
        raise ArgumentError,
              "HRW.Cluster :poll_interval must be a positive integer, got: #{inspect(other)}"
    end
  end

  defp filter!(opts, key) do
    case Keyword.get(opts, key) do
      nil ->
        nil

      fun when is_function(fun, 1) ->
        fun

      regexes when is_list(regexes) ->
        if Enum.all?(regexes, &is_struct(&1, Regex)) do
          regexes
        else
          raise ArgumentError, bad_filter(key, regexes)
        end

      other ->
        raise ArgumentError, bad_filter(key, other)
    end
  end

  defp bad_filter(key, value) do
    "HRW.Cluster #{inspect(key)} must be a function of arity 1 or a list of regexes, " <>
      "got: #{inspect(value)}"
  end

  defp weight_fn!(nil), do: nil
  defp weight_fn!(fun) when is_function(fun, 1), do: fun

  defp weight_fn!(other) do
    raise ArgumentError,
          "HRW.Cluster :weight_fn must be a function of arity 1, got: #{inspect(other)}"
  end

  # -- the server ------------------------------------------------------------------

  @impl GenServer
  def init(config) do
    # Trapping exits lets `terminate/2` erase the published structure on shutdown.
    Process.flag(:trap_exit, true)
    state = Map.merge(config, %{members: nil, current: nil, timer: nil, subscribers: %{}})

    with {:ok, state} <- follow(state) do
      members = current_members(state)
      current = build(state, members)
      :persistent_term.put(key(state), current)
      {:ok, %{state | members: members, current: current}}
    end
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

  def handle_info(:rebuild, state), do: {:noreply, rebuild(%{state | timer: nil})}

  def handle_info({:DOWN, ref, :process, _pid, _reason}, state) do
    {:noreply, %{state | subscribers: Map.delete(state.subscribers, ref)}}
  end

  # Links other than the parent's (handled by GenServer) are not ours to act on.
  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  def handle_info(message, state) do
    Logger.debug("HRW.Cluster #{inspect(state.name)} ignored #{inspect(message)}")
    {:noreply, state}
  end

  @impl GenServer
  def terminate(_reason, state) do
    :persistent_term.erase(key(state))
    :ok
  end

  defp key(state), do: {__MODULE__, state.name}

  # The first event of a burst starts the timer; the rest ride on it.
  defp schedule(%{timer: nil} = state) do
    %{state | timer: Process.send_after(self(), :rebuild, state.debounce)}
  end

  defp schedule(state), do: state

  defp rebuild(state) do
    case current_members(state) do
      same when same == state.members ->
        state

      members ->
        old = state.current
        new = build(state, members)
        :persistent_term.put(key(state), new)
        message = {:hrw_cluster_changed, state.name, old, new}
        Enum.each(state.subscribers, fn {_ref, pid} -> send(pid, message) end)
        %{state | members: members, current: new}
    end
  end

  defp current_members(state) do
    state
    |> source_nodes()
    |> Enum.uniq()
    |> Enum.filter(&(allowed?(state.allow, &1, true) and not allowed?(state.deny, &1, false)))
    |> Enum.sort()
  end

  defp source_nodes(%{source: :nodes}), do: [node() | Node.list(:visible)]

  defp source_nodes(%{source: {:pg, scope, group}}) do
    scope |> :pg.get_members(group) |> Enum.map(&node/1)
  end

  defp allowed?(nil, _node, default), do: default
  defp allowed?(fun, node, _default) when is_function(fun, 1), do: !!fun.(node)

  defp allowed?(regexes, node, _default) do
    name = Atom.to_string(node)
    Enum.any?(regexes, &Regex.match?(&1, name))
  end

  defp build(_state, []), do: nil

  defp build(%{weight_fn: nil} = state, members), do: build(state, members, [])

  defp build(%{weight_fn: weight_fn} = state, members) do
    entries = Enum.map(members, &{&1, weight!(weight_fn, &1)})
    build(state, entries, scorer: %HRW.Weighted{})
  end

  defp build(%{structure: :skeleton, build_opts: opts}, entries, scorer),
    do: HRW.build(entries, opts ++ scorer)

  defp build(%{structure: :ring}, entries, scorer), do: HRW.Ring.new(entries, scorer)

  defp weight!(weight_fn, node) do
    case weight_fn.(node) do
      w when is_number(w) and w > 0 ->
        w

      other ->
        raise ArgumentError,
              "HRW.Cluster :weight_fn must return a positive number, got #{inspect(other)} " <>
                "for #{inspect(node)}"
    end
  end
end
