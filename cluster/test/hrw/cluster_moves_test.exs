defmodule HRW.ClusterMovesTest do
  use ExUnit.Case, async: true

  @keys Enum.map(1..2_000, &"key-#{&1}")
  @nodes Enum.map(1..6, &:"n#{&1}@h")

  defp snapshot(structure, members) do
    %HRW.Cluster.Snapshot{
      name: :moves,
      generation: 1,
      fingerprint: HRW.Cluster.Fingerprint.of(members),
      members: members,
      quorum?: structure != nil,
      structure: structure
    }
  end

  test "count 1 lists the keys of HRW.moves/3; count 2 also the second owners' changes" do
    for build <- [&HRW.build/1, &HRW.Ring.new/1] do
      old = build.(Enum.take(@nodes, 5))
      new = build.(@nodes)
      single = HRW.Cluster.replica_moves(@keys, old, new)
      assert Enum.map(single, &elem(&1, 0)) == Enum.map(HRW.moves(@keys, old, new), &elem(&1, 0))

      double = HRW.Cluster.replica_moves(@keys, old, new, 2)
      assert MapSet.subset?(MapSet.new(single, &elem(&1, 0)), MapSet.new(double, &elem(&1, 0)))

      for key <- @keys do
        before = HRW.owners(key, old, 2)
        later = HRW.owners(key, new, 2)
        assert before != later == List.keymember?(double, key, 0)
      end

      # Adding a node moves keys only to it.
      assert Enum.all?(double, fn {_key, _old, owners} -> :n6@h in owners end)
    end
  end

  test "snapshots, views without quorum or members, duplicates and bad counts" do
    structure = HRW.build(@nodes)
    with_quorum = snapshot(structure, @nodes)
    without = snapshot(nil, Enum.take(@nodes, 2))

    lost = HRW.Cluster.replica_moves(@keys, with_quorum, without, 2)
    assert length(lost) == length(@keys)

    assert Enum.all?(lost, fn {key, old, new} ->
             old == HRW.owners(key, structure, 2) and new == []
           end)

    regained = HRW.Cluster.replica_moves(["a", "a"], nil, with_quorum, 2)
    assert regained == [{"a", [], HRW.owners("a", structure, 2)}]
    assert HRW.Cluster.replica_moves(@keys, with_quorum, structure, 2) == []
    assert HRW.Cluster.replica_moves(@keys, nil, nil) == []

    assert_raise ArgumentError, ~r/count/, fn ->
      HRW.Cluster.replica_moves(@keys, nil, structure, -1)
    end

    assert_raise ArgumentError, fn ->
      HRW.Cluster.replica_moves(@keys, nil, :not_a_structure, 1)
    end
  end
end
