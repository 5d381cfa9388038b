defmodule HRW.Cluster.Moves do
  @moduledoc false
  # `HRW.Cluster.replica_moves/4`: what a store must move between two views. A view
  # is a snapshot, a structure, or `nil`; a view without a structure (no member, or no
  # quorum) owns nothing, so every key moves to or from it.

  alias HRW.Cluster.Check

  @doc "`{key, owners_before, owners_later}` for each distinct key whose `count` best owners differ."
  @spec between([term()], term(), term(), non_neg_integer()) :: [{term(), [node()], [node()]}]
  def between(keys, before, later, count) do
    before = structure(before)
    later = structure(later)

    keys
    |> Enum.uniq()
    |> Enum.flat_map(fn key ->
      owners_before = owners(key, before, count)
      owners_later = owners(key, later, count)
      if owners_before == owners_later, do: [], else: [{key, owners_before, owners_later}]
    end)
  end

  # Checked whether or not there are keys to look up.
  defp structure(%HRW.Cluster.Snapshot{structure: structure}), do: structure
  defp structure(nil), do: nil
  defp structure(structure), do: Check.target!(structure)

  defp owners(_key, nil, _count), do: []
  defp owners(key, structure, count), do: HRW.owners(key, structure, count)
end
