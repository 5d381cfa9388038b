defmodule ShardedStore.Replica do
  @moduledoc """
  One node's replica: the entries it holds (`key => {version, value}`), the last
  cluster snapshot it has processed, the pushes of its handoff still to do, and
  the members that left its view recently (5 s by default), with the last structure
  that held them (so a read or a write can tell a key whose two owners both left).
  """

  use GenServer

  alias ShardedStore.Order

  @retry 200
  @resend 5_000

  @doc """
  Starts this node's replica. `forget`: how many ms a departed member counts as
  possibly holding writes nobody else has (a dead node never comes back, so a key
  whose two owners left becomes readable again, with what the others hold).
  """
  def start(forget), do: GenServer.start(__MODULE__, forget, name: __MODULE__)

  @doc "Calls the replica on `node`; any failure is `{:error, reason}`."
  def call(node, request, timeout) do
    GenServer.call({__MODULE__, node}, request, timeout)
  catch
    :exit, reason -> {:error, {:exit, reason}}
  end

  @doc "Calls the replicas on `nodes` at once; their replies (or errors) in order."
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

  @impl true
  def init(forget) do
    {scope, group} = ShardedStore.group()
    cluster = ShardedStore.cluster()
    :ok = HRW.Cluster.subscribe(cluster, :snapshots)
    :ok = :pg.join(scope, group, self())
    Process.send_after(self(), :retry, @retry)

    {:ok,
     %{
       data: %{},
       snapshot: HRW.Cluster.snapshot(cluster),
       # key => [target node]: pushes still to make.
       pending: %{},
       # target => {ref, keys, sent at}: pushes sent, not yet acknowledged.
       inflight: %{},
       leaving: nil,
       forget: forget,
       # node => {last structure with quorum that held it, departure in ms}.
       gone: %{},
       last_structure: nil
     }}
  end

  # Every request is answered, whatever its terms: a key the library cannot hash,
  # a version that is not an integer or a request of unknown shape gets an error
  # reply, never an exit of the replica (which would lose what it holds).
  @impl true
  def handle_call({:write, key, version, value, fingerprint}, _from, state)
      when is_integer(version) do
    case writable(state, key, fingerprint) do
      :ok ->
        case take(Map.get(state.data, key), {version, value}) do
          :take -> {:reply, :ok, %{state | data: Map.put(state.data, key, {version, value})}}
          :held -> {:reply, :ok, state}
          refusal -> {:reply, {:error, refusal}, state}
        end

      refusal ->
        {:reply, {:error, refusal}, state}
    end
  end

  # With the snapshot this replica has processed, so the reader can tell whether
  # every member answered from the same view.
  def handle_call({:read, key}, _from, state) do
    if key?(key) do
      entry = Map.get(state.data, key)
      {:reply, {:entry, state.snapshot.fingerprint, entry, cut_off?(state, key)}, state}
    else
      {:reply, {:error, :bad_key}, state}
    end
  end

  def handle_call(:status, _from, state) do
    {:reply, {state.snapshot.fingerprint, map_size(state.pending), map_size(state.data)}, state}
  end

  def handle_call({:leave, timeout}, from, %{leaving: nil} = state)
      when is_integer(timeout) and timeout >= 0 do
    {scope, group} = ShardedStore.group()
    _ = :pg.leave(scope, group, self())
    deadline = System.monotonic_time(:millisecond) + timeout
    {:noreply, %{state | leaving: {from, deadline}}}
  end

  def handle_call({:leave, _timeout}, _from, %{leaving: :left} = state),
    do: {:reply, :ok, state}

  def handle_call({:leave, _timeout}, _from, %{leaving: {_, _}} = state),
    do: {:reply, {:error, :leaving}, state}

  def handle_call(_request, _from, state), do: {:reply, {:error, :bad_request}, state}

  # A write is taken when the snapshot processed (so the handoff of any change
  # after it carries this write) and the one published now (a nodedown is
  # published before the replica hears of it) are both the writer's, this node
  # is an owner there, and the key's two owners did not both leave within
  # `forget` (they may hold a higher version: the rule reads follow).
  defp writable(state, key, fingerprint) do
    snapshot = state.snapshot

    cond do
      state.leaving !== nil or not snapshot.quorum? or snapshot.fingerprint !== fingerprint or
          published_fingerprint() !== fingerprint ->
        :wrong_view

      not key?(key) ->
        :bad_key

      node() not in owners(snapshot, key) ->
        :wrong_view

      cut_off?(state, key) ->
        :unavailable

      true ->
        :ok
    end
  end

  defp published_fingerprint do
    HRW.Cluster.fingerprint(ShardedStore.cluster())
  rescue
    # No entry published under the name (its server stopped): no view to write in.
    ArgumentError -> nil
  end

  # The library's rule for keys: a term it can hash.
  defp key?(key) do
    _ = HRW.term_id(key)
    true
  rescue
    ArgumentError -> false
  end

  # Entries sent by another replica's handoff: any malformed part is dropped.
  @impl true
  def handle_cast({:handoff, from, ref, entries}, state) when is_pid(from) and is_map(entries) do
    data =
      Enum.reduce(entries, state.data, fn
        {key, {version, _value} = entry}, data when is_integer(version) ->
          if key?(key), do: merge(data, key, entry), else: data

        _, data ->
          data
      end)

    send(from, {:handoff_ack, ref, node()})
    {:noreply, %{state | data: data}}
  end

  def handle_cast(_request, state), do: {:noreply, state}

  @impl true
  def handle_info({:hrw_cluster_snapshot, _name, _old, new}, state) do
    # Handoff from the snapshot this replica last processed (the one its writes
    # were taken under) to the new one.
    old = state.snapshot
    # Pushes in flight were addressed under the old view (some perhaps across a
    # link that was down): the pending keys are sent again under the new one.
    state = departures(%{state | snapshot: new, inflight: %{}}, old, new)
    pending = handoff(state.data, old, new, state.pending)
    {:noreply, push(%{state | pending: pending})}
  end

  def handle_info({:handoff_ack, ref, target}, state) do
    case state.inflight do
      %{^target => {^ref, keys, _at}} ->
        pending =
          Enum.reduce(keys, state.pending, fn key, pending ->
            case pending do
              %{^key => targets} ->
                left = List.delete(targets, target)
                if left == [], do: Map.delete(pending, key), else: Map.put(pending, key, left)

              _ ->
                pending
            end
          end)

        {:noreply,
         finish_leave(%{state | pending: pending, inflight: Map.delete(state.inflight, target)})}

      _ ->
        {:noreply, state}
    end
  end

  def handle_info(:retry, state) do
    Process.send_after(self(), :retry, @retry)
    {:noreply, push(state)}
  end

  def handle_info(_other, state), do: {:noreply, state}

  defp departures(state, old, new) do
    now = System.monotonic_time(:millisecond)
    structure = old.structure || state.last_structure
    left = if structure == nil, do: [], else: old.members -- new.members

    gone =
      state.gone
      |> Map.drop(new.members)
      |> Map.reject(fn {_node, {_structure, at}} -> now - at > state.forget end)
      |> Map.merge(Map.new(left, &{&1, {structure, now}}))

    %{state | gone: gone, last_structure: new.structure || structure}
  end

  # Both owners of `key`, in the last view that held one of the departed members,
  # departed within `forget` ms: they may hold writes no member has.
  defp cut_off?(%{gone: gone, forget: forget}, key) do
    now = System.monotonic_time(:millisecond)
    recent = for {node, {_, at}} <- gone, now - at <= forget, into: MapSet.new(), do: node

    Enum.any?(gone, fn {node, {structure, _at}} ->
      node in recent and Enum.all?(owners(%{structure: structure}, key), &(&1 in recent))
    end)
  end

  # What a write does to the entry held: entries are ordered by version, then by
  # value (`ShardedStore.Order`: term order, where 1 and 1.0 differ), the same on
  # every replica, so two values written with one version end the same everywhere
  # whatever the order they arrive in. Versions are integers (the only ones taken).
  defp take(nil, _entry), do: :take
  defp take(held, held), do: :held
  defp take({held, _}, {version, _}) when version < held, do: {:stale, held}

  defp take({version, held}, {version, value}) do
    if Order.compare(held, value) == :gt, do: {:conflict, held}, else: :take
  end

  defp take(_held, _entry), do: :take

  defp merge(data, key, entry) do
    case data do
      %{^key => held} ->
        if Order.compare(entry, held) == :gt, do: Map.put(data, key, entry), else: data

      _ ->
        Map.put(data, key, entry)
    end
  end

  # The keys whose two owners changed between the two snapshots
  # (`HRW.Cluster.replica_moves/4`), with the new owners that were not owners before (they
  # may not hold the key).
  defp handoff(data, old, new, pending) do
    data
    |> Map.keys()
    |> HRW.Cluster.replica_moves(old, new, 2)
    |> Enum.reduce(pending, fn {key, before, later}, pending ->
      targets = (later -- before) -- [node()]

      if targets == [],
        do: pending,
        else: Map.update(pending, key, targets, &Enum.uniq(&1 ++ targets))
    end)
  end

  # The key's two owners in a snapshot's structure; none without one, or for a
  # key the library refuses (the callers check keys first; this never raises).
  defp owners(%{structure: nil}, _key), do: []

  defp owners(%{structure: structure}, key) do
    HRW.owners(key, structure, 2)
  rescue
    ArgumentError -> []
  end

  # Pushes the pending keys, one message per target, without waiting (two replicas
  # may push to each other); a target's keys stay pending until it acknowledges
  # them, are sent again when it has not within @resend ms, and are dropped once it
  # is no longer their owner.
  defp push(state) do
    pending =
      for {key, targets} <- state.pending,
          left = Enum.filter(targets, &(&1 in owners(state.snapshot, key))),
          left != [],
          into: %{},
          do: {key, left}

    now = System.monotonic_time(:millisecond)

    inflight =
      state.inflight
      |> Enum.reject(fn {_target, {_ref, _keys, at}} -> now - at > @resend end)
      |> Map.new()

    by_target =
      for {key, targets} <- pending,
          target <- targets,
          not Map.has_key?(inflight, target),
          reduce: %{} do
        acc -> Map.update(acc, target, [key], &[key | &1])
      end

    inflight =
      Enum.reduce(by_target, inflight, fn {target, keys}, inflight ->
        ref = make_ref()
        GenServer.cast({__MODULE__, target}, {:handoff, self(), ref, Map.take(state.data, keys)})
        Map.put(inflight, target, {ref, keys, now})
      end)

    finish_leave(%{state | pending: pending, inflight: inflight})
  end

  defp finish_leave(%{leaving: leaving} = state) when leaving in [nil, :left], do: state

  defp finish_leave(%{leaving: {from, deadline}} = state) do
    cond do
      state.pending == %{} and node() not in state.snapshot.members ->
        GenServer.reply(from, :ok)
        %{state | leaving: :left}

      System.monotonic_time(:millisecond) > deadline ->
        GenServer.reply(from, {:error, :timeout})
        %{state | leaving: :left}

      true ->
        state
    end
  end
end
