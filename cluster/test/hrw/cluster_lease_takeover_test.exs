defmodule HRW.ClusterLeaseTakeoverTest do
  # With a lease, the keys of a member whose departure a server has seen move only
  # once that member's own quorum must have lapsed. 3 peers behind the relay
  # (HRW.SilentPartition), net_ticktime far above every wait, so no :nodedown
  # fires on its own: the majority sees the departure at once (it disconnects the
  # member), while the member hears nothing at all (its links are cut, its
  # connections stay open). Times are compared on the wall clock every VM of this
  # host shares; no duration is asserted.
  use ExUnit.Case, async: false

  alias HRW.SilentPartition, as: SP

  defp lease, do: HRW.TestTimeouts.ms(300)
  defp eventually(check, what), do: SP.await(check, HRW.TestTimeouts.ms(30_000), what)

  setup do
    ticktime = div(HRW.TestTimeouts.ms(120_000), 1000)
    harness = SP.start(3, prefix: :hrw_hold, net_ticktime: ticktime)
    on_exit(fn -> SP.stop(harness) end)

    for node <- harness.nodes do
      opts = [name: :held, quorum: {:majority, 3}, lease: lease()]
      {:ok, _} = SP.call(harness, node, HRW.Cluster, :start, [opts])
    end

    for node <- harness.nodes do
      eventually(fn -> quorum?(harness, node) end, "a quorum on #{node}")
    end

    %{harness: harness, nodes: harness.nodes}
  end

  defp quorum?(harness, node),
    do: SP.call(harness, node, HRW.Cluster, :snapshot, [:held]).quorum?

  defp owner(harness, node, key), do: SP.call(harness, node, HRW.Cluster, :owner, [:held, key])

  test "the majority sees the departure first, after a cut one direction at a time: " <>
         "no key has an owner on each side at once",
       %{harness: harness, nodes: [m | majority] = nodes} do
    keys = for i <- 1..400, key = "key:#{i}", owner(harness, m, key) == m, do: key
    assert length(keys) > 20
    calls = for key <- keys, do: {HRW.Cluster, :owner, [:held, key]}

    # On m, the last lookup that answered m itself; on the majority, the first that
    # answered another node for one of m's keys.
    watchers = Map.new(nodes, &{&1, SP.call(harness, &1, SP, :watch, [calls, m])})

    # m's bytes stop reaching the majority first, then the majority's stop reaching
    # m; then the majority drops its connections to m (a :nodedown there at once),
    # whose closes never reach m: m sees silence only.
    _ = SP.cut_one_way(harness, [m], majority)
    _ = SP.cut_one_way(harness, majority, [m])
    for node <- majority, do: true = SP.call(harness, node, Node, :disconnect, [m])

    for node <- majority do
      eventually(fn -> owner(harness, node, hd(keys)) not in [m, nil] end, "the take-over")
    end

    eventually(fn -> owner(harness, m, hd(keys)) == nil end, "m's lapse")

    records =
      Map.new(watchers, fn {node, pid} ->
        {node, SP.call(harness, node, SP, :stop_watch, [pid])}
      end)

    # m answered for its keys until its lease lapsed, every member still in its view.
    assert %{last_value: last_on_m} = records[m]
    assert is_integer(last_on_m)
    assert SP.call(harness, m, HRW.Cluster, :snapshot, [:held]).members == nodes
    assert Enum.sort(SP.call(harness, m, Node, :list, [])) == majority

    for node <- majority do
      %{first_other: taken, last_value: last} = records[node]
      assert is_integer(taken), "#{node} took nothing over"
      assert last_on_m < taken, "#{node} took m's keys #{last_on_m - taken} µs before m let go"
      # Until then the majority named m: writes to it failed, none found a second owner.
      assert is_integer(last) and last < taken
    end
  end

  test "a server restarted with a lease after a departure it did not see waits " <>
         "out the departed member's lease too",
       %{harness: harness, nodes: [m, x, y] = nodes} do
    keys = for i <- 1..400, key = "key:#{i}", owner(harness, m, key) == m, do: key
    calls = for key <- keys, do: {HRW.Cluster, :owner, [:held, key]}
    on_m = SP.call(harness, m, SP, :watch, [calls, m])

    # x's server is killed, m is cut off silently and x drops it while no server
    # runs there; then x's server starts again and takes the entry over.
    pid = SP.call(harness, x, HRW.Cluster.Server, :pid!, [:held])
    true = SP.call(harness, x, Process, :exit, [pid, :kill])
    eventually(fn -> not SP.call(harness, x, Process, :alive?, [pid]) end, "the kill")
    _ = SP.cut(harness, [m], [x, y])
    for node <- [x, y], do: true = SP.call(harness, node, Node, :disconnect, [m])
    opts = [name: :held, quorum: {:majority, 3}, lease: lease()]
    {:ok, _} = SP.call(harness, x, HRW.Cluster, :start, [opts])
    on_x = SP.call(harness, x, SP, :watch, [calls, m])

    eventually(fn -> owner(harness, x, hd(keys)) not in [m, nil] end, "the take-over")
    eventually(fn -> owner(harness, m, hd(keys)) == nil end, "m's lapse")
    %{last_value: last_on_m} = SP.call(harness, m, SP, :stop_watch, [on_m])
    %{first_other: taken} = SP.call(harness, x, SP, :stop_watch, [on_x])
    assert is_integer(last_on_m) and is_integer(taken)
    assert last_on_m < taken, "x took m's keys #{last_on_m - taken} µs before m let go"
    assert SP.call(harness, m, HRW.Cluster, :snapshot, [:held]).members == nodes
  end
end
