defmodule HRW.ClusterLeaseTest do
  # The :lease option: a quorum that expires when the members go silent.
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

    test "nil (the default) is off; 100 ms is the least, the most is below 3/4 of net_ticktime" do
      limit = net_ticktime() * 750

      for lease <- [nil, 100, limit - 1] do
        assert %{id: {HRW.Cluster, :lease_ok}} =
                 HRW.Cluster.child_spec(name: :lease_ok, lease: lease)
      end

      for lease <- [limit, limit + 1, 4_294_967_295] do
        error =
          assert_raise ArgumentError, fn ->
            HRW.Cluster.child_spec(name: :lease_long, lease: lease)
          end

        assert error.message ==
                 "HRW.Cluster :lease must be below the VM's earliest failure detection, " <>
                   "3/4 of net_ticktime (#{limit} ms with net_ticktime #{net_ticktime()} s): " <>
                   "a silent side would keep its quorum until its :nodedown anyway, got: #{lease}"

        assert_raise ArgumentError, ~r/earliest failure detection/, fn ->
          HRW.Cluster.start(name: :lease_long, lease: lease)
        end
      end
    end

    # On a peer, whose net_ticktime this test may change. During a change the VM
    # tells only the new value: the limit is the lower of it and the value in force
    # before (as a check last read it), on every entry point.
    test "during a net_ticktime change the lower limit applies, on every entry point" do
      HRW.TestPeers.distributed!()

      for {from, to} <- [{10, 60}, {60, 10}] do
        {_peer, node} = HRW.TestPeers.start_peer(:hrw_tick, to)
        ticktime = fn -> :erpc.call(node, :net_kernel, :get_net_ticktime, []) end

        outcome = fn entry, lease ->
          try do
            name = :"tick_change_#{System.unique_integer([:positive])}"

            {module, fun} =
              if entry == :start_link,
                do: {HRW.ClusterRemote, :start_link_and_stop},
                else: {HRW.Cluster, entry}

            case :erpc.call(node, module, fun, [[name: name, lease: lease]]) do
              {:ok, pid} -> :ok = :erpc.call(node, GenServer, :stop, [pid])
              :ok -> :ok
              %{id: _} -> :ok
            end

            :accepted
          catch
            :error, {:exception, %ArgumentError{message: message}, _stack} -> message
          end
        end

        # `from` in force (and read by a check), then a change to `to` that lasts.
        _ = :erpc.call(node, :net_kernel, :set_net_ticktime, [from, 1])
        HRW.TestPeers.eventually(fn -> ticktime.() == from end, "net_ticktime #{from}")
        assert outcome.(:child_spec, 100) == :accepted
        _ = :erpc.call(node, :net_kernel, :set_net_ticktime, [to, 600])
        assert ticktime.() == {:ongoing_change_to, to}

        # 10 s is the lower one either way: 7,500 ms is 3/4 of it.
        for entry <- [:child_spec, :start, :start_link] do
          assert outcome.(entry, 7_500) =~ "(7500 ms with net_ticktime 10 s)", "#{entry}"
          assert outcome.(entry, 44_999) =~ "earliest failure detection", "#{entry}"
          assert outcome.(entry, 7_499) == :accepted, "#{entry}"
        end
      end
    end

    # The test VM's, distributed or not.
    defp net_ticktime do
      case :net_kernel.get_net_ticktime() do
        seconds when is_integer(seconds) -> seconds
        :ignored -> Application.get_env(:kernel, :net_ticktime, 60)
      end
    end
  end

  describe "counting (HRW.Cluster.Lease)" do
    @others [:b@h, :c@h, :d@h, :e@h]

    defp lease(heard), do: %{Lease.new(1_000, node(), 1) | heard: heard}

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

    test "an answer counts only by the token of a heartbeat sent to that member, " <>
           "from that heartbeat's own stamp, and only within the lease" do
      now = System.monotonic_time(:millisecond)
      lease = %{lease(%{}) | sent: %{1 => {:b@h, now - 100}, 2 => {:c@h, now - 2_000}}}

      # Whatever the answer says besides its token counts for nothing.
      {lease, check?} = Lease.answer(lease, 1, now)
      assert lease.heard == %{:b@h => now - 100}
      assert check?
      assert lease.sent == %{2 => {:c@h, now - 2_000}}

      # A token answered twice, or never sent; an answer older than the lease.
      for token <- [1, 3, now + 10_000, 2 ** 60, -1, :x, "1"] do
        assert Lease.answer(lease, token, now) == {lease, false}
      end

      {late, false} = Lease.answer(lease, 2, now)
      assert late.heard == lease.heard
    end

    test "a round sends one heartbeat to each other member, each with a token of its own, " <>
           "and keeps only the heartbeats sent within the lease" do
      lease = %{lease(%{}) | nodes: [node() | @others], sent: %{1 => {:b@h, 0}, 2 => {:c@h, 500}}}
      {ticked, pings} = Lease.tick(lease, 1_200)
      assert Enum.map(pings, &elem(&1, 0)) == @others
      tokens = Enum.map(pings, &elem(&1, 1))
      assert length(Enum.uniq(tokens)) == 4
      assert Map.drop(ticked.sent, tokens) == %{2 => {:c@h, 500}}
      assert Enum.all?(tokens, &(ticked.sent[&1] |> elem(1) == 1_200))
      # Another round draws other tokens.
      {_ticked, again} = Lease.tick(ticked, 1_500)
      assert MapSet.disjoint?(MapSet.new(tokens), MapSet.new(Enum.map(again, &elem(&1, 1))))
    end

    test "timer messages count only with the reference of the timer armed last" do
      {:ok, pid} = HRW.Cluster.start(name: :lease_timers, lease: @lease)
      server = HRW.Cluster.Options.server_name(:lease_timers)
      before = :sys.get_state(pid)

      for kind <- [:tick, :lapse, :release, :rebuild, :poll, :refollow] do
        send(server, {:timeout, make_ref(), {:"$hrw_cluster_timer", kind}})
        send(server, {:timeout, nil, {:"$hrw_cluster_timer", kind}})
      end

      send(server, {:"$hrw_lease", :tick, nil, nil})
      after_forged = :sys.get_state(pid)
      # A forged :rebuild would have started an evaluation (seq), a forged :release
      # or :lapse a publish (generation).
      assert after_forged.m.seq == before.m.seq
      assert after_forged.m.generation == before.m.generation
      GenServer.stop(pid)
    end

    test "a member that leaves and comes back counts only from a new answer" do
      nodes = [node(), :b@h]
      now = System.monotonic_time(:millisecond)
      lease = %{lease(%{:b@h => now}) | nodes: nodes, sent: %{7 => {:b@h, now}}}
      {true, _until, lease} = Lease.check(lease, nodes, 2, now)
      {false, nil, lease} = Lease.check(lease, [node()], 2, now)
      {false, nil, lease} = Lease.check(lease, nodes, 2, now)
      assert lease.heard == %{}
      # Nor from an answer to a heartbeat sent before it left.
      assert {%{heard: heard}, _} = Lease.answer(lease, 7, now)
      assert heard == %{}

      # A departure seen while it is still a member (Lease.forget/2) alike.
      lease = %{lease(%{:b@h => now}) | nodes: nodes}
      assert Lease.forget(lease, [:b@h]).heard == %{}
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

  test "past the lease, every lookup answers no owner while the server cannot run " <>
         "(suspended): the entry carries the lapse, the readers compare it with the clock",
       %{harness: harness, nodes: [a | _] = nodes} do
    server = HRW.Cluster.Options.server_name(:leased)
    eventually(fn -> view(harness, a, :leased) == {true, nodes} end, "a quorum")
    :ok = SP.call(harness, a, :sys, :suspend, [server])
    on_exit(fn -> SP.call(harness, a, :sys, :resume, [server]) end)
    generation = SP.call(harness, a, HRW.Cluster, :generation, [:leased])

    eventually(fn -> owner(harness, a, :leased) == nil end, "the lapse")
    # Published by nobody: the server has not run since.
    assert SP.call(harness, a, HRW.Cluster, :generation, [:leased]) == generation
    snapshot = SP.call(harness, a, HRW.Cluster, :snapshot, [:leased])
    assert {snapshot.quorum?, snapshot.structure, snapshot.members} == {false, nil, nodes}
    assert SP.call(harness, a, HRW.Cluster, :owners, [:leased, "k", 3]) == []
    assert SP.call(harness, a, HRW.Cluster, :members, [:leased]) == []
    assert SP.call(harness, a, HRW.Cluster, :structure, [:leased]) == nil
    assert SP.call(harness, a, HRW.Cluster, :stable_owners, [:leased, "k", 2]) == []

    :ok = SP.call(harness, a, :sys, :resume, [server])
    eventually(fn -> owner(harness, a, :leased) in nodes end, "the quorum after the resume")
  end

  test "forged and future-stamped lease messages change nothing and crash nothing",
       %{harness: harness, nodes: [a, b, c | _] = nodes} do
    for node <- [a, b, c], do: start(harness, node, name: :forged, quorum: 3, lease: lease())
    on_exit(fn -> for node <- [a, b], do: stop(harness, node, :forged) end)
    eventually(fn -> view(harness, a, :forged) == {true, nodes} end, "three servers")

    # c's server stops: a's quorum lapses, and nothing but c's answers may bring it back.
    stop(harness, c, :forged)
    eventually(fn -> view(harness, a, :forged) == {false, nodes} end, "c's silence")
    server = HRW.Cluster.Options.server_name(:forged)
    pid = SP.call(harness, a, Process, :whereis, [server])
    heard = SP.call(harness, a, :sys, :get_state, [server]).m.lease.heard[c]
    on_c = SP.call(harness, c, Process, :whereis, [:init])
    now_on_a = SP.call(harness, a, System, :monotonic_time, [:millisecond])

    forged =
      for(
        stamp <- [now_on_a, now_on_a + 10_000, 2 ** 60, -(2 ** 60), 2 ** 64 + 1, :x, "k", {1}],
        do: {:"$hrw_lease", :pong, on_c, stamp}
      ) ++
        List.duplicate({:"$hrw_lease", :tick, nil, nil}, 50) ++
        for(_ <- 1..50, do: {:timeout, make_ref(), :"$hrw_lease_tick"}) ++
        [
          {:timeout, make_ref(), :"$hrw_lease_lapse"},
          {:timeout, make_ref(), :"$hrw_cluster_release"},
          {:"$hrw_lease", :lapse, nil, nil},
          {:"$hrw_lease", :ping, :not_a_pid, 1},
          {:"$hrw_lease", :pong, nil, nil}
        ]

    # Sent from b, as any node of the distribution may; handled when post/2 returns.
    assert SP.call(harness, b, SP, :post, [{server, a}, forged]) == :ok
    assert SP.call(harness, a, Process, :whereis, [server]) == pid
    assert view(harness, a, :forged) == {false, nodes}
    assert owner(harness, a, :forged) == nil
    state = SP.call(harness, a, :sys, :get_state, [server])
    assert state.m.lease.heard[c] == heard
    # The heartbeats to c that a keeps within the lease: one per period of its own
    # ticks (at most 4 in a lease, and the one just sent), none per forged tick.
    assert Enum.count(state.m.lease.sent, &match?({_, {^c, _}}, &1)) <= 5

    # c's server back: its answers give the quorum back, as before.
    start(harness, c, name: :forged, quorum: 3, lease: lease())
    on_exit(fn -> stop(harness, c, :forged) end)
    eventually(fn -> view(harness, a, :forged) == {true, nodes} end, "c's answers")
  end

  test "a server without a lease that takes over a lapsed leased entry decides the " <>
         "quorum anew",
       %{harness: harness, nodes: [a, b | _] = nodes} do
    for node <- [a, b], do: start(harness, node, name: :retake, quorum: 2, lease: lease())
    eventually(fn -> view(harness, a, :retake) == {true, nodes} end, "b's answers")
    stop(harness, b, :retake)
    eventually(fn -> view(harness, a, :retake) == {false, nodes} end, "b's silence")

    pid = SP.call(harness, a, HRW.Cluster.Server, :pid!, [:retake])
    true = SP.call(harness, a, Process, :exit, [pid, :kill])
    eventually(fn -> not SP.call(harness, a, Process, :alive?, [pid]) end, "the kill")
    start(harness, a, name: :retake, quorum: 2)
    on_exit(fn -> stop(harness, a, :retake) end)

    # Five members, quorum 2, no lease: the quorum holds as start/1 returns.
    assert view(harness, a, :retake) == {true, nodes}
    assert owner(harness, a, :retake) in nodes
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
