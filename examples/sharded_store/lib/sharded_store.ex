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
  # Three generations: a cut made one link at a time (or two kills) can take the
  # view through two changes, and the reads look back to the view before both.
  @depth 3

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
             depth: @depth,
             quorum: {:majority, expected}
           ) do
      {:ok, _} = ShardedStore.Probe.start()
      Replica.start()
    end
  end

  defp ok({:error, {:already_started, pid}}), do: {:ok, pid}
  defp ok(other), do: other

  @doc """
  Writes `value` under `key` with `version` (an integer), and says what happened:

    * `:ok`: both owners hold this version and value (or a write that wins over
      it, arrived since), and the writing node's view did not change meanwhile.
      Writing the same version and value again is `:ok` (a retry).
    * `{:error, {:stale, stored_version}}`: an owner holds a higher version.
    * `{:error, {:conflict, stored_value}}`: an owner holds this version with a
      value that wins the tie-break (see the module doc).
    * `{:error, reason}` otherwise (`:no_quorum`, `:view_changed`,
      `{:not_acknowledged, replies}`, `:too_few_replicas`): not acknowledged, so
      the caller retries with the same version.

  An error does not mean that no replica took the write: one owner may hold it
  (the other refused, or the view changed). Nothing is promised for it.
  """
  @spec put(term(), integer(), term()) :: :ok | {:error, term()}
  def put(key, version, value) when is_integer(version) do
    snapshot = HRW.Cluster.snapshot(@cluster)

    cond do
      not snapshot.quorum? ->
        {:error, :no_quorum}

      true ->
        case HRW.owners(key, snapshot.structure, 2) do
          [_, _] = owners ->
            request = {:write, key, version, value, snapshot.fingerprint}
            outcome(Replica.call_all(owners, request, 5_000), snapshot.fingerprint)

          _ ->
            {:error, :too_few_replicas}
        end
    end
  end

  # A refusal on the merits (stale, conflict) is reported even when the other
  # owner took the write: retrying would not change it.
  defp outcome(replies, fingerprint) do
    stale = for {:error, {:stale, version}} <- replies, do: version
    conflicts = for {:error, {:conflict, value}} <- replies, do: value

    cond do
      stale != [] -> {:error, {:stale, Enum.max(stale)}}
      conflicts != [] -> {:error, {:conflict, Enum.max(conflicts)}}
      not Enum.all?(replies, &(&1 == :ok)) -> {:error, {:not_acknowledged, replies}}
      # A write that straddles a change of this node's view (a cut link, a node
      # down) may be kept, but is not promised.
      HRW.Cluster.fingerprint(@cluster) != fingerprint -> {:error, :view_changed}
      true -> :ok
    end
  end

  @doc """
  Reads `key`: `{:ok, {version, value}}`, the highest entry held by any member
  of this node's view, or `:not_found` when every member answered and none holds
  it. `{:error, :no_quorum}` on a side without quorum, and `{:error,
  :unavailable}` when this node cannot know: a member did not answer, a member
  has processed another view than this node's (a change is in progress), or
  neither owner of the key in the previous generation is still a member (both
  left at once, for example cut off by a partition: they may hold writes the
  others never saw).

  Asks every member, not only the owners: after a partition heals, the owners
  (the nodes of the minority side) have not yet received what the majority side
  took meanwhile, and their own history holds no view of that side.
  """
  @spec get(term()) :: {:ok, {integer(), term()}} | :not_found | {:error, term()}
  def get(key) do
    snapshot = HRW.Cluster.snapshot(@cluster)

    cond do
      not snapshot.quorum? ->
        {:error, :no_quorum}

      Enum.any?(1..(@depth - 1), &owners_gone?(key, &1, snapshot.members)) ->
        {:error, :unavailable}

      true ->
        snapshot.members
        |> Replica.call_all({:read, key}, 5_000)
        |> read_outcome(snapshot.fingerprint)
    end
  end

  # Neither owner of `key` `back` generations ago is a member now.
  defp owners_gone?(key, back, members) do
    case HRW.Cluster.owners(@cluster, key, 2, back: back) do
      [] -> false
      owners -> Enum.all?(owners, &(&1 not in members))
    end
  end

  defp read_outcome(replies, fingerprint) do
    if Enum.all?(replies, &match?({:entry, ^fingerprint, _}, &1)) do
      # Entries compare as the replicas merge them: version first, then value.
      case for({:entry, _, entry} <- replies, entry != nil, do: entry) do
        [] -> :not_found
        entries -> {:ok, Enum.max(entries)}
      end
    else
      {:error, :unavailable}
    end
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
