defmodule HRW.ClusterRobustnessTest do
  # Starts Erlang distribution and peer nodes on loopback: not async.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  @debounce 30

  setup_all do
    HRW.TestPeers.distributed!()
  end

  # -- helpers -----------------------------------------------------------------------

  defp start_peer(tag), do: HRW.TestPeers.start_peer(:hrw_rb, tag)

  import HRW.TestPeers, only: [eventually: 2]

  # A process that looks keys up in every cluster of `names` in a loop until told to
  # stop, and counts the lookups that failed: raised, or answered something that is
  # not a node although every cluster here always has a member.
  defp start_lookups(names) do
    parent = self()

    spawn_monitor(fn ->
      loop = fn loop, n, failures, last ->
        receive do
          :stop -> send(parent, {:lookups, n, failures, last})
        after
          0 ->
            {failures, last} =
              Enum.reduce(names, {failures, last}, fn name, {failures, last} ->
                # (Each call reads the entry anew: a change may fall between them.)
                try do
                  owner = HRW.Cluster.owner(name, {:key, n})
                  true = is_atom(owner) and owner != nil
                  [_ | _] = HRW.Cluster.owners(name, {:key, n}, 2)
                  [_ | _] = HRW.Cluster.stable_owners(name, {:key, n}, 1)
                  {failures, last}
                catch
                  kind, reason -> {failures + 1, {name, kind, reason}}
                end
              end)

            loop.(loop, n + 1, failures, last)
        end
      end

      loop.(loop, 0, 0, nil)
    end)
  end

  defp stop_lookups({pid, ref}) do
    send(pid, :stop)

    receive do
      {:lookups, n, failures, last} ->
        assert_receive {:DOWN, ^ref, :process, ^pid, :normal}
        assert failures == 0, "#{failures} of #{n} lookups failed, the last: #{inspect(last)}"
        n
    after
      10_000 -> flunk("the lookup loop did not answer")
    end
  end

  defp counter(counters, index), do: :atomics.get(counters, index)

  # -- callbacks ---------------------------------------------------------------------

  test "a callback that raises, throws, exits, returns garbage or hangs is contained; " <>
         "the previous members stay, the server keeps running, no lookup fails" do
    # Index 1: 1 while the callbacks fail. Indexes 2..: calls made while failing.
    counters = :atomics.new(8, [])
    :atomics.put(counters, 1, 1)
    local = node()

    failing = fn index, fail, ok ->
      fn node ->
        if node != local and :atomics.get(counters, 1) == 1 do
          :atomics.add(counters, index, 1)
          fail.()
        else
          ok
        end
      end
    end

    huge = String.duplicate("x", 1_000_000)

    clusters = [
      rb_raise: [weight_fn: failing.(2, fn -> raise "boom " <> huge end, 1)],
      rb_garbage: [weight_fn: failing.(3, fn -> {:heavy, huge} end, 1)],
      rb_big_weight: [weight_fn: failing.(4, fn -> 2 ** 1_000_000 end, 1)],
      rb_deny: [deny: failing.(5, fn -> throw({:no, huge}) end, false)],
      rb_allow: [allow: failing.(6, fn -> exit({:bye, huge}) end, true)],
      rb_killed: [allow: failing.(7, fn -> Process.exit(self(), :kill) end, true)],
      rb_hang: [
        weight_fn: failing.(8, fn -> Process.sleep(:infinity) end, 1),
        structure: :ring,
        callback_timeout: 300
      ]
    ]

    names = Keyword.keys(clusters)

    pids =
      for {name, opts} <- clusters, into: %{} do
        opts = [name: name, debounce: @debounce] ++ opts
        {name, start_supervised!({HRW.Cluster, opts})}
      end

    for name <- names do
      assert HRW.Cluster.members(name) == [node()]
      assert HRW.Cluster.generation(name) == 1
    end

    lookups = start_lookups(names)

    log =
      capture_log(fn ->
        {_peer, a} = start_peer(:joining)

        # Each callback failed for the joining node, and failed again at the retry
        # (for the hang: the first evaluation was cut by the timeout, then retried).
        eventually(
          fn -> Enum.all?(2..8, &(counter(counters, &1) >= 2)) end,
          fn -> "failing calls: #{inspect(Enum.map(2..8, &counter(counters, &1)))}" end
        )

        for name <- names do
          assert HRW.Cluster.members(name) == [node()], "#{name} kept its previous members"
          assert HRW.Cluster.generation(name) == 1
          # Still the same, responsive server.
          assert GenServer.whereis(:"HRW.Cluster:#{name}") == pids[name]
          assert HRW.Cluster.subscribe(name) == :ok
        end

        # The callbacks recover: the next attempt publishes the new member.
        :atomics.put(counters, 1, 0)

        eventually(
          fn -> Enum.all?(names, &(HRW.Cluster.members(&1) == Enum.sort([node(), a]))) end,
          fn -> "members: #{inspect(Enum.map(names, &{&1, HRW.Cluster.members(&1)}))}" end
        )

        for name <- names do
          assert HRW.Cluster.generation(name) == 2
          assert_receive {:hrw_cluster_changed, ^name, old, new}
          assert HRW.Cluster.structure(name) == new
          assert Tuple.to_list(old.nodes) == [node()]
          assert GenServer.whereis(:"HRW.Cluster:#{name}") == pids[name]
        end
      end)

    assert stop_lookups(lookups) > 0

    # Every failure was logged, each message bounded.
    lines = log |> String.split("\n") |> Enum.filter(&(&1 =~ "HRW.Cluster :rb_"))

    for {name, expected} <- [
          rb_raise: ~s(:weight_fn raised RuntimeError: "boom xxx),
          rb_garbage: ":weight_fn returned {:heavy, \"xxx",
          rb_big_weight: ":weight_fn returned an integer outside the 64-bit range",
          rb_deny: ":deny threw {:no, \"xxx",
          rb_allow: ":allow exited with {:bye, \"xxx",
          rb_killed: "the evaluation of the members exited: :killed",
          rb_hang: "did not finish within 300 ms (:callback_timeout) and was killed"
        ] do
      assert Enum.any?(lines, &(&1 =~ "HRW.Cluster #{inspect(name)}: " and &1 =~ expected)),
             "#{name}: no warning with #{inspect(expected)} in #{inspect(lines)}"
    end

    assert Enum.all?(lines, &(byte_size(&1) < 600)),
           "a long log line: #{inspect(Enum.max_by(lines, &byte_size/1), printable_limit: 800)}"
  end

  # -- crashes, restarts, stops -------------------------------------------------------

  test "the entry survives crashes, kills, a supervisor that gives up and :shutdown; " <>
         "the next server takes it over" do
    name = :rb_restarted
    {_pa, a} = start_peer(:a)

    {:ok, sup} =
      Supervisor.start_link([{HRW.Cluster, name: name, debounce: @debounce, depth: 2}],
        strategy: :one_for_one,
        max_restarts: 2,
        max_seconds: 60
      )

    Process.unlink(sup)
    sup_ref = Process.monitor(sup)
    server = fn -> GenServer.whereis(:"HRW.Cluster:#{name}") end
    first = server.()
    expected = Enum.sort([node(), a])
    assert HRW.Cluster.members(name) == expected
    assert HRW.Cluster.generation(name) == 1
    lookups = start_lookups([name])

    log =
      capture_log(fn ->
        # A crash (terminate/2 runs with an abnormal reason), then a kill.
        :ok = :sys.terminate(first, :crash)
        eventually(fn -> server.() not in [nil, first] end, "a restarted server")
        second = server.()
        Process.exit(second, :kill)
        eventually(fn -> server.() not in [nil, first, second] end, "a second restart")

        # Same members after each restart: the entry was taken over, no new generation.
        assert HRW.Cluster.generation(name) == 1
        assert HRW.Cluster.members(name) == expected

        # A third crash within max_seconds: the supervisor gives up, the entry stays.
        :ok = :sys.terminate(server.(), :crash)
        assert_receive {:DOWN, ^sup_ref, :process, ^sup, _reason}, 5_000
      end)

    # Crash reports show a summary of the server's state, not its members.
    assert log =~ "terminating"
    refute log =~ Atom.to_string(a)
    assert server.() == nil
    assert HRW.Cluster.members(name) == expected

    assert_raise ArgumentError, ~r/no HRW.Cluster named :rb_restarted is running/, fn ->
      HRW.Cluster.subscribe(name)
    end

    # A node joins while no server runs: the entry keeps the last members. Only a
    # server publishes, and none is registered (its supervisor is down): no wait.
    {_pb, b} = start_peer(:b)
    assert b in Node.list()
    assert server.() == nil
    assert HRW.Cluster.members(name) == expected
    old_structure = HRW.Cluster.structure(name)

    # A new server (another depth) continues the generations and the history.
    start_supervised!({HRW.Cluster, name: name, debounce: @debounce, depth: 3})
    assert HRW.Cluster.generation(name) == 2
    assert HRW.Cluster.members(name) == Enum.sort([node(), a, b])
    assert HRW.Cluster.structure(name, back: 1) == old_structure
    assert HRW.Cluster.structure(name, back: 2) == nil
    assert_raise ArgumentError, ~r/depth: 3/, fn -> HRW.Cluster.owner(name, "k", back: 3) end

    # A :shutdown (a supervisor stopping its child) leaves the entry readable.
    :ok = stop_supervised({HRW.Cluster, name})
    assert HRW.Cluster.members(name) == Enum.sort([node(), a, b])
    assert HRW.Cluster.generation(name) == 2
    assert stop_lookups(lookups) > 0

    # A server with the same members and structure publishes nothing new; a
    # :normal stop erases the entry.
    {:ok, pid} = HRW.Cluster.start(name: name)
    assert HRW.Cluster.generation(name) == 2
    assert HRW.Cluster.structure(name, back: 0) == HRW.Cluster.structure(name)
    :ok = GenServer.stop(pid)

    assert_raise ArgumentError, ~r/no HRW.Cluster named :rb_restarted/, fn ->
      HRW.Cluster.owner(name, "k")
    end

    assert_raise ArgumentError, fn -> HRW.Cluster.generation(name) end
  end

  test "a restarted server whose first evaluation fails keeps the entry and retries" do
    name = :rb_restart_failing
    fail = :atomics.new(1, [])
    test = self()

    # Says when it raises, so the test waits for the failing evaluation itself
    # rather than for a time.
    weight_fn = fn _node ->
      if :atomics.get(fail, 1) == 1 do
        send(test, :weight_fn_raised)
        raise("down")
      end

      1
    end

    opts = [name: name, debounce: @debounce, weight_fn: weight_fn]
    {_pa, a} = start_peer(:a)
    first = start_supervised!({HRW.Cluster, opts})
    assert HRW.Cluster.members(name) == Enum.sort([node(), a])
    lookups = start_lookups([name])

    log =
      capture_log(fn ->
        :atomics.put(fail, 1, 1)
        :ok = :sys.terminate(first, :crash)

        eventually(
          fn -> GenServer.whereis(:"HRW.Cluster:#{name}") not in [nil, first] end,
          "a restarted server"
        )

        assert_receive :weight_fn_raised, 15_000
        assert HRW.Cluster.members(name) == Enum.sort([node(), a])
        :atomics.put(fail, 1, 0)
        {_pb, b} = start_peer(:b)

        eventually(
          fn -> HRW.Cluster.members(name) == Enum.sort([node(), a, b]) end,
          "the retry publishes"
        )
      end)

    assert log =~ ~s(HRW.Cluster :rb_restart_failing: :weight_fn raised RuntimeError: "down")
    assert stop_lookups(lookups) > 0
  end

  # -- names -------------------------------------------------------------------------

  test "names cannot be confused: Foo and :Foo are two clusters, each with its server" do
    {_pa, a} = start_peer(:names)
    alias_name = Foo
    atom_name = :Foo
    dotted = :"Elixir.HRW.Cluster.Foo"

    # Foo denies every node, :Foo none, the third keeps only the peer.
    foo = start_supervised!({HRW.Cluster, name: alias_name, deny: [~r/.*/]})
    atom_foo = start_supervised!({HRW.Cluster, name: atom_name, debounce: @debounce})
    third = start_supervised!({HRW.Cluster, name: dotted, allow: &(&1 == a)})
    assert length(Enum.uniq([foo, atom_foo, third])) == 3

    assert HRW.Cluster.members(alias_name) == []
    assert HRW.Cluster.members(atom_name) == Enum.sort([node(), a])
    assert HRW.Cluster.members(dotted) == [a]

    # Each subscription reaches its own server.
    :ok = HRW.Cluster.subscribe(alias_name)
    assert {:monitors, [process: _]} = Process.info(foo, :monitors)
    assert {:monitors, []} = Process.info(atom_foo, :monitors)

    # Stopping one leaves the others.
    :ok = stop_supervised({HRW.Cluster, atom_name})
    {:ok, pid} = HRW.Cluster.start(name: atom_name)
    :ok = GenServer.stop(pid)
    assert_raise ArgumentError, fn -> HRW.Cluster.members(atom_name) end
    assert HRW.Cluster.members(alias_name) == []
    assert HRW.Cluster.members(dotted) == [a]
    assert :ok = HRW.Cluster.subscribe(dotted)

    # Names never started create no atom and raise; a name is an atom.
    assert_raise ArgumentError, ~r/an HRW.Cluster name is an atom, got: "Foo"/, fn ->
      HRW.Cluster.subscribe(HRW.TestValues.untyped("Foo"))
    end

    assert_raise ArgumentError, ~r/no HRW.Cluster named :never_started/, fn ->
      HRW.Cluster.subscribe(:never_started)
    end
  end
end
