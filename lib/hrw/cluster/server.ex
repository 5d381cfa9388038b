defmodule HRW.Cluster.Server do
  @moduledoc false
  # The server of an `HRW.Cluster` (see its module doc): follows the membership
  # source, debounces events, runs evaluations (`HRW.Cluster.Evaluation`), publishes
  # the entry and notifies subscribers. The entry's layout is known here only.

  use GenServer

  import HRW.Cluster.Evaluation, only: [result_message: 2, timeout_message: 1]

  alias HRW.Cluster.Evaluation

  require Logger

  @default_poll 1000
  @first_retry 1_000
  @max_retry 30_000
  @members "the evaluation of the members"

  # The published entry: {@tag, generation, history, {spec, overrides_option}}.
  # `history` is a tuple of `depth` structures, newest first (nil for an empty
  # generation); `spec` = {structure, build_opts, overrides, entries} is what the
  # current structure was built from, so a new server can tell whether it differs;
  # `overrides_option` is the :overrides option of the server that published it.
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
      {@tag, generation, history, {_spec, _option}} -> {generation, history}
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
        subscribers: %{}
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
      {@tag, generation, history, {spec, option} = meta} ->
        resized = resize(history, state.depth)

        if resized != history,
          do: :persistent_term.put(key(state.name), {@tag, generation, resized, meta})

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
           subscribers: map_size(state.subscribers)
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

  # Still no member (only the overrides or options changed): the new spec is kept,
  # with no new generation and no message.
  defp publish(%{generation: generation} = state, spec, nil)
       when generation > 0 and elem(state.history, 0) == nil do
    meta = {spec, state.overrides_option}
    :persistent_term.put(key(state.name), {@tag, generation, state.history, meta})
    %{state | spec: spec}
  end

  defp publish(state, spec, structure) do
    old = elem(state.history, 0)
    depth = tuple_size(state.history)
    history = state.history |> Tuple.insert_at(0, structure) |> Tuple.delete_at(depth)
    generation = state.generation + 1

    :persistent_term.put(
      key(state.name),
      {@tag, generation, history, {spec, state.overrides_option}}
    )

    message = {:hrw_cluster_changed, state.name, old, structure}
    Enum.each(state.subscribers, fn {_ref, pid} -> send(pid, message) end)
    %{state | generation: generation, history: history, spec: spec}
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
