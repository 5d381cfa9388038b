defmodule ShardedStore.Probe do
  @moduledoc """
  Measures how long this node's cluster still names a node after its nodedown:
  the time from the nodedown (from `:net_kernel.monitor_nodes/1`) to the first
  snapshot without the node (the cluster server publishes before it sends the
  snapshot, so this is an upper bound). A process of its own, idle otherwise, so
  the replica's work does not count.
  """

  use GenServer

  def start, do: GenServer.start(__MODULE__, [], name: __MODULE__)

  @doc "The delays measured so far: `[{node, microseconds}]`."
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
    {:noreply, put_in(state.downs[node], System.monotonic_time(:microsecond))}
  end

  def handle_info({:hrw_cluster_snapshot, _name, old, new}, state) do
    now = System.monotonic_time(:microsecond)
    gone = old.members -- new.members
    delays = for node <- gone, at = state.downs[node], do: {node, now - at}
    {:noreply, %{state | delays: delays ++ state.delays, downs: Map.drop(state.downs, gone)}}
  end

  def handle_info(_other, state), do: {:noreply, state}
end
