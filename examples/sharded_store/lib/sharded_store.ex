defmodule ShardedStore do
  @moduledoc """
  A replicated key-value store sharded with `HRW.Cluster`: every key lives on its
  two owners, `HRW.Cluster.owners(cluster, key, 2)`.

    * **Writes** (`put/3`) carry a version chosen by the writer (higher wins). The
      node that takes the write sends it to both owners of its snapshot, with the
      snapshot's fingerprint; a replica takes it only when it has processed the same
      member set (same fingerprint), its cluster still publishes it, and it is an
      owner there. The write is acknowledged once both replicas hold it, if the
      writing node's view has not changed meanwhile.
    * **Handoff**: each replica subscribes to the cluster's snapshots. On each
      change it lists the keys it holds whose two owners changed
      (`HRW.Cluster.moves/4`, which also takes views without quorum) and pushes
      them to their new owners, retrying until they hold them or stop being owners.
    * **Reads** (`get/1`) ask the owners in order and fall back along them, then
      along the owners of the previous generation (`HRW.Cluster.stable_owners/3`).
    * **Quorum**: the cluster runs with `quorum: {:majority, expected}`: a side of a
      partition without a majority owns no key, so it acknowledges no write.

  Start it on each node with `start/1`; members are the nodes running a replica
  (a `:pg` group).
  """

  alias ShardedStore.Replica

  @cluster :sharded_store
  @scope :sharded_store
  @group :replicas

  @doc "The name of the `HRW.Cluster` the store routes with."
  def cluster, do: @cluster

  @doc "The `:pg` scope and group whose members are the replicas."
  def group, do: {@scope, @group}

  @doc """
  Starts the `:pg` scope, the cluster and this node's replica (not linked to the
  caller). `opts`: `expected:` the number of nodes for the majority (default 5).
  """
  def start(opts \\ []) do
    expected = Keyword.get(opts, :expected, 5)

    with {:ok, _} <- ok(:pg.start(@scope)),
         {:ok, _} <-
           HRW.Cluster.start(
             name: @cluster,
             source: {:pg, @scope, @group},
             debounce: Keyword.get(opts, :debounce, 50),
             depth: 2,
             quorum: {:majority, expected}
           ) do
      {:ok, _} = ShardedStore.Probe.start()
      Replica.start()
    end
  end

  defp ok({:error, {:already_started, pid}}), do: {:ok, pid}
  defp ok(other), do: other

  @doc """
  Writes `value` under `key` with `version`. `:ok` once both owners hold it, else
  `{:error, reason}` (no quorum, a view that changed, a replica that did not
  answer): the caller retries, with the same version.
  """
  def put(key, version, value) do
    snapshot = HRW.Cluster.snapshot(@cluster)

    cond do
      not snapshot.quorum? ->
        {:error, :no_quorum}

      true ->
        case HRW.owners(key, snapshot.structure, 2) do
          [_, _] = owners ->
            request = {:write, key, version, value, snapshot.fingerprint}
            replies = Replica.call_all(owners, request, 5_000)

            # Acknowledged only if this node's view did not change meanwhile: a
            # write that straddles a change (a cut link, a node down) may be kept,
            # but is not promised.
            cond do
              not Enum.all?(replies, &(&1 == :ok)) -> {:error, {:not_acknowledged, replies}}
              HRW.Cluster.fingerprint(@cluster) != snapshot.fingerprint -> {:error, :view_changed}
              true -> :ok
            end

          _ ->
            {:error, :too_few_replicas}
        end
    end
  end

  @doc """
  Reads `key`: `{:ok, {version, value}}` from the first owner that holds it
  (falling back along the owners, then those of the previous generation), or
  `:not_found`.
  """
  def get(key) do
    @cluster
    |> HRW.Cluster.stable_owners(key, 2)
    |> Enum.find_value(:not_found, fn owner ->
      case Replica.call(owner, {:read, key}, 5_000) do
        {:ok, entry} -> {:ok, entry}
        _ -> nil
      end
    end)
  end

  @doc "`get/1` of each key, as a map key => result."
  def get_many(keys), do: Map.new(keys, &{&1, get(&1)})

  @doc "This node's replica status: `{fingerprint, pending pushes, keys held}`."
  def status, do: Replica.call(node(), :status, 30_000)

  @doc """
  Leaves the store: the replica leaves the group (the others take this node out at
  once), hands every key it holds to the remaining owners and returns once they
  all hold them (or `timeout` ms passed).
  """
  def leave(timeout \\ 60_000), do: Replica.call(node(), {:leave, timeout}, timeout + 5_000)

  @doc "What `ShardedStore.Probe` measured here: `[{node, microseconds}]` from a nodedown to the snapshot without that node."
  def down_delays, do: ShardedStore.Probe.delays()
end
