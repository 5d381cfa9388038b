defmodule HRW.ClusterTakeoverTest do
  # A server that takes over a name from one that was killed (its entry left
  # behind) publishes a snapshot that reflects its own options as soon as start/1
  # returns, for every option that shapes one: the quorum, the depth,
  # the filters, the weights, the overrides and the structure's kind. One node,
  # no peers: the members are [node()] throughout.
  use ExUnit.Case, async: false

  @name :hrw_takeover

  # Starts a server with `first`, kills it (its entry stays), starts one with
  # `second` and returns the snapshot right after the second start returned.
  defp take_over(first, second) do
    {:ok, pid} = HRW.Cluster.start([name: @name] ++ first)
    ref = Process.monitor(pid)
    Process.exit(pid, :kill)
    assert_receive {:DOWN, ^ref, :process, ^pid, :killed}
    # The killed server's entry is still read.
    _ = HRW.Cluster.snapshot(@name)
    {:ok, pid} = HRW.Cluster.start([name: @name] ++ second)
    on_exit(fn -> if Process.alive?(pid), do: GenServer.stop(pid) end)
    HRW.Cluster.snapshot(@name)
  end

  test "a larger quorum takes the structure away at once; a smaller one gives it back" do
    snapshot = take_over([], quorum: 3)
    refute snapshot.quorum?
    assert snapshot.structure == nil
    assert HRW.Cluster.owner(@name, "k") == nil
    :ok = GenServer.stop(HRW.Cluster.Server.pid!(@name))

    snapshot = take_over([quorum: 3], quorum: 1)
    assert snapshot.quorum?
    assert HRW.Cluster.owner(@name, "k") == node()
  end

  test "the depth: the history is resized to the new server's" do
    take_over([depth: 1], depth: 3)
    assert HRW.Cluster.structure(@name, back: 2) == nil
    assert_raise ArgumentError, ~r/depth: 3/, fn -> HRW.Cluster.owner(@name, "k", back: 3) end
  end

  test "the filters: the members are the new server's" do
    snapshot = take_over([], deny: fn _node -> true end)
    assert snapshot.members == []
    assert HRW.Cluster.owner(@name, "k") == nil
  end

  test "the weights: the fingerprint and the structure are the weighted ones" do
    before = HRW.Cluster.Fingerprint.of([node()])
    snapshot = take_over([], weight_fn: fn _node -> 4 end)
    assert snapshot.fingerprint == HRW.Cluster.Fingerprint.of([{node(), 4}])
    refute snapshot.fingerprint == before

    assert %HRW.Skeleton{weights: {4}, scorer: %HRW.Weighted{}} =
             structure = HRW.Cluster.structure(@name)

    assert HRW.Skeleton.nodes(structure) == [{node(), 4}]
  end

  test "the overrides: the new server's option holds" do
    take_over([overrides: %{"k" => :pinned}], overrides: %{"k" => :other})
    assert HRW.Cluster.owner(@name, "k") == :other
    :ok = GenServer.stop(HRW.Cluster.Server.pid!(@name))

    take_over([overrides: %{"k" => :pinned}], [])
    assert HRW.Cluster.owner(@name, "k") == node()
  end

  test "the kind: a ring where a skeleton was" do
    take_over([], structure: :ring)
    assert %HRW.Ring{} = HRW.Cluster.structure(@name)
    :ok = GenServer.stop(HRW.Cluster.Server.pid!(@name))

    take_over([structure: :ring], [])
    assert %HRW.Skeleton{} = HRW.Cluster.structure(@name)
  end
end
