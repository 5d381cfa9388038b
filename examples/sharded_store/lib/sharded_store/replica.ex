defmodule ShardedStore.Replica do
  @moduledoc """
  One node's replica: a process that turns messages, calls and timers into
  events of `ShardedStore.Machine`, which decides everything, and carries out
  its effects (replies, sends, monitors). It holds the entries
  (`key => {version, value}`), the last cluster snapshot it has processed, the
  pushes still to do, the members that left its view recently, and the other
  replicas it watches.

  Every message from outside is checked before use: a snapshot message only says
  that the cluster published something (the replica reads the published snapshot
  itself), and a message of any other shape, or with a part of the wrong shape,
  is dropped (the first one of each incarnation is logged), never an exit, which
  would take every entry held with it. That is why it is a `:proc_lib` process
  with a loop of its own rather than a `GenServer`: it answers `GenServer.call/3`
  and takes `GenServer.cast/2` alike, but also checks a call's or a system
  message's `from` (a gen_server's reply to a malformed one raises) and takes
  only the system requests below (`:sys.get_state/1`, `:sys.suspend/1` and the
  like). While suspended (`:sys.suspend/1`), OTP's `sys` takes the messages
  until `:sys.resume/1`, and a malformed system message then ends the process.
  """

  require Logger

  alias ShardedStore.Machine

  @retry 200

  # The system requests taken (the :sys functions that send them).
  @system [:get_state, :get_status, :suspend, :resume]

  @doc """
  Starts this node's replica, registered as `ShardedStore.Replica`, not linked:
  `{:ok, pid}`, or `{:error, {:already_started, pid}}`. `forget`: how many ms a
  departed member counts as possibly holding writes nobody else has (a dead node
  never comes back, so a key whose two owners left becomes readable again, with
  what the others hold).
  """
  @spec start(non_neg_integer()) :: {:ok, pid()} | {:error, {:already_started, pid()}}
  def start(forget), do: :proc_lib.start(__MODULE__, :init_it, [self(), forget])

  @doc "Calls the replica on `node`; any failure is `{:error, reason}`."
  @spec call(node(), term(), timeout()) :: term()
  def call(node, request, timeout) do
    GenServer.call({__MODULE__, node}, request, timeout)
  catch
    :exit, reason -> {:error, {:exit, reason}}
  end

  @doc "Calls the replicas on `nodes` at once; their replies (or errors) in order."
  @spec call_all([node()], term(), timeout()) :: [term()]
  def call_all(nodes, request, timeout) do
    requests = Enum.map(nodes, &:gen_server.send_request({__MODULE__, &1}, request))

    Enum.map(requests, fn id ->
      case :gen_server.receive_response(id, timeout) do
        {:reply, reply} -> reply
        :timeout -> {:error, :timeout}
        {:error, reason} -> {:error, reason}
      end
    end)
  end

  @doc false
  def init_it(starter, forget) do
    try do
      Process.register(self(), __MODULE__)
    rescue
      ArgumentError ->
        :proc_lib.init_ack(starter, {:error, {:already_started, Process.whereis(__MODULE__)}})
        exit(:normal)
    end

    {scope, group} = ShardedStore.group()
    cluster = ShardedStore.cluster()
    :ok = HRW.Cluster.subscribe(cluster, :snapshots)
    :ok = :pg.join(scope, group, self())
    Process.send_after(self(), :retry, @retry)
    now = now()
    machine = Machine.new({node(), self()}, forget, HRW.Cluster.snapshot(cluster), now)
    state = %{machine: machine, monitors: %{}, dropped: 0}
    state = state |> event({:tick, now}) |> peers()
    :proc_lib.init_ack(starter, {:ok, self()})
    loop(starter, state)
  end

  defp loop(parent, state) do
    receive do
      {:system, {pid, _tag} = from, request} when is_pid(pid) and request in @system ->
        :sys.handle_system_msg(request, from, parent, __MODULE__, [], state)

      {:"$gen_call", from, request} ->
        loop(parent, handle_call(request, from, state))

      {:"$gen_cast", request} ->
        loop(parent, handle_cast(request, state))

      message ->
        loop(parent, handle_info(message, state))
    end
  end

  @doc false
  def system_continue(parent, _debug, state), do: loop(parent, state)

  @doc false
  def system_terminate(reason, _parent, _debug, _state), do: exit(reason)

  @doc false
  def system_get_state(state), do: {:ok, state}

  @doc false
  def system_replace_state(fun, state) do
    state = fun.(state)
    {:ok, state, state}
  end

  @doc false
  def system_code_change(state, _module, _old, _extra), do: {:ok, state}

  # Every request is answered, whatever its terms: a key the library cannot hash,
  # a version that is not an integer or a request of unknown shape gets an error
  # reply, never an exit of the replica (which would lose what it holds). The
  # reply is sent here, not by gen_server: a forged call whose `from` is not a
  # caller's is dropped.
  defp handle_call(request, {pid, _tag} = from, state) when is_pid(pid) do
    {reply, state} = request(request, from, state)
    if reply != :later, do: reply(from, elem(reply, 1))
    state
  end

  defp handle_call(request, from, state), do: drop(state, {:"$gen_call", from, request})

  defp reply(from, reply) do
    GenServer.reply(from, reply)
  catch
    :error, _ -> :dropped
  end

  defp request({:write, key, version, value, fingerprint}, _from, state),
    do: call(state, {:write, key, version, value, fingerprint, published_fingerprint(), now()})

  defp request({:read, key}, _from, state), do: call(state, {:read, key, now()})
  defp request(:status, _from, state), do: call(state, :status)

  defp request({:leave, timeout}, from, state) when is_integer(timeout) and timeout >= 0,
    do: {:later, event(state, {:leave, from, timeout, now()})}

  defp request(_request, _from, state), do: {{:reply, {:error, :bad_request}}, state}

  defp call(state, event) do
    {machine, effects} = Machine.step(state.machine, event)
    state = carry_out(%{state | machine: machine}, effects)

    case for({:reply, reply} <- effects, do: reply) do
      [reply] -> {{:reply, reply}, state}
      [] -> {{:reply, {:error, :bad_request}}, state}
    end
  end

  defp published_fingerprint do
    HRW.Cluster.fingerprint(ShardedStore.cluster())
  rescue
    # No entry published under the name (its server stopped): no view to write in.
    ArgumentError -> nil
  end

  defp handle_cast({:handoff, from, ref, entries}, state),
    do: event(state, {:handoff, from, ref, entries})

  defp handle_cast(other, state), do: drop(state, {:"$gen_cast", other})

  # A snapshot message, whatever it carries, says only that the cluster published:
  # the published snapshot is read here (a forged message cannot name a view).
  # The :pg group is read first: the view follows it, so the replicas of the
  # members a view adds (a heal, a join) are seen with it, not a poll later.
  defp handle_info({:hrw_cluster_snapshot, _, _, _}, state), do: state |> peers() |> view()

  defp handle_info({:handoff_ack, ref, node}, state),
    do: event(state, {:handoff_ack, ref, node})

  defp handle_info({:sync, from, ref}, state), do: event(state, {:sync, from, ref, now()})

  defp handle_info({:sync_reply, from, ref, fingerprint, entries, gone}, state),
    do: event(state, {:sync_reply, from, ref, fingerprint, entries, gone, now()})

  # Only the monitors this replica set: a forged :DOWN names none of them.
  defp handle_info({:DOWN, ref, :process, _pid, _reason} = message, state) do
    case Map.pop(state.monitors, ref) do
      {nil, _} -> drop(state, message)
      {incarnation, monitors} -> event(%{state | monitors: monitors}, {:down, incarnation, now()})
    end
  end

  defp handle_info(:retry, state) do
    Process.send_after(self(), :retry, @retry)
    state |> view() |> peers() |> event({:tick, now()})
  end

  defp handle_info(other, state), do: drop(state, other)

  defp view(state) do
    event(state, {:view, HRW.Cluster.snapshot(ShardedStore.cluster()), now()})
  rescue
    # The cluster's entry is gone (its server stopped): nothing to follow.
    ArgumentError -> state
  end

  defp peers(state) do
    {scope, group} = ShardedStore.group()
    incarnations = for pid <- :pg.get_members(scope, group), do: {node(pid), pid}
    event(state, {:peers, incarnations, now()})
  end

  defp event(state, event) do
    {machine, effects} = Machine.step(state.machine, event)
    carry_out(%{state | machine: machine}, effects)
  end

  defp carry_out(state, effects) do
    Enum.reduce(effects, state, fn
      {:reply, _}, state ->
        state

      {:reply_to, from, reply}, state ->
        reply(from, reply)
        state

      {:send, {:node, node}, {:handoff, _, _, _} = message}, state ->
        GenServer.cast({__MODULE__, node}, message)
        state

      {:send, {:node, node}, message}, state ->
        send({__MODULE__, node}, message)
        state

      {:send, {_node, pid}, message}, state when is_pid(pid) ->
        send(pid, message)
        state

      {:send, _to, _message}, state ->
        state

      {:monitor, {_node, pid} = incarnation}, state when is_pid(pid) ->
        %{state | monitors: Map.put(state.monitors, Process.monitor(pid), incarnation)}

      {:monitor, _}, state ->
        state

      :leave_group, state ->
        {scope, group} = ShardedStore.group()
        _ = :pg.leave(scope, group, self())
        state

      {:dropped, event}, state ->
        drop(state, event)
    end)
  end

  # Logged once per incarnation, counted always.
  defp drop(%{dropped: 0} = state, message) do
    Logger.warning(
      "ShardedStore.Replica dropped a message of unknown shape: #{inspect(message, limit: 10)}"
    )

    %{state | dropped: 1}
  end

  defp drop(state, _message), do: %{state | dropped: state.dropped + 1}

  defp now, do: System.monotonic_time(:millisecond)
end
