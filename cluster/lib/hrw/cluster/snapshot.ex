defmodule HRW.Cluster.Snapshot do
  @moduledoc """
  One consistent view of an `HRW.Cluster`, from one read of its entry
  (`HRW.Cluster.snapshot/1`): everything in it belongs to the same generation.

    * `:name` - the cluster's name.
    * `:generation` - the local generation number (see "History" in docs/CLUSTER.md).
    * `:fingerprint` - the member set's fingerprint (`HRW.Cluster.Fingerprint`): equal
      on every node whose view holds the same members, whatever the generations.
    * `:members` - the members this node sees, sorted bare nodes (also without
      quorum).
    * `:quorum?` - whether `:members` reach the `:quorum` option (always true
      without one); with a `:lease`, false from the moment the lease's quorum
      lapses by this node's clock, whether or not its server has published that
      yet (see "Silent partitions and the lease" in docs/CLUSTER.md).
    * `:structure` - what lookups answer from: `nil` while there is no member or no
      quorum, so `HRW.owner(key, snapshot.structure)` is only called on a non-`nil`
      one.
  """

  @enforce_keys [:name, :generation, :fingerprint, :members, :quorum?, :structure]
  defstruct @enforce_keys

  @type t :: %__MODULE__{
          name: atom(),
          generation: non_neg_integer(),
          fingerprint: non_neg_integer(),
          members: [node()],
          quorum?: boolean(),
          structure: HRW.Cluster.structure()
        }

  defimpl Inspect do
    def inspect(snapshot, _opts) do
      "#HRW.Cluster.Snapshot<#{inspect(snapshot.name)} generation #{snapshot.generation}, " <>
        "fingerprint #{HRW.Cluster.Fingerprint.hex(snapshot.fingerprint)}, " <>
        "#{length(snapshot.members)} members#{if snapshot.quorum?, do: "", else: ", no quorum"}>"
    end
  end
end
