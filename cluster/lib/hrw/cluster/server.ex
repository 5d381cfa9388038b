defmodule HRW.Cluster.Server do
  @moduledoc false
  # The server of an `HRW.Cluster` (see its module doc): follows the membership
  # source, debounces events, runs evaluations (`HRW.Cluster.Evaluation`), publishes
  # the entry and notifies subscribers. The entry's layout is known here only.

  use GenServer

  import HRW.Cluster.Evaluation, only: [result_message: 2, timeout_message: 1]

  alias HRW.Cluster.{Evaluation, Lease, Subscribers}

  require Lease
  require Logger

  @default_poll 1000
  @first_retry 1_000
  @max_retry 30_000
  @members "the evaluation of the members"
  @without "the build without the members that left"

  # The published entry: {@tag, generation, history, {spec, overrides_option,
  # quorum}, snapshot}. `history` is a tuple of `depth` structures, newest first
  # (nil for an empty generation or one without quorum); `spec` = {structure,
  # build_opts, overrides, entries} is what the current structure was built from,
  # so a new server can tell whether it differs; `overrides_option` and `quorum`
  # are the publishing server's (no spec holds them); `snapshot` is the current
  # `HRW.Cluster.Snapshot` without its structure (`elem(history, 0)`).
  @tag :"$hrw_cluster"
  @missing :"$hrw_cluster_missing"

  @typedoc "What a structure is built from: `{structure, build_opts, overrides, entries}`."
  @type spec :: {:skeleton | :ring, keyword(), map() | nil, [term()]}

  @doc """
  The published `{generation, history}` of the cluster `name`, or `ArgumentError`
  when none is published.
  """
  @spec entry!(atom()) :: {pos_integer(), tuple()}
  def entry!(name) do
    case :persistent_term.get(key(name), @missing) do
      {@tag, generation, history, _meta, _snapshot} -> {generation, history}
      _ -> raise ArgumentError, not_running(name)
    end
  end

  @doc """
  The current `HRW.Cluster.Snapshot` of the cluster `name`, from one read of its
  entry, or `ArgumentError` when none is published.
  """
  @spec snapshot!(atom()) :: HRW.Cluster.Snapshot.t()
  def snapshot!(name) do
    case :persistent_term.get(key(name), @missing) do
      {@tag, _generation, history, _meta, snapshot} -> %{snapshot | structure: elem(history, 0)}
      _ -> raise ArgumentError, not_running(name)
    end
  end

  @doc "The pid of the server of `name`, or `ArgumentError` when none runs."
  @spec pid!(atom()) :: pid()
  def pid!(name) do
    case HRW.Cluster.Options.existing_server_name(name) do
      nil -> raise ArgumentError, not_running(name)
      server -> alive!(Process.whereis(server), name)
    end
  end

  defp alive!(pid, _name) when is_pid(pid), do: pid
  defp alive!(nil, name), do: raise(ArgumentError, not_running(name))

  defp not_running(name), do: "no HRW.Cluster named #{HRW.brief(name)} is running"

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
        subscribers: %{},
        snapshot: nil,
        # What the spec builds, kept while no quorum holds: a lease gives it back.
        built: nil,
        lease: Lease.new(config.lease, HRW.Cluster.Options.server_name(config.name))
      })

    {state, previous?} = take_over(state)

    with {:ok, state} <- follow(state) do
      case Evaluation.await(spawn_evaluation(state), state.callback_timeout, @members) do
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
    case :persistent_term.get(key(state.name), @missing) do
      {@tag, generation, history, {spec, option, quorum} = meta, snapshot} ->
        resized = resize(history, state.depth)

        if resized != history,
          do: :persistent_term.put(key(state.name), {@tag, generation, resized, meta, snapshot})

        # Overrides put since the previous server started stay, unless this server
        # was started with another :overrides option.
        {_structure, _build_opts, overrides, _entries} = spec
        overrides = if option == state.overrides_option, do: overrides, else: state.overrides
        # Another quorum, or a lease (which has heard no member yet and needs the
        # structure built): no spec to compare, so the first evaluation publishes.
        spec = if quorum == state.quorum and state.lease == nil, do: spec, else: nil
        state = %{state | generation: generation, history: resized, spec: spec}
        {%{state | snapshot: snapshot, overrides: overrides}, true}

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
  def handle_call({:subscribe, pid}, from, state),
    do: handle_call({:subscribe, pid, :structures}, from, state)

  def handle_call({:subscribe, pid, format}, _from, state),
    do:
      {:reply, :ok, %{state | subscribers: Subscribers.subscribe(state.subscribers, pid, format)}}

  def handle_call({:unsubscribe, pid}, _from, state),
    do: {:reply, :ok, %{state | subscribers: Subscribers.unsubscribe(state.subscribers, pid)}}

  def handle_call({:put_overrides, overrides}, _from, state) do
    # A running evaluation was given the old overrides: its result will be dropped
    # (see evaluated/2) and the members evaluated again.
    state = %{state | overrides: overrides}

    case state.spec do
      {structure, build_opts, old, entries} when old != overrides ->
        spec = {structure, build_opts, overrides, entries}
        # Built in an evaluation process too (under :callback_timeout), waited for.
        eval = Evaluation.start({:build, spec})

        case Evaluation.await(eval, state.callback_timeout, "building with the overrides") do
          {:ok, new} ->
            {:reply, :ok, publish(state, spec, new)}

          {:error, message} ->
            {:reply, {:error, "HRW.Cluster #{HRW.brief(state.name)}: #{message}"}, state}
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
  # A node that goes down leaves the published structure now, before this message
  # returns (see remove_now/2); joins wait for the debounce.
  def handle_info({:nodedown, node, _info}, state),
    do: {:noreply, state |> remove_now([node]) |> schedule()}

  def handle_info({:nodeup, _node, _info}, state), do: {:noreply, schedule(state)}

  def handle_info({ref, :join, _group, _pids}, %{pg_ref: ref} = state),
    do: {:noreply, schedule(state)}

  # The nodes of the leaving processes that have no other process in the group
  # leave now, like a nodedown.
  def handle_info({ref, :leave, group, pids}, %{pg_ref: ref} = state) do
    {:pg, scope, ^group} = state.source
    remaining = scope |> :pg.get_members(group) |> Enum.map(&node/1)
    gone = pids |> Enum.map(&node/1) |> Enum.uniq() |> Enum.reject(&(&1 in remaining))
    {:noreply, state |> remove_now(gone) |> schedule()}
  end

  def handle_info(:poll, state) do
    Process.send_after(self(), :poll, state.poll_interval)
    {:noreply, schedule(state)}
  end

  def handle_info(:rebuild, state), do: {:noreply, start_evaluation(%{state | timer: nil})}

  def handle_info(result_message(tag, result), %{eval: %{tag: tag} = eval} = state) do
    Process.demonitor(eval.mref, [:flush])
    _ = Process.cancel_timer(eval.timer)
    {:noreply, evaluated(%{state | eval: nil}, result)}
  end

  def handle_info(timeout_message(tag), %{eval: %{tag: tag} = eval} = state) do
    Process.exit(eval.pid, :kill)
    Process.demonitor(eval.mref, [:flush])

    {:noreply,
     evaluated(
       %{state | eval: nil},
       {:error, Evaluation.timed_out(@members, state.callback_timeout)}
     )}
  end

  def handle_info({:DOWN, mref, :process, _pid, reason}, %{eval: %{mref: mref} = eval} = state) do
    _ = Process.cancel_timer(eval.timer)
    {:noreply, evaluated(%{state | eval: nil}, {:error, Evaluation.exited(@members, reason)})}
  end

  # Heartbeats (answered with or without a lease), answers, and the lease's timers.
  def handle_info(Lease.message() = message, state) do
    {lease, check?} = Lease.handle(message, state.lease)
    {:noreply, leased(%{state | lease: lease}, check?)}
  end

  # A result or a timeout of an evaluation that has already been settled.
  def handle_info(result_message(_ref, _result), state), do: {:noreply, state}
  def handle_info(timeout_message(_ref), state), do: {:noreply, state}

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
    if reason == :normal, do: :persistent_term.erase(key(state.name))
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
           subscribers: map_size(state.subscribers),
           fingerprint: state.snapshot && state.snapshot.fingerprint
         }}
      ]
    ]
  end

  defp members_of({_structure, _opts, _overrides, entries}), do: entries
  defp members_of(nil), do: []

  # The entry's key, as documented: `{HRW.Cluster, name}`.
  defp key(name), do: {HRW.Cluster, name}

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

  # Publishes what `spec` built (`structure`): lookups answer from it when its
  # members reach the quorum (with a lease: those heard from lately), else from `nil`.
  defp publish(state, spec, structure) do
    entries = members_of(spec)
    members = Enum.map(entries, &node_of/1)
    {quorum?, lease} = Lease.check(state.lease, members, state.quorum)
    state = %{state | built: structure, lease: lease}

    snapshot = %HRW.Cluster.Snapshot{
      name: state.name,
      generation: state.generation + 1,
      fingerprint: HRW.Cluster.Fingerprint.of(entries, weighted: state.weight_fn != nil),
      members: members,
      quorum?: quorum?,
      structure: nil
    }

    publish(state, spec, if(quorum?, do: structure), snapshot)
  end

  # Still no structure, and the same members (only the overrides or options
  # changed): the new spec is kept, with no new generation and no message.
  defp publish(%{generation: generation, snapshot: %{} = old} = state, spec, nil, snapshot)
       when generation > 0 and elem(state.history, 0) == nil and
              old.fingerprint == snapshot.fingerprint and old.members == snapshot.members and
              old.quorum? == snapshot.quorum? do
    meta = {spec, state.overrides_option, state.quorum}
    :persistent_term.put(key(state.name), {@tag, generation, state.history, meta, old})
    %{state | spec: spec}
  end

  defp publish(state, spec, structure, snapshot) do
    old = elem(state.history, 0)
    depth = tuple_size(state.history)
    history = state.history |> Tuple.insert_at(0, structure) |> Tuple.delete_at(depth)
    generation = state.generation + 1

    :persistent_term.put(
      key(state.name),
      {@tag, generation, history, {spec, state.overrides_option, state.quorum}, snapshot}
    )

    previous = state.snapshot && %{state.snapshot | structure: old}

    Subscribers.notify(state.subscribers, state.name, previous, %{snapshot | structure: structure})

    %{state | generation: generation, history: history, spec: spec, snapshot: snapshot}
  end

  # A lease's quorum lapsed or came back, the members unchanged: published like a
  # change (the lapse timer re-armed either way).
  defp leased(%{spec: spec, snapshot: %{quorum?: held}} = state, true) when spec != nil do
    case Lease.check(state.lease, state.lease.nodes, state.quorum) do
      {^held, lease} -> %{state | lease: lease}
      _changed -> publish(state, spec, state.built)
    end
  end

  defp leased(state, _check?), do: state

  defp node_of({node, _weight}), do: node
  defp node_of(node), do: node

  # Removes `nodes` from the published members at once (a nodedown, or the last
  # process of a node leaving the :pg group): built and published before the
  # server handles its next message, so no lookup made after that names them. A
  # running evaluation may have read the source before the event: it is dropped
  # and a new one runs after the debounce.
  defp remove_now(state, []), do: state
  defp remove_now(%{spec: nil} = state, _nodes), do: state

  defp remove_now(state, nodes) do
    {structure, build_opts, overrides, entries} = state.spec
    kept = Enum.reject(entries, &(node_of(&1) in nodes))

    if kept == entries do
      state
    else
      state = drop_evaluation(state)
      spec = {structure, build_opts, overrides, kept}
      eval = Evaluation.start({:build, spec})

      # Nothing on this path renders a term before the publish: the first `inspect`
      # in a VM that loads code on demand may load modules for hundreds of ms.
      case Evaluation.await(eval, state.callback_timeout, @without) do
        {:ok, built} ->
          publish(state, spec, built)

        {:error, message} ->
          Logger.warning("HRW.Cluster #{HRW.brief(state.name)}: #{message} (#{HRW.brief(nodes)})")
          state
      end
    end
  end

  defp drop_evaluation(%{eval: nil} = state), do: state

  defp drop_evaluation(%{eval: eval} = state) do
    Process.exit(eval.pid, :kill)
    Process.demonitor(eval.mref, [:flush])
    _ = Process.cancel_timer(eval.timer)
    %{state | eval: nil, dirty: false}
  end

  # Everything user-supplied runs in an evaluation process (`HRW.Cluster.Evaluation`).
  defp spawn_evaluation(state) do
    state
    |> Map.take([:source, :allow, :deny, :weight_fn, :structure, :build_opts, :overrides])
    |> Map.put(:spec, state.spec)
    |> Evaluation.start()
  end

  defp start_evaluation(%{eval: nil} = state) do
    eval = spawn_evaluation(state)
    timer = Process.send_after(self(), timeout_message(eval.tag), state.callback_timeout)
    %{state | eval: Map.put(eval, :timer, timer)}
  end

  defp start_evaluation(state), do: %{state | dirty: true}
end
