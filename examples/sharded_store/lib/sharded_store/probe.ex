defmodule ShardedStore.Probe do
  @moduledoc """
  Measures how long this node's cluster still names a node after its nodedown
  (from `:net_kernel.monitor_nodes/1`): `:visible`, until `HRW.Cluster.snapshot/1`
  no longer lists it (a short-lived process reads it in a loop, yielding between
  reads, for at most 10 s); `:notified`, until the snapshot message without it
  arrives. A process of its own, idle otherwise, so the replica's work does not
  count.
  """

  use GenServer

  def start, do: GenServer.start(__MODULE__, [], name: __MODULE__)

  @doc "The delays measured so far: `[{:visible | :notified | :pg, node, microseconds}]` (`:pg`: until the `:pg` group dropped it)."
  def delays, do: GenServer.call(__MODULE__, :delays, 30_000)

  @impl true
  def init([]) do
    :ok = HRW.Cluster.subscribe(ShardedStore.cluster(), :snapshots)
    :ok = :net_kernel.monitor_nodes(true)
    {:ok, %{downs: %{}, delays: []}}
  end

  @impl true
  def handle_call(:delays, _from, state), do: {:reply, state.delays, state}

  @impl true
  def handle_info({:nodedown, node}, state) do
    at = System.monotonic_time(:microsecond)
    probe = self()
    spawn(fn -> send(probe, {:visible, node, watch(node, at)}) end)
    {:noreply, put_in(state.downs[node], at)}
  end

  def handle_info({:visible, node, {us, pg_us}}, state) do
    delays = [{:visible, node, us}, {:pg, node, pg_us} | state.delays]
    {:noreply, %{state | delays: delays}}
  end

  def handle_info({:hrw_cluster_snapshot, _name, old, new}, state) do
    now = System.monotonic_time(:microsecond)
    gone = old.members -- new.members
    delays = for node <- gone, at = state.downs[node], do: {:notified, node, now - at}
    {:noreply, %{state | delays: delays ++ state.delays, downs: Map.drop(state.downs, gone)}}
  end

  def handle_info(_other, state), do: {:noreply, state}

  # Polls every millisecond (a loop that yielded instead would take the cores
  # from the processes it measures): when the cluster's snapshot drops the node,
  # and when the :pg group does (the cluster's source).
  defp watch(node, at, pg \\ nil) do
    now = System.monotonic_time(:microsecond)
    {scope, group} = ShardedStore.group()
    pg = pg || if node not in Enum.map(:pg.get_members(scope, group), &node/1), do: now - at

    cond do
      node not in HRW.Cluster.snapshot(ShardedStore.cluster()).members ->
        {now - at, pg || now - at}

      now - at > 10_000_000 ->
        nil

      true ->
        Process.sleep(1) && watch(node, at, pg)
    end
  end
end
