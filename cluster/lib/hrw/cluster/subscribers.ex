defmodule HRW.Cluster.Subscribers do
  @moduledoc false
  # The subscribers of an `HRW.Cluster` server (`subscribe/1,2`, `unsubscribe/1`):
  # a map from each subscriber's monitor to its pid and the format it asked for,
  # and the messages a published change sends them.

  @typedoc "Monitor reference => {pid, :structures | :snapshots}."
  @type t :: %{optional(reference()) => {pid(), :structures | :snapshots}}

  @doc "Adds `pid` (monitored once), or changes its format."
  @spec subscribe(t(), pid(), :structures | :snapshots) :: t()
  def subscribe(subscribers, pid, format) do
    case Enum.find(subscribers, fn {_ref, {p, _format}} -> p == pid end) do
      {ref, _} -> Map.put(subscribers, ref, {pid, format})
      nil -> Map.put(subscribers, Process.monitor(pid), {pid, format})
    end
  end

  @doc "Removes `pid` and its monitor (nothing when it is not subscribed)."
  @spec unsubscribe(t(), pid()) :: t()
  def unsubscribe(subscribers, pid) do
    {gone, kept} = Enum.split_with(subscribers, fn {_ref, {p, _}} -> p == pid end)
    Enum.each(gone, fn {ref, _} -> Process.demonitor(ref, [:flush]) end)
    Map.new(kept)
  end

  @doc """
  Tells every subscriber of the cluster `name` about a change from `old` to `new`,
  snapshots with their structures (`old` is `nil` before the first generation).
  """
  @spec notify(t(), atom(), HRW.Cluster.Snapshot.t() | nil, HRW.Cluster.Snapshot.t()) :: :ok
  def notify(subscribers, _name, _old, _new) when subscribers == %{}, do: :ok

  def notify(subscribers, name, old, new) do
    old = old || empty(name)
    structures = {:hrw_cluster_changed, name, old.structure, new.structure}
    snapshots = {:hrw_cluster_snapshot, name, old, new}

    Enum.each(subscribers, fn
      {_ref, {pid, :structures}} -> send(pid, structures)
      {_ref, {pid, :snapshots}} -> send(pid, snapshots)
    end)
  end

  # What a subscriber sees before the first generation.
  defp empty(name) do
    %HRW.Cluster.Snapshot{
      name: name,
      generation: 0,
      fingerprint: HRW.Cluster.Fingerprint.of([]),
      members: [],
      quorum?: false,
      structure: nil
    }
  end
end
