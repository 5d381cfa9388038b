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

  # The published entry: {@tag, generation, history, until, {spec,
  # overrides_option, quorum, lease, pid}, snapshot}. `history` is a tuple of
  # `depth` structures, newest first (nil for an empty generation or one without
  # quorum); `until` is `:always`, or, for a quorum a lease holds, an atomics
  # array of one integer, the time at which that quorum lapses, which the
  # publishing server moves as answers arrive: every lookup compares it with the
  # clock and reads the current structure as nil from then on, whatever the
  # server is doing. That time is on the clock of `:os.perf_counter/0`, read in
  # a fraction of the time `:erlang.monotonic_time/1` takes where the OS clock is
  # a system call (see `perf_until/1`; the figures head
  # bench/results/cluster-owner-ab-lease-2026-12-04.txt).
  # `spec` = {structure, build_opts, overrides, entries} is what
  # the current structure was built from, so a new server can tell whether it
  # differs; `overrides_option`, `quorum` and `lease` are the publishing server's
  # (no spec holds them), `pid` is that server, so that a process registered under
  # its name that is not one is told apart; `snapshot` is the current
  # `HRW.Cluster.Snapshot` without its structure (`elem(history, 0)`).
  @tag :"$hrw_cluster"
  @missing :"$hrw_cluster_missing"
  @release :"$hrw_cluster_release"

  @typedoc "What a structure is built from: `{structure, build_opts, overrides, entries}`."
  @type spec :: {:skeleton | :ring, keyword(), map() | nil, [term()]}

  @doc """
  The published `{generation, history}` of the cluster `name`, or `ArgumentError`
  when none is published.
  """
  # The current structure is read as nil once the lease's quorum has lapsed by
  # this node's clock.
  @spec entry!(atom()) :: {pos_integer(), tuple()}
  def entry!(name) when is_atom(name) do
    case :persistent_term.get(key(name), @missing) do
      {@tag, generation, history, :always, _meta, _snapshot} ->
        {generation, history}

      {@tag, generation, history, until, _meta, _snapshot} ->
        if held?(until), do: {generation, history}, else: {generation, put_elem(history, 0, nil)}

      _ ->
        raise ArgumentError, not_running(name)
    end
  end

  def entry!(name), do: raise(ArgumentError, bad_name(name))

  @doc """
  The current `HRW.Cluster.Snapshot` of the cluster `name`, from one read of its
  entry (without quorum once the lease's has lapsed by this node's clock), or
  `ArgumentError` when none is published.
  """
  @spec snapshot!(atom()) :: HRW.Cluster.Snapshot.t()
  def snapshot!(name) when is_atom(name) do
    case :persistent_term.get(key(name), @missing) do
      {@tag, _generation, history, until, _meta, snapshot} ->
        if until == :always or held?(until),
          do: %{snapshot | structure: elem(history, 0)},
          else: %{snapshot | structure: nil, quorum?: false}

      _ ->
        raise ArgumentError, not_running(name)
    end
  end

  def snapshot!(name), do: raise(ArgumentError, bad_name(name))

  defp held?(until), do: :atomics.get(until, 1) > :os.perf_counter()

  @doc """
  The pid of the server of `name`, or `ArgumentError` when none runs, or when the
  process registered under its server's name is not the server that published
  its entry. Sends nothing.
  """
  @spec pid!(atom()) :: pid()
  def pid!(name) when is_atom(name) do
    server = HRW.Cluster.Options.existing_server_name(name)
    pid = server && Process.whereis(server)

    case :persistent_term.get(key(name), @missing) do
      {@tag, _generation, _history, _until, {_, _, _, _, ^pid}, _snapshot} when is_pid(pid) ->
        pid

      _ when is_pid(pid) ->
        raise ArgumentError,
              "the process registered as #{HRW.brief(server)} is not the server of " <>
                "HRW.Cluster #{HRW.brief(name)}"

      _ ->
        raise ArgumentError, not_running(name)
    end
  end

  def pid!(name), do: raise(ArgumentError, bad_name(name))

  defp not_running(name), do: "no HRW.Cluster named #{HRW.brief(name)} is running"
  defp bad_name(name), do: "an HRW.Cluster name is an atom, got: #{HRW.brief(name)}"

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
        lease: Lease.new(config.lease, HRW.Cluster.Options.server_name(config.name)),
        # The published entry's `until` (an atomics array) while a lease holds its
        # quorum, else nil.
        until: nil,
        # With a lease, members whose departure has been seen and whose keys stay
        # where they are until their own quorum must have lapsed: node =>
        # {monotonic ms, its entry in the spec}; and the timer that releases them.
        departed: %{},
        release: nil
      })

    {state, previous} = take_over(state)
    previous? = previous != nil

    with {:ok, state} <- follow(state) do
      state = hold_absent(state, previous)

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
  # generations, resized to this server's depth, under this server's pid (its
  # `until` stays the previous server's, which lapses on its own).
  defp take_over(state) do
    case :persistent_term.get(key(state.name), @missing) do
      {@tag, generation, history, until, {spec, option, quorum, lease, _pid}, snapshot} ->
        previous = members_of(spec)
        resized = resize(history, state.depth)
        meta = {spec, option, quorum, lease, self()}
        :persistent_term.put(key(state.name), {@tag, generation, resized, until, meta, snapshot})

        # Overrides put since the previous server started stay, unless this server
        # was started with another :overrides option.
        {_structure, _build_opts, overrides, _entries} = spec
        overrides = if option == state.overrides_option, do: overrides, else: state.overrides
        # Whatever decides the quorum besides the members: another quorum, a lease
        # on either side (a new one has heard no member yet and needs the
        # structure built; an entry published under one may have lapsed): no spec
        # to compare, so the first evaluation publishes.
        spec = if {quorum, lease, state.lease} == {state.quorum, nil, nil}, do: spec, else: nil
        state = %{state | generation: generation, history: resized}
        {%{state | spec: spec, snapshot: snapshot, overrides: overrides}, previous}

      _ ->
        {state, nil}
    end
  end

  # A server with a lease that takes an entry over treats the entry's members that
  # its source no longer lists as just departed: it cannot know when they left,
  # nor whether their quorum has lapsed (see depart/2).
  defp hold_absent(%{lease: nil} = state, _previous), do: state
  defp hold_absent(state, nil), do: state

  defp hold_absent(state, previous) do
    present =
      case state.source do
        :nodes -> [node() | Node.list(:visible)]
        {:pg, scope, group} -> scope |> :pg.get_members(group) |> Enum.map(&node/1)
      end

    at = :erlang.monotonic_time(:millisecond) + Lease.hold(state.lease.ms)

    departed =
      for entry <- previous,
          node_of(entry) not in present,
          into: %{},
          do: {node_of(entry), {at, entry}}

    arm_release(%{state | departed: departed})
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
    pid = Process.whereis(scope)

    cond do
      pid == nil ->
        {:stop, {:pg_scope_not_started, scope}}

      not pg_scope?(scope, pid) ->
        {:stop, {:not_a_pg_scope, scope}}

      state.poll_interval == nil and pg_monitor?() ->
        {ref, _pids} = :pg.monitor(scope, group)
        {:ok, Map.put(state, :pg_ref, ref)}

      true ->
        state = %{state | poll_interval: state.poll_interval || @default_poll}
        Process.send_after(self(), :poll, state.poll_interval)
        {:ok, Map.put(state, :pg_ref, nil)}
    end
  end

  # Whether `pid`, registered as `scope`, is a :pg scope, told without calling it
  # (the calls of :pg would reach any process): a scope owns the ETS table named
  # after it and was started by :pg's server: `pg` on OTP 25 to 27,
  # `data_publisher` on OTP 29 (docs/MAINTAINING.md, "Internals we rely on").
  defp pg_scope?(scope, pid) do
    :ets.info(scope, :owner) == pid and
      :proc_lib.translate_initial_call(pid) in [{:pg, :init, 1}, {:data_publisher, :init, 1}]
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
  # returns (see remove_now/2), or, with a lease, once its own quorum must have
  # lapsed (see depart/2); joins wait for the debounce.
  def handle_info({:nodedown, node, _info}, state),
    do: {:noreply, state |> depart([node]) |> schedule()}

  def handle_info({:nodeup, node, _info}, state),
    do: {:noreply, state |> returned([node]) |> schedule()}

  def handle_info({ref, :join, _group, pids}, %{pg_ref: ref} = state),
    do: {:noreply, state |> returned(Enum.map(pids, &node/1)) |> schedule()}

  # The nodes of the leaving processes that have no other process in the group
  # leave like a nodedown.
  def handle_info({ref, :leave, group, pids}, %{pg_ref: ref} = state) do
    {:pg, scope, ^group} = state.source
    remaining = scope |> :pg.get_members(group) |> Enum.map(&node/1)
    gone = pids |> Enum.map(&node/1) |> Enum.uniq() |> Enum.reject(&(&1 in remaining))
    {:noreply, state |> depart(gone) |> schedule()}
  end

  # The release of departed members, from this server's own timer only; the
  # deadlines decide, so even this timer's message releases nothing early.
  def handle_info({:timeout, ref, @release}, %{release: ref} = state) do
    now = :erlang.monotonic_time(:millisecond)
    {due, held} = Enum.split_with(state.departed, fn {_node, {at, _entry}} -> at <= now end)
    state = %{state | departed: Map.new(held), release: nil}
    {:noreply, state |> remove_now(Enum.map(due, &elem(&1, 0))) |> arm_release() |> schedule()}
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
  def handle_info(Lease.message() = message, state), do: {:noreply, lease(state, message)}

  def handle_info({:timeout, _ref, kind} = message, state) when Lease.is_timer(kind),
    do: {:noreply, lease(state, message)}

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
  # members reach the quorum (with a lease: those heard from lately, and until
  # the quorum lapses), else from `nil`.
  defp publish(state, spec, structure) do
    entries = members_of(spec)
    members = Enum.map(entries, &node_of/1)
    {quorum?, until, lease} = Lease.check(state.lease, members, state.quorum)
    state = %{state | built: structure, lease: lease, until: until_of(quorum?, until)}

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
    meta = {spec, state.overrides_option, state.quorum, state.lease && state.lease.ms, self()}
    :persistent_term.put(key(state.name), {@tag, generation, state.history, :always, meta, old})
    %{state | spec: spec}
  end

  defp publish(state, spec, structure, snapshot) do
    old = elem(state.history, 0)
    depth = tuple_size(state.history)
    history = state.history |> Tuple.insert_at(0, structure) |> Tuple.delete_at(depth)
    generation = state.generation + 1

    meta = {spec, state.overrides_option, state.quorum, state.lease && state.lease.ms, self()}

    :persistent_term.put(
      key(state.name),
      {@tag, generation, history, entry_until(state.until), meta, snapshot}
    )

    previous = state.snapshot && %{state.snapshot | structure: old}

    Subscribers.notify(state.subscribers, state.name, previous, %{snapshot | structure: structure})

    %{state | generation: generation, history: history, spec: spec, snapshot: snapshot}
  end

  # An `until` for the entry: a new atomics array for a quorum that a lease holds
  # for a time (each entry its own: no entry's lapse moves with another's).
  defp until_of(true, until) when is_integer(until) do
    ref = :atomics.new(1, signed: true)
    :atomics.put(ref, 1, perf_until(until))
    ref
  end

  defp until_of(_quorum?, _until), do: nil

  # What the entry holds: the lease's atomics, or `:always` without one.
  defp entry_until(nil), do: :always
  defp entry_until(ref), do: ref

  # `until`, in monotonic ms, on the clock of `:os.perf_counter/0`. That counter
  # runs as the hardware does, where the VM's monotonic clock may be corrected
  # by up to 1%: the time left is shortened by 1%, and the counter is read
  # first, so the lookups' lapse never comes later than the lease's.
  defp perf_until(until) do
    perf = :os.perf_counter()
    left = until - :erlang.monotonic_time(:millisecond)
    perf + div(left * 99 * :erlang.convert_time_unit(1, :second, :perf_counter), 100_000)
  end

  defp lease(state, message) do
    {lease, check?} = Lease.handle(message, state.lease)
    leased(%{state | lease: lease}, check?)
  end

  # A lease's quorum lapsed or came back, the members unchanged: published like a
  # change (the lapse timer re-armed either way). While it holds, the entry's
  # `until` follows the answers.
  defp leased(%{spec: spec, snapshot: %{quorum?: held}} = state, true) when spec != nil do
    case Lease.check(state.lease, state.lease.nodes, state.quorum) do
      {^held, until, lease}
      when held == false or is_reference(state.until) == is_integer(until) ->
        if is_integer(until) and is_reference(state.until),
          do: :atomics.put(state.until, 1, perf_until(until))

        %{state | lease: lease}

      _changed ->
        publish(state, spec, state.built)
    end
  end

  defp leased(state, _check?), do: state

  defp node_of({node, _weight}), do: node
  defp node_of(node), do: node

  # Members whose departure this server has seen. Without a lease they leave the
  # structure at once. With one, their keys stay where they are (naming them,
  # so a write to such a key fails rather than reaching a second owner) until
  # the departed member's own quorum must have lapsed: it counted this side only
  # from answers to heartbeats it sent before the departure was seen here, each
  # good for the lease at most by its clock (`Lease.hold/1`). What they answered
  # is forgotten now: they no longer count toward this server's quorum, and
  # count again only from new answers.
  defp depart(state, []), do: state
  defp depart(%{lease: nil} = state, nodes), do: remove_now(state, nodes)

  defp depart(state, nodes) do
    at = :erlang.monotonic_time(:millisecond) + Lease.hold(state.lease.ms)

    departed =
      for entry <- members_of(state.spec),
          node_of(entry) in nodes,
          into: state.departed,
          do: {node_of(entry), {at, entry}}

    state = %{state | lease: Lease.forget(state.lease, nodes), departed: departed}
    state |> leased(true) |> arm_release()
  end

  # Members that are back (a nodeup, a join) follow the source again.
  defp returned(%{departed: departed} = state, _nodes) when departed == %{}, do: state
  defp returned(state, nodes), do: %{state | departed: Map.drop(state.departed, nodes)}

  # The release timer, for the earliest deadline (re-armed by each departure).
  defp arm_release(%{departed: departed} = state) when departed == %{}, do: state

  defp arm_release(state) do
    _ = if state.release, do: :erlang.cancel_timer(state.release)
    now = :erlang.monotonic_time(:millisecond)
    at = state.departed |> Enum.map(fn {_node, {at, _entry}} -> at end) |> Enum.min()
    %{state | release: :erlang.start_timer(max(at - now, 0), self(), @release)}
  end

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
  # Departed members not yet released stay members, with their entries.
  defp spawn_evaluation(state) do
    held = for {_node, {_at, entry}} <- state.departed, do: entry

    state
    |> Map.take([:source, :allow, :deny, :weight_fn, :structure, :build_opts, :overrides])
    |> Map.put(:spec, state.spec)
    |> Map.put(:held, held)
    |> Evaluation.start()
  end

  defp start_evaluation(%{eval: nil} = state) do
    eval = spawn_evaluation(state)
    timer = Process.send_after(self(), timeout_message(eval.tag), state.callback_timeout)
    %{state | eval: Map.put(eval, :timer, timer)}
  end

  defp start_evaluation(state), do: %{state | dirty: true}
end
