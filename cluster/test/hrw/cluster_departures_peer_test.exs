defmodule HRW.ClusterDeparturesPeerTest do
  # Three orders of events on real :peer nodes, each the case a simulator's
  # named schedule replays (test/hrw/cluster_sim_test.exs). Times are lower bounds
  # that hold by construction: a departed member's keys move no earlier than its
  # hold after the test made it depart, however late the server runs.
  use ExUnit.Case, async: false

  import HRW.TestPeers, only: [eventually: 2]

  alias HRW.Cluster.Lease

  @keys Enum.map(1..300, &"key-#{&1}")

  setup_all do
    HRW.TestPeers.distributed!()
  end

  defp lease, do: 1_000
  defp now, do: System.monotonic_time(:millisecond)
  defp server(name), do: Process.whereis(HRW.Cluster.Options.server_name(name))
  defp start_peer(tag), do: HRW.TestPeers.start_peer(:hrw_find, tag, connect: true)

  defp start_on(node, opts), do: {:ok, _} = :erpc.call(node, HRW.Cluster, :start, [opts])

  defp halt(node) do
    :erpc.call(node, :erlang, :halt, [], 5_000)
  catch
    _kind, _reason -> :ok
  end

  # The keys `node` owns here now, and the first time any of them is named to
  # another member (not to nobody) after `since`, in ms.
  defp owned(name, node), do: Enum.filter(@keys, &(HRW.Cluster.owner(name, &1) == node))

  defp moved_after(name, keys, node, since) do
    moved? = Enum.any?(keys, &(HRW.Cluster.owner(name, &1) not in [node, nil]))

    cond do
      moved? -> now() - since
      now() - since > 60_000 -> flunk("the keys of #{node} never moved")
      true -> moved_after(name, keys, node, since)
    end
  end

  test "a departure behind a pending evaluation, the server suspended, " <>
         "keeps the member's keys for its hold" do
    name = :find_queued
    opts = [name: name, quorum: {:majority, 3}, debounce: 200]
    {_pa, a} = start_peer(:q_a)
    {_pb, b} = start_peer(:q_b)
    for node <- [a, b], do: start_on(node, opts)
    {:ok, _} = HRW.Cluster.start_link(opts ++ [lease: lease()])
    eventually(fn -> HRW.Cluster.snapshot(name).quorum? end, "a quorum")
    eventually(fn -> HRW.Cluster.members(name) == Enum.sort([node(), a, b]) end, "members")
    owned = owned(name, b)

    # A join arms the debounce; the server is suspended before it fires, so the
    # evaluation is queued ahead of the departure. The keys: b's that c does not
    # take.
    {_pc, c} = start_peer(:q_c)
    _ = :sys.get_state(server(name))
    :ok = :sys.suspend(server(name))
    keys = Enum.filter(owned, &(HRW.owner(&1, [node(), a, b, c]) == b))
    assert keys != []
    start_on(c, opts)
    Process.sleep(300)
    departed = now()
    halt(b)
    Process.sleep(150)
    :ok = :sys.resume(server(name))

    assert moved_after(name, keys, b, departed) >= Lease.hold(lease())
    eventually(fn -> b not in HRW.Cluster.members(name) end, "b removed")
  end

  test "a polled :pg source holds a leaving member for its hold" do
    name = :find_polled
    scope = :hrw_find_scope
    opts = [name: name, source: {:pg, scope, :g}, poll_interval: 50, quorum: {:majority, 3}]
    {_pa, a} = start_peer(:p_a)
    {_pb, b} = start_peer(:p_b)
    start_supervised!(%{id: scope, start: {:pg, :start_link, [scope]}})

    members =
      for node <- [a, b] do
        {:ok, _} = :erpc.call(node, :pg, :start, [scope])
        pid = :erpc.call(node, :erlang, :spawn, [Process, :sleep, [:infinity]])
        :ok = :erpc.call(node, :pg, :join, [scope, :g, pid])
        start_on(node, opts ++ [lease: lease()])
        {node, pid}
      end

    :ok = :pg.join(scope, :g, self())
    {:ok, _} = HRW.Cluster.start_link(opts ++ [lease: lease()])
    eventually(fn -> HRW.Cluster.snapshot(name).quorum? end, "a quorum")
    eventually(fn -> HRW.Cluster.members(name) == Enum.sort([node(), a, b]) end, "members")
    keys = owned(name, b)
    assert keys != []

    left = now()
    :ok = :erpc.call(b, :pg, :leave, [scope, :g, Keyword.fetch!(members, b)])
    assert moved_after(name, keys, b, left) >= Lease.hold(lease())
    eventually(fn -> b not in HRW.Cluster.members(name) end, "b removed")
  end

  test "a monitored :pg source follows its scope again after the scope restarts" do
    name = :find_scope
    scope = :hrw_find_restart
    {_pa, a} = start_peer(:s_a)
    {:ok, _} = :erpc.call(a, :pg, :start, [scope])
    remote = :erpc.call(a, :erlang, :spawn, [Process, :sleep, [:infinity]])
    :ok = :erpc.call(a, :pg, :join, [scope, :g, remote])
    start_supervised!(%{id: scope, start: {:pg, :start_link, [scope]}})
    :ok = :pg.join(scope, :g, self())
    {:ok, _} = HRW.Cluster.start_link(name: name, source: {:pg, scope, :g}, debounce: 20)
    eventually(fn -> HRW.Cluster.members(name) == Enum.sort([node(), a]) end, "members")

    # The scope dies and its supervisor starts it again; this process joins again.
    old = Process.whereis(scope)
    Process.exit(old, :kill)
    eventually(fn -> Process.whereis(scope) not in [nil, old] end, "the scope restarted")
    :ok = :pg.join(scope, :g, self())

    # Only a monitor of the new scope sees a's member leave, then join again.
    eventually(fn -> HRW.Cluster.members(name) == Enum.sort([node(), a]) end, "a synced")
    :ok = :erpc.call(a, :pg, :leave, [scope, :g, remote])
    eventually(fn -> HRW.Cluster.members(name) == [node()] end, "a left")
    :ok = :erpc.call(a, :pg, :join, [scope, :g, remote])
    eventually(fn -> HRW.Cluster.members(name) == Enum.sort([node(), a]) end, "a back")
  end
end
