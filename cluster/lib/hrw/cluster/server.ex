defmodule HRW.Cluster.Server do
  @moduledoc false
  # The server of an `HRW.Cluster` (see its module doc), a shell around
  # `HRW.Cluster.Machine`, which decides everything: this module turns messages
  # and timers into the machine's events and carries out its effects (follows the
  # source, runs evaluations and builds in processes of their own,
  # `HRW.Cluster.Evaluation`, publishes the entry, notifies subscribers, sends
  # heartbeats). The entry's layout is known here only.

  use GenServer

  import HRW.Cluster.Evaluation, only: [result_message: 2]

  alias HRW.Cluster.{Describe, Evaluation, Machine, Subscribers}

  require Logger

  @members "the evaluation of the members"
  @builds %{
    members: "building the structure",
    without: "the build without the members that left",
    overrides: "building with the overrides"
  }
  # Heartbeats and their answers, and the server's own timers.
  @lease :"$hrw_lease"
  @timer :"$hrw_cluster_timer"
  @eval_timeout :"$hrw_cluster_eval_timeout"

  # The published entry: {@tag, generation, history, until, {spec,
  # overrides_option, quorum, lease, pid}, snapshot}. `history` is a tuple of
  # `depth` structures, newest first (nil for an empty generation or one without
  # quorum); `until` is `:always`, or, for a quorum a lease holds, an atomics
  # array of two integers: the time at which that quorum lapses, which the
  # publishing server moves as the lease's end moves with the answers, and the end it
  # was converted from (`atomics/1`): every lookup compares the first with the
  # clock and reads the current structure as nil from then on, whatever the
  # server is doing. That time is on the clock of `:os.perf_counter/0`, read in
  # a fraction of the time `:erlang.monotonic_time/1` takes where the OS clock is
  # a system call (see `perf_until/1`).
  # `spec` = {structure, build_opts, overrides, entries} is what
  # the current structure was built from, so a new server can tell whether it
  # differs; `overrides_option`, `quorum` and `lease` are the publishing server's
  # (no spec holds them), `pid` is that server, so that a process registered under
  # its name that is not one is told apart; `snapshot` is the current
  # `HRW.Cluster.Snapshot` without its structure (`elem(history, 0)`).
  @tag :"$hrw_cluster"
  @missing :"$hrw_cluster_missing"

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
              "the process registered as #{Describe.value(server)} is not the server of " <>
                "HRW.Cluster #{Describe.value(name)}"

      _ ->
        raise ArgumentError, not_running(name)
    end
  end

  def pid!(name), do: raise(ArgumentError, bad_name(name))

  defp not_running(name), do: "no HRW.Cluster named #{Describe.value(name)} is running"
  defp bad_name(name), do: "an HRW.Cluster name is an atom, got: #{Describe.value(name)}"

  @impl GenServer
  def init(config) do
    # Trapping exits lets `terminate/2` run when the parent stops us, and keeps the
    # evaluation processes' exits (they are linked) from killing the server.
    Process.flag(:trap_exit, true)
    seed = :rand.uniform(0xFFFF_FFFF_FFFF)
    {m, effects} = Machine.new(config, node(), seed, previous(config.name), now())

    state = %{
      m: m,
      config: config,
      timers: %{},
      eval: nil,
      subscribers: %{},
      pg_ref: nil,
      scope_ref: nil,
      nodes?: false,
      until: nil,
      reply: nil,
      stop: nil
    }

    case run(effects, state) do
      %{stop: nil} = state -> {:ok, state}
      %{stop: reason} -> {:stop, reason}
    end
  end

  # A previous server's entry (after a crash, a kill or a :shutdown), for the
  # machine to continue.
  defp previous(name) do
    case :persistent_term.get(key(name), @missing) do
      {@tag, generation, history, _until, {spec, option, quorum, lease, _pid}, snapshot} ->
        %{
          generation: generation,
          history: history,
          until: nil,
          spec: spec,
          option: option,
          quorum: quorum,
          lease: lease,
          snapshot: snapshot
        }

      _ ->
        nil
    end
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
    state = event(state, {:put_overrides, overrides})
    {:reply, state.reply, %{state | reply: nil}}
  end

  def handle_call(request, _from, state) do
    Logger.debug("HRW.Cluster #{name(state)} ignored the call #{Describe.value(request)}")
    {:reply, {:error, :unknown_call}, state}
  end

  @impl GenServer
  def handle_cast(request, state) do
    Logger.debug("HRW.Cluster #{name(state)} ignored the cast #{Describe.value(request)}")
    {:noreply, state}
  end

  @impl GenServer
  def handle_info({:nodedown, node, _info}, state),
    do: {:noreply, event(state, {:nodedown, node})}

  def handle_info({:nodeup, node, _info}, state), do: {:noreply, event(state, {:nodeup, node})}

  def handle_info({ref, :join, _group, pids}, %{pg_ref: ref} = state) when is_reference(ref),
    do: {:noreply, event(state, {:join, Enum.map(pids, &node/1)})}

  def handle_info({ref, :leave, group, pids}, %{pg_ref: ref} = state) when is_reference(ref) do
    {:pg, scope, ^group} = state.config.source
    remaining = scope |> :pg.get_members(group) |> Enum.map(&node/1)
    {:noreply, event(state, {:leave, Enum.map(pids, &node/1), remaining})}
  end

  # The followed scope died: its monitor is gone with it.
  def handle_info({:DOWN, ref, :process, _pid, _reason}, %{scope_ref: ref} = state)
      when is_reference(ref),
      do: {:noreply, event(%{state | scope_ref: nil, pg_ref: nil}, :source_lost)}

  # The server's own timers, each counted only with the reference armed last, so
  # a forged message does nothing.
  def handle_info({:timeout, ref, {@timer, kind}}, state) do
    case state.timers do
      %{^kind => ^ref} ->
        state = %{state | timers: Map.delete(state.timers, kind)}
        {:noreply, state |> listed(kind) |> event({:timer, kind})}

      _ ->
        {:noreply, state}
    end
  end

  def handle_info({@lease, :ping, from, token}, state) when is_pid(from),
    do: {:noreply, event(state, {:ping, from, node(from), token})}

  def handle_info({@lease, :pong, _from, token}, state),
    do: {:noreply, event(state, {:pong, token})}

  def handle_info(result_message(tag, result), %{eval: %{tag: tag} = eval} = state) do
    state = stop_evaluation(state)
    {:noreply, event(state, {:evaluated, eval.seq, result})}
  end

  def handle_info({@eval_timeout, tag}, %{eval: %{tag: tag} = eval} = state) do
    state = stop_evaluation(state)
    message = Evaluation.timed_out(@members, state.config.callback_timeout)
    {:noreply, event(state, {:evaluated, eval.seq, {:error, message}})}
  end

  def handle_info({:DOWN, mref, :process, _pid, reason}, %{eval: %{mref: mref} = eval} = state) do
    state = stop_evaluation(state)

    {:noreply,
     event(state, {:evaluated, eval.seq, {:error, Evaluation.exited(@members, reason)}})}
  end

  def handle_info({:DOWN, ref, :process, _pid, _reason}, state) do
    {:noreply, %{state | subscribers: Map.delete(state.subscribers, ref)}}
  end

  # Evaluation processes are linked (so they die with the server); their exits are
  # seen through their monitors. Links other than the parent's (handled by
  # GenServer) are not ours to act on either.
  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  def handle_info(message, state) do
    Logger.debug("HRW.Cluster #{name(state)} ignored #{Describe.value(message)}")
    {:noreply, state}
  end

  @impl GenServer
  def terminate(reason, state) do
    if state.eval, do: Process.exit(state.eval.pid, :kill)
    # Only a deliberate, normal stop erases the entry: after a crash, a kill or a
    # :shutdown (possibly half of a restart) lookups keep the last structure.
    if reason == :normal, do: :persistent_term.erase(key(state.config.name))
    :ok
  end

  # Crash reports and :sys.get_status/1 show a summary, not every member.
  @impl GenServer
  def format_status(_reason, [_pdict, state]) do
    m = state.m

    [
      data: [
        {~c"State",
         %{
           name: state.config.name,
           generation: m.generation,
           depth: state.config.depth,
           members: length(m.members),
           evaluating: state.eval != nil,
           failures: m.failures,
           subscribers: map_size(state.subscribers),
           fingerprint: m.snapshot && m.snapshot.fingerprint
         }}
      ]
    ]
  end

  defp name(state), do: Describe.value(state.config.name)

  # The entry's key, as documented: `{HRW.Cluster, name}`, the module's name
  # written as the atom it is: this module reads the entry and never calls
  # `HRW.Cluster`, which calls it (no cycle between them).
  defp key(name), do: {:"Elixir.HRW.Cluster", name}

  defp now, do: :erlang.monotonic_time(:millisecond)

  # -- carrying out the machine's effects ---------------------------------------------

  defp event(state, event) do
    {m, effects} = Machine.step(state.m, event, now())
    run(effects, %{state | m: m})
  end

  defp run(effects, state), do: Enum.reduce(effects, state, &effect/2)

  defp effect({:timer, kind, ms}, state) do
    state = effect({:cancel_timer, kind}, state)
    ref = :erlang.start_timer(ms, self(), {@timer, kind})
    %{state | timers: Map.put(state.timers, kind, ref)}
  end

  defp effect({:cancel_timer, kind}, state) do
    {ref, timers} = Map.pop(state.timers, kind)
    _ = ref && :erlang.cancel_timer(ref)
    %{state | timers: timers}
  end

  defp effect({:follow, how}, state) do
    {state, result} = follow(state, state.config.source, how)
    event(state, {:followed, result})
  end

  defp effect({:evaluate, seq, job, mode}, state) do
    job = Map.merge(job, Map.take(state.config, [:source, :allow, :deny, :weight_fn]))
    job = Map.merge(job, Map.take(state.config, [:structure, :build_opts]))
    eval = Evaluation.start(job)

    case mode do
      :await ->
        result = Evaluation.await(eval, state.config.callback_timeout, @members)
        event(state, {:evaluated, seq, result})

      :async ->
        timer =
          Process.send_after(self(), {@eval_timeout, eval.tag}, state.config.callback_timeout)

        %{state | eval: Map.merge(eval, %{seq: seq, timer: timer})}
    end
  end

  defp effect(:cancel_evaluation, %{eval: nil} = state), do: state

  defp effect(:cancel_evaluation, state) do
    Process.exit(state.eval.pid, :kill)
    stop_evaluation(state)
  end

  # Builds run in an evaluation process too (under :callback_timeout), waited for.
  # Nothing on this path renders a term before the publish: the first `inspect`
  # in a VM that loads code on demand may load modules for hundreds of ms.
  defp effect({:build, purpose, spec}, state) do
    eval = Evaluation.start({:build, spec})
    result = Evaluation.await(eval, state.config.callback_timeout, @builds[purpose])
    event(state, {:built, purpose, spec, result})
  end

  defp effect({:publish, entry, notify}, state) do
    until =
      case entry.until do
        :keep -> current_until(state.config.name)
        :always -> :always
        at -> atomics(at)
      end

    meta = {entry.spec, entry.option, entry.quorum, entry.lease, self()}
    value = {@tag, entry.generation, entry.history, until, meta, entry.snapshot}
    :persistent_term.put(key(state.config.name), value)

    with {previous, snapshot} <- notify,
         do: Subscribers.notify(state.subscribers, state.config.name, previous, snapshot)

    %{state | until: if(until != :always, do: until)}
  end

  defp effect({:extend, _at}, %{until: nil} = state), do: state

  # Only another lease end moves the lookups' lapse: converting the same end again,
  # later, would give a later lapse (the 1% is taken from the time left), so a
  # lookup that saw the quorum lapse could see it come back until the lease's end.
  defp effect({:extend, at}, state) do
    if at != :atomics.get(state.until, 2) do
      :atomics.put(state.until, 2, at)
      :atomics.put(state.until, 1, perf_until(at))
    end

    state
  end

  defp effect({:ping, node, token}, state) do
    server = HRW.Cluster.Options.server_name(state.config.name)
    _ = :erlang.send({server, node}, {@lease, :ping, self(), token}, [:noconnect, :nosuspend])
    state
  end

  defp effect({:pong, from, token}, state) do
    _ = :erlang.send(from, {@lease, :pong, self(), token}, [:noconnect, :nosuspend])
    state
  end

  defp effect({:reply, reply}, state), do: %{state | reply: reply}

  defp effect({:log, message}, state) do
    Logger.warning(message)
    state
  end

  defp effect({:stop, reason}, state), do: %{state | stop: reason}

  defp stop_evaluation(%{eval: eval} = state) do
    Process.demonitor(eval.mref, [:flush])
    _ = Process.cancel_timer(eval.timer)
    %{state | eval: nil}
  end

  defp current_until(name) do
    case :persistent_term.get(key(name), @missing) do
      {@tag, _generation, _history, until, _meta, _snapshot} -> until
      _ -> :always
    end
  end

  # An `until` for the entry: a new atomics array for a quorum that a lease holds
  # for a time (each entry its own: no entry's lapse moves with another's): the
  # lapse on the lookups' clock, then the lease's end it was converted from.
  defp atomics(at) do
    ref = :atomics.new(2, signed: true)
    :atomics.put(ref, 1, perf_until(at))
    :atomics.put(ref, 2, at)
    ref
  end

  # `until`, in monotonic ms, on the clock of `:os.perf_counter/0`. That counter
  # runs as the hardware does, where the VM's monotonic clock may be corrected
  # by up to 1%: the time left is shortened by 1%, and the counter is read
  # first, so the lookups' lapse never comes later than the lease's.
  defp perf_until(until) do
    perf = :os.perf_counter()
    left = until - :erlang.monotonic_time(:millisecond)
    perf + div(left * 99 * :erlang.convert_time_unit(1, :second, :perf_counter), 100_000)
  end

  # -- following the source ---------------------------------------------------------

  defp follow(%{nodes?: true} = state, :nodes, _how), do: {state, :nodes}

  defp follow(state, :nodes, _how) do
    :ok = :net_kernel.monitor_nodes(true, node_type: :visible)
    {%{state | nodes?: true}, :nodes}
  end

  defp follow(state, {:pg, scope, group}, how) do
    pid = Process.whereis(scope)

    cond do
      pid == nil ->
        {state, {:error, {:pg_scope_not_started, scope}}}

      not pg_scope?(scope, pid) ->
        {state, {:error, {:not_a_pg_scope, scope}}}

      how == :monitor and pg_monitor?() ->
        {ref, _pids} = :pg.monitor(scope, group)
        {%{state | pg_ref: ref, scope_ref: Process.monitor(pid)}, :monitored}

      true ->
        {%{state | scope_ref: Process.monitor(pid)}, :polled}
    end
  end

  # A poll first reads the group's nodes (an ETS read, no user code), so that
  # the machine sees who left however long the evaluation takes.
  defp listed(%{config: %{source: {:pg, scope, group}}} = state, :poll) do
    nodes = scope |> :pg.get_members(group) |> Enum.map(&node/1)
    event(state, {:listed, nodes})
  catch
    _kind, _reason -> state
  end

  defp listed(state, _kind), do: state

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
end
