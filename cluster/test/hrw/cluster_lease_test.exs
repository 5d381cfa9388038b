defmodule HRW.ClusterLeaseTest do
  # The :lease option (issue 34): a quorum that expires when the members go silent.
  # The partition tests run 5 :peer nodes whose links go through a relay in this VM
  # (HRW.SilentPartition): a cut drops every byte between two groups and closes
  # nothing, so no :nodedown fires before net_ticktime (120 s here). Every wait is a
  # poll with a deadline far above its usual time; no duration is asserted.
  use ExUnit.Case, async: false

  alias HRW.Cluster.Lease

  @lease 300

  describe "the option" do
    test "bad values raise ArgumentError naming the range" do
      for bad <- [0, 99, -1, 4_294_967_296, 300.0, "300", :infinity, true, [300]] do
        error =
          assert_raise ArgumentError, fn ->
            HRW.Cluster.child_spec(name: :lease_bad, lease: HRW.TestValues.untyped(bad))
          end

        assert error.message =~
                 "HRW.Cluster :lease must be nil (off) or an integer in 100..4294967295"

        assert error.message =~ "got: #{inspect(bad)}"
      end

      # The start itself checks too.
      assert_raise ArgumentError, ~r/:lease/, fn ->
        HRW.Cluster.start(name: :lease_bad, lease: 1)
      end
    end

    test "nil (the default) is off; 100 and 2^32 - 1 ms are the bounds" do
      for lease <- [nil, 100, 4_294_967_295] do
        assert %{id: {HRW.Cluster, :lease_ok}} =
                 HRW.Cluster.child_spec(name: :lease_ok, lease: lease)
      end
    end
  end

  describe "counting (HRW.Cluster.Lease)" do
    @others [:b@h, :c@h, :d@h, :e@h]

    defp lease(heard), do: %Lease{ms: 1_000, period: 333, server: :s, heard: heard}

    test "a member counts from its answer until the answered heartbeat's stamp plus the lease" do
      lease = lease(%{:b@h => 5_000, :c@h => 5_200})
      nodes = [node() | @others]

      # Quorum 3: this node and two others; the second freshest answer lapses first.
      assert Lease.until(lease, nodes, 3) == 6_000
      assert Lease.held?(6_000, 5_999)
      refute Lease.held?(6_000, 6_000)
      # Quorum 4 needs a third answer.
      assert Lease.until(lease, nodes, 4) == nil
      refute Lease.held?(nil, 0)
      # This node alone reaches quorum 1, heard or not.
      assert Lease.until(lease(%{}), nodes, 1) == :always
      assert Lease.held?(:always, 10 ** 12)
    end

    test "a node outside the members (filtered out) counts only what it hears; " <>
           "answers from non-members count for nothing" do
      lease = lease(%{:b@h => 100, :z@h => 900})
      assert Lease.until(lease, @others, 1) == 1_100
      assert Lease.until(lease, @others, 2) == nil
    end

    test "the newest stamp counts, whatever order the answers arrive in" do
      lease = lease(%{}) |> Lease.heard(:b@h, 300) |> Lease.heard(:b@h, 200)
      assert lease.heard == %{:b@h => 300}
      assert Lease.heard(lease, :b@h, 400).heard == %{:b@h => 400}
    end

    test "every server answers heartbeats, with or without a lease" do
      for {name, opts} <- [lease_answer_off: [], lease_answer_on: [lease: @lease]] do
        pid = start_supervised!({HRW.Cluster, [name: name] ++ opts}, id: name)
        send(HRW.Cluster.Options.server_name(name), {:"$hrw_lease", :ping, self(), 42})
        assert_receive {:"$hrw_lease", :pong, ^pid, 42}
      end
    end
  end

  test "one node: with a lease it counts itself, so quorum 1 holds and quorum 2 does not" do
    start_supervised!({HRW.Cluster, name: :lease_one, lease: @lease}, id: :one)
    start_supervised!({HRW.Cluster, name: :lease_two, lease: @lease, quorum: 2}, id: :two)
    assert HRW.Cluster.snapshot(:lease_one).quorum?
    assert HRW.Cluster.owner(:lease_one, "k") == node()
    refute HRW.Cluster.snapshot(:lease_two).quorum?
    assert HRW.Cluster.owner(:lease_two, "k") == nil
  end
end

defmodule HRW.ClusterLeasePartitionTest do
  # 5 peers behind the relay, each running the cluster :leased (lease 300 ms) and
  # :plain (no lease), both with quorum {:majority, 5}.
  use ExUnit.Case, async: false

  alias HRW.SilentPartition, as: SP

  # Scaled with the other waits on emulated machines, where a round trip may take
  # longer than 300 ms.
  defp lease, do: HRW.TestTimeouts.ms(300)

  defp eventually(check, what),
    do: SP.await(check, HRW.TestTimeouts.ms(30_000), what)

  setup_all do
    ticktime = div(HRW.TestTimeouts.ms(120_000), 1000)
    harness = SP.start(5, prefix: :hrw_lease, net_ticktime: ticktime)
    on_exit(fn -> SP.stop(harness) end)

    for node <- harness.nodes do
      start(harness, node, name: :leased, quorum: {:majority, 5}, lease: lease())
      start(harness, node, name: :plain, quorum: {:majority, 5})
    end

    for node <- harness.nodes do
      eventually(fn -> view(harness, node, :leased) == {true, harness.nodes} end, "a quorum")
    end

    %{harness: harness, nodes: harness.nodes}
  end

  defp start(harness, node, opts),
    do: {:ok, _} = SP.call(harness, node, HRW.Cluster, :start, [opts])

  defp stop(harness, node, name) do
    server = HRW.Cluster.Options.server_name(name)
    :ok = SP.call(harness, node, GenServer, :stop, [server])
  end

  # {quorum?, members} of `name` on `node`.
  defp view(harness, node, name) do
    snapshot = SP.call(harness, node, HRW.Cluster, :snapshot, [name])
    {snapshot.quorum?, snapshot.members}
  end

  defp owner(harness, node, name), do: SP.call(harness, node, HRW.Cluster, :owner, [name, "k"])

  test "[2|3] cut silently: the minority's leased quorum lapses while every link is " <>
         "still up; the cluster without a lease keeps it; the heal gives it back",
       %{harness: harness, nodes: nodes} do
    {minority, majority} = Enum.split(nodes, 2)
    _ = SP.cut(harness, minority, majority)
    on_exit(fn -> SP.heal(harness, minority, majority) end)

    for node <- minority do
      eventually(fn -> not elem(view(harness, node, :leased), 0) end, "the lapse on #{node}")
      # No member left: the lease took the quorum, not a nodedown.
      assert view(harness, node, :leased) == {false, nodes}
      assert owner(harness, node, :leased) == nil
      assert Enum.sort(SP.call(harness, node, Node, :list, [])) == nodes -- [node]
      # Without a lease nothing changed.
      assert view(harness, node, :plain) == {true, nodes}
      assert owner(harness, node, :plain) in nodes
    end

    # The majority still hears a majority.
    for node <- majority do
      eventually(fn -> view(harness, node, :leased) == {true, nodes} end, "the majority")
      assert owner(harness, node, :leased) in nodes
    end

    _ = SP.heal(harness, minority, majority)

    for node <- minority do
      eventually(fn -> view(harness, node, :leased) == {true, nodes} end, "the heal on #{node}")
    end

    fingerprints =
      for node <- nodes, do: SP.call(harness, node, HRW.Cluster, :fingerprint, [:leased])

    assert length(Enum.uniq(fingerprints)) == 1
  end

  test "a member whose server stopped stops counting although still connected; " <>
         "it counts again once its server answers",
       %{harness: harness, nodes: nodes} do
    [a, b, c | _] = nodes
    for node <- [a, b, c], do: start(harness, node, name: :lonely, quorum: 3, lease: lease())
    on_exit(fn -> for node <- [a, b, c], do: stop(harness, node, :lonely) end)
    eventually(fn -> view(harness, a, :lonely) == {true, nodes} end, "three servers")

    stop(harness, c, :lonely)
    eventually(fn -> view(harness, a, :lonely) == {false, nodes} end, "c's silence")
    assert owner(harness, a, :lonely) == nil

    start(harness, c, name: :lonely, quorum: 3, lease: lease())
    eventually(fn -> view(harness, a, :lonely) == {true, nodes} end, "c's answers")
  end

  test "a server with a lease counts the members whose servers run without one",
       %{harness: harness, nodes: [a | others] = nodes} do
    start(harness, a, name: :mixed, quorum: {:majority, 5}, lease: lease())
    for node <- others, do: start(harness, node, name: :mixed, quorum: {:majority, 5})
    on_exit(fn -> for node <- nodes, do: stop(harness, node, :mixed) end)
    eventually(fn -> view(harness, a, :mixed) == {true, nodes} end, "their answers")
    assert owner(harness, a, :mixed) in nodes
  end

  test "a server with a lease that takes an entry over counts only what it hears itself",
       %{harness: harness, nodes: [a | _] = nodes} do
    pid = SP.call(harness, a, HRW.Cluster.Server, :pid!, [:leased])
    true = SP.call(harness, a, Process, :exit, [pid, :kill])
    eventually(fn -> not SP.call(harness, a, Process, :alive?, [pid]) end, "the kill")
    start(harness, a, name: :leased, quorum: {:majority, 5}, lease: lease())
    eventually(fn -> view(harness, a, :leased) == {true, nodes} end, "the answers")
    # With the structure built for its own members, not only the flag.
    assert owner(harness, a, :leased) in nodes
    assert SP.call(harness, a, HRW.Cluster, :members, [:leased]) == nodes
  end
end
