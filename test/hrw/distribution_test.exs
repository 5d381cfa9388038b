defmodule HRW.DistributionTest do
  # Starts Erlang distribution and a peer node on loopback: not async.
  use ExUnit.Case, async: false

  import HRW.TestStats

  setup_all do
    HRW.TestPeers.distributed!()
    {peer, node} = HRW.TestPeers.start_peer(:hrw_peer, :main)
    {:ok, peer: peer, node: node}
  end

  test "rings and skeletons sent to another node answer the same owners there", %{node: node} do
    nodes = node_names(400)
    weighted = Enum.map(nodes, &{&1, :erlang.phash2(&1, 5) + 1})

    structures = [
      HRW.Ring.new(nodes),
      HRW.build(nodes),
      HRW.Ring.new(weighted, scorer: %HRW.Weighted{}),
      HRW.build(weighted, scorer: %HRW.Weighted{})
    ]

    keys = Enum.map(1..200, &"key-#{&1}")

    for structure <- structures do
      # (Test-module closures do not exist on the peer: call HRW remotely per key.)
      local = Enum.map(keys, &HRW.owner(&1, structure))
      remote = Enum.map(keys, &:erpc.call(node, HRW, :owner, [&1, structure]))
      assert remote == local, "#{inspect(structure)} differs on the peer"
      # And back again: the peer's rebuilt copy works here too.
      assert :erpc.call(node, HRW, :owners, ["key-1", structure, 3]) ==
               HRW.owners("key-1", structure, 3)
    end
  end

  test "plain lists give the same owners on both nodes", %{node: node} do
    nodes = [:a, {:b, 1}, "c", 4.5, %{d: [1, 2]}]

    for i <- 1..100 do
      key = {:user, i, "x"}
      assert :erpc.call(node, HRW, :owner, [key, nodes]) == HRW.owner(key, nodes)
    end
  end
end
