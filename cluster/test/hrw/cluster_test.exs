defmodule HRW.ClusterTest do
  # Starts Erlang distribution and peer nodes on loopback: not async.
  use ExUnit.Case, async: false
  import HRW.TestValues, only: [untyped: 1]

  doctest HRW.Cluster

  @keys Enum.map(1..200, &"key-#{&1}")
  @debounce 30

  setup_all do
    HRW.TestPeers.distributed!()
  end

  # -- helpers -----------------------------------------------------------------------

  defp start_peer(tag), do: HRW.TestPeers.start_peer(:hrw_cl, tag, connect: true)
  defp stop_peer(peer), do: HRW.TestPeers.stop_peer(peer)

  defp start_remote_cluster(node, opts) do
    {:ok, _pid} = :erpc.call(node, HRW.Cluster, :start, [opts])
  end

  import HRW.TestPeers, only: [eventually: 2]

  defp members_on(node, name) do
    :erpc.call(node, HRW.Cluster, :members, [name])
  catch
    kind, reason -> {kind, reason}
  end

  defp owners_on(node, name) do
    Enum.map(@keys, &:erpc.call(node, HRW.Cluster, :owner, [name, &1]))
  end

  # Waits until every node's cluster `name` has exactly `expected` members, then
  # checks that all of them place every key on the same owner.
  defp assert_converged(nodes, name, expected) do
    expected = Enum.sort(expected)

    eventually(
      fn -> Enum.all?(nodes, &(members_on(&1, name) == expected)) end,
      fn -> "members of #{name}: #{inspect(Map.new(nodes, &{&1, members_on(&1, name)}))}" end
    )

    [reference | others] = Enum.map(nodes, &owners_on(&1, name))
    assert Enum.all?(reference, &(&1 in expected))
    for owners <- others, do: assert(owners == reference)
    reference
  end

  # A process that looks keys up in a loop (locally, and on `remote` by :erpc)
  # until told to stop; it reports how many lookups it made and which owners it saw.
  defp start_looper(name, remote) do
    parent = self()

    spawn_monitor(fn ->
      loop = fn loop, n, seen ->
        receive do
          :stop -> send(parent, {:looped, n, seen})
        after
          0 ->
            key = {:looped, n}
            owner = HRW.Cluster.owner(name, key)
            true = is_atom(owner)
            # (Each call reads the entry anew: a change may fall between them.)
            [_ | _] = HRW.Cluster.owners(name, key, 2)

            seen =
              if rem(n, 20) == 0 do
                MapSet.put(seen, :erpc.call(remote, HRW.Cluster, :owner, [name, key]))
              else
                seen
              end

            loop.(loop, n + 1, MapSet.put(seen, owner))
        end
      end

      loop.(loop, 0, MapSet.new())
    end)
  end

  defp stop_looper({pid, ref}) do
    send(pid, :stop)

    receive do
      {:looped, n, seen} ->
        assert_receive {:DOWN, ^ref, :process, ^pid, :normal}
        {n, seen}

      {:DOWN, ^ref, :process, ^pid, reason} ->
        flunk("the lookup loop crashed: #{inspect(reason)}")
    after
      5_000 -> flunk("the lookup loop did not answer")
    end
  end

  # -- membership ----------------------------------------------------------------------

  test "members join and leave; every member computes the same owners after each change" do
    name = :hrw_nodes
    opts = [name: name, debounce: @debounce]
    start_supervised!({HRW.Cluster, opts})

    {_pa, a} = start_peer(:a)
    {pb, b} = start_peer(:b)
    for node <- [a, b], do: start_remote_cluster(node, opts)
    looper = start_looper(name, a)

    before = assert_converged([node(), a, b], name, [node(), a, b])

    # A third node joins: it takes only keys of its own.
    {_pc, c} = start_peer(:c)
    start_remote_cluster(c, opts)
    joined = assert_converged([node(), a, b, c], name, [node(), a, b, c])

    for {old, new} <- Enum.zip(before, joined), old != new, do: assert(new == c)

    # One leaves: only its keys move.
    stop_peer(pb)
    left = assert_converged([node(), a, c], name, [node(), a, c])
    for {old, new} <- Enum.zip(joined, left), old != new, do: assert(old == b)

    {lookups, seen} = stop_looper(looper)
    assert lookups > 100
    assert MapSet.subset?(seen, MapSet.new([node(), a, b, c]))

    # Skeleton or ring, the published structure answers like HRW.owner on it.
    structure = HRW.Cluster.structure(name)
    assert %HRW.Skeleton{} = structure
    assert HRW.owner_batch(@keys, structure) == left
  end

  test "rings, filters (functions and regexes) and weights" do
    {_pa, a} = start_peer(:allowed)
    {_pb, b} = start_peer(:blocked)

    # Regexes work on every node: the same filtered owners everywhere.
    deny = [name: :hrw_deny, deny: [~r/^hrw_cl_blocked/], debounce: @debounce, structure: :ring]
    start_supervised!({HRW.Cluster, deny})
    for node <- [a, b], do: start_remote_cluster(node, deny)
    owners = assert_converged([node(), a, b], :hrw_deny, [node(), a])
    assert owners == Enum.map(@keys, &HRW.owner(&1, [node(), a]))
    assert %HRW.Ring{} = HRW.Cluster.structure(:hrw_deny)

    allow = [
      name: :hrw_allow,
      allow: fn n -> n != b end,
      deny: [~r/^nothing/],
      debounce: @debounce
    ]

    start_supervised!(Supervisor.child_spec({HRW.Cluster, allow}, id: :allow))
    assert HRW.Cluster.members(:hrw_allow) == Enum.sort([node(), a])

    allow_regex = [name: :hrw_allow_regex, allow: [~r/^hrw_cl_allowed/, ~r/^hrw_test_/]]
    start_supervised!({HRW.Cluster, allow_regex})
    assert HRW.Cluster.members(:hrw_allow_regex) == Enum.sort([node(), a])

    # Weighted: the structure is built from {node, weight} with %HRW.Weighted{}.
    weight = fn n -> if n == node(), do: 5, else: 1 end

    for structure <- [:ring, :skeleton] do
      wname = :"hrw_weighted_#{structure}"
      start_supervised!({HRW.Cluster, name: wname, weight_fn: weight, structure: structure})
      members = HRW.Cluster.members(wname)
      assert members == Enum.sort([node(), a, b])
      entries = Enum.map(members, &{&1, weight.(&1)})
      assert %{weights: weights} = HRW.Cluster.structure(wname)
      assert Tuple.to_list(weights) == Enum.map(members, weight)

      for key <- @keys do
        assert HRW.Cluster.owner(wname, key) ==
                 HRW.owner(key, entries, scorer: %HRW.Weighted{})
      end

      # The heavy node owns most keys.
      counts = Enum.frequencies_by(1..3_000, &HRW.Cluster.owner(wname, &1))
      assert counts[node()] > counts[a] + counts[b]
    end
  end

  test "regex filters compiled on another node, or read from a binary, still filter" do
    {_pa, a} = start_peer(:rx_allowed)
    {_pb, _b} = start_peer(:rx_blocked)
    # Compiled by the peer: since OTP 28 its compiled pattern runs only in the peer's VM.
    foreign = :erpc.call(a, Regex, :compile!, ["^hrw_cl_rx_blocked", "i"])
    from_binary = :erlang.binary_to_term(:erlang.term_to_binary(~r/^nothing/))

    opts = [name: :hrw_foreign_regex, deny: [foreign, from_binary], allow: [foreign, ~r/./]]
    start_supervised!({HRW.Cluster, opts})

    eventually(fn -> HRW.Cluster.members(:hrw_foreign_regex) == Enum.sort([node(), a]) end, fn ->
      "members: #{inspect(HRW.Cluster.members(:hrw_foreign_regex))}"
    end)

    # And the other way: options built here, the server started on the peer.
    {:ok, _} = start_remote_cluster(a, name: :hrw_sent_regex, deny: [~r/^hrw_cl_rx_blocked/])

    eventually(fn -> length(members_on(a, :hrw_sent_regex)) == 2 end, fn ->
      "members on the peer: #{inspect(members_on(a, :hrw_sent_regex))}"
    end)

    assert members_on(a, :hrw_sent_regex) == Enum.sort([node(), a])
  end

  test "subscribers get each change once; dead subscribers are dropped" do
    name = :hrw_subscribed
    server = start_supervised!({HRW.Cluster, name: name, debounce: @debounce})
    assert :ok = HRW.Cluster.subscribe(name)
    assert :ok = HRW.Cluster.subscribe(name)

    {short_lived, ref} =
      spawn_monitor(fn ->
        HRW.Cluster.subscribe(name)
        receive do: (:exit -> :ok)
      end)

    eventually(fn -> monitors(server) == 2 end, "two distinct subscribers")
    send(short_lived, :exit)
    assert_receive {:DOWN, ^ref, :process, _, :normal}
    eventually(fn -> monitors(server) == 1 end, "the dead subscriber dropped")

    generation = HRW.Cluster.generation(name)
    {peer, a} = start_peer(:sub)
    assert_receive {:hrw_cluster_changed, ^name, old, new}, 10_000
    assert HRW.Skeleton.nodes(old) == [node()]
    assert HRW.Skeleton.nodes(new) == Enum.sort([node(), a])
    moves = HRW.moves(@keys, old, new)
    assert moves != [] and Enum.all?(moves, &match?({_key, _from, ^a}, &1))
    assert_one_change(server, name, generation)

    stop_peer(peer)
    assert_receive {:hrw_cluster_changed, ^name, ^new, later}, 10_000
    assert HRW.Skeleton.nodes(later) == [node()]
    assert Enum.all?(HRW.moves(@keys, new, later), &match?({_key, ^a, _to}, &1))

    assert :ok = HRW.Cluster.unsubscribe(name)
    eventually(fn -> monitors(server) == 0 end, "unsubscribed")
    {_peer, _b} = start_peer(:unsub)
    eventually(fn -> length(HRW.Cluster.members(name)) == 2 end, "the new peer seen")
    # The server sends its changes before it answers: any change would be here now.
    _ = :sys.get_state(server)
    refute_received {:hrw_cluster_changed, _, _, _}
  end

  # After the change from `generation` was received: the server published exactly
  # one generation since, and sent no other change. Synchronous, not a wait: the
  # server sends its changes before it answers `:sys.get_state/1`.
  defp assert_one_change(server, name, generation) do
    _ = :sys.get_state(server)
    assert HRW.Cluster.generation(name) == generation + 1
    refute_received {:hrw_cluster_changed, _, _, _}
  end

  defp monitors(pid) do
    {:monitors, monitors} = Process.info(pid, :monitors)
    length(monitors)
  end

  test ":pg source: members are the nodes of the group's processes; flaps are debounced" do
    scope = :hrw_cluster_test_pg
    start_supervised!(%{id: scope, start: {:pg, :start_link, [scope]}})
    name = :hrw_pg

    server = start_supervised!({HRW.Cluster, name: name, source: {:pg, scope, :workers}})
    polled = [name: :hrw_pg_polled, source: {:pg, scope, :workers}, poll_interval: 20]
    start_supervised!(Supervisor.child_spec({HRW.Cluster, polled}, id: :polled))

    # No member yet.
    assert HRW.Cluster.members(name) == []
    assert HRW.Cluster.structure(name) == nil
    assert HRW.Cluster.owner(name, "k") == nil
    assert HRW.Cluster.owners(name, "k", 2) == []
    assert_raise ArgumentError, ~r/count/, fn -> HRW.Cluster.owners(name, "k", -1) end
    HRW.Cluster.subscribe(name)

    # Join, leave, join within the debounce window: one change. The server is
    # suspended meanwhile, so the three events wait in its mailbox however slow the
    # machine (`:pg.join/3` and `leave/3` notify monitors before they return).
    generation = HRW.Cluster.generation(name)
    worker = spawn_link(fn -> Process.sleep(:infinity) end)
    :ok = :sys.suspend(server)
    :ok = :pg.join(scope, :workers, worker)
    :ok = :pg.leave(scope, :workers, worker)
    :ok = :pg.join(scope, :workers, [worker, self()])
    :ok = :sys.resume(server)
    assert_receive {:hrw_cluster_changed, ^name, nil, first}, 5_000
    assert HRW.Skeleton.nodes(first) == [node()]
    assert_one_change(server, name, generation)
    # A second process on the same node changes nothing.
    assert HRW.Cluster.members(name) == [node()]

    # A process on another node joins, then dies.
    {_peer, a} = start_peer(:pg)
    {:ok, _} = :erpc.call(a, :pg, :start, [scope])
    remote = Node.spawn(a, Process, :sleep, [:infinity])
    :ok = :erpc.call(a, :pg, :join, [scope, :workers, remote])
    assert_receive {:hrw_cluster_changed, ^name, ^first, second}, 5_000
    assert HRW.Skeleton.nodes(second) == Enum.sort([node(), a])
    eventually(fn -> HRW.Cluster.members(:hrw_pg_polled) == Enum.sort([node(), a]) end, "polled")

    Process.exit(remote, :kill)
    assert_receive {:hrw_cluster_changed, ^name, ^second, third}, 5_000
    assert HRW.Skeleton.nodes(third) == [node()]

    # Everyone leaves: no members, lookups answer nil.
    :ok = :pg.leave(scope, :workers, [worker, self()])
    assert_receive {:hrw_cluster_changed, ^name, ^third, nil}, 2_000
    assert HRW.Cluster.owner(name, "k") == nil
  end

  # -- lifecycle and options ----------------------------------------------------------

  test "a cluster stopped with reason :normal erases its entry; its lookups raise ArgumentError" do
    {:ok, pid} = HRW.Cluster.start(name: :hrw_stopped)
    members = HRW.Cluster.members(:hrw_stopped)
    assert node() in members
    assert HRW.Cluster.owner(:hrw_stopped, "k") == HRW.owner("k", members)
    :ok = GenServer.stop(pid)
    refute Process.alive?(pid)

    for call <- [
          fn -> HRW.Cluster.owner(:hrw_stopped, "k") end,
          fn -> HRW.Cluster.owners(:hrw_stopped, "k", 2) end,
          fn -> HRW.Cluster.members(:hrw_stopped) end,
          fn -> HRW.Cluster.structure(:hrw_stopped) end,
          fn -> HRW.Cluster.generation(:hrw_stopped) end,
          fn -> HRW.Cluster.stable_owners(:hrw_stopped, "k", 2) end,
          fn -> HRW.Cluster.subscribe(:hrw_stopped) end,
          fn -> HRW.Cluster.unsubscribe(:hrw_stopped) end
        ] do
      assert_raise ArgumentError, ~r/no HRW.Cluster named :hrw_stopped is running/, call
    end

    assert :persistent_term.get({HRW.Cluster, :hrw_stopped}, :none) == :none
  end

  test "bad options raise ArgumentError; a bad weight at the first evaluation fails the start" do
    for {opts, message} <- [
          {[], ~r/requires a :name/},
          {[name: "x"], ~r/:name must be an atom/},
          {[name: :x, structure: :tree], ~r/:structure/},
          {[name: :x, source: :pg], ~r/:source/},
          {[name: :x, debounce: -1], ~r/:debounce/},
          {[name: :x, allow: [:not_a_regex]], ~r/:allow/},
          {[name: :x, deny: "x"], ~r/:deny/},
          {[name: :x, weight_fn: 1], ~r/:weight_fn/},
          {[name: :x, cluster_size: 0], ~r/cluster_size/},
          {[name: :x, structure: :ring, cluster_size: 8], ~r/cluster_size/},
          {[name: :x, poll_interval: 0], ~r/:poll_interval/},
          {[name: :x, bogus: 1], ~r/unknown options: \[:bogus\]/},
          {[name: :x, debounce: 1, debounce: 2], ~r/duplicated options: \[:debounce\]/},
          {[name: :x, debounce: 2 ** 32], ~r/:debounce must be an integer in 0..4294967295/},
          {[name: :x, depth: 0], ~r/:depth must be an integer in 1..64, got: 0/},
          {[name: :x, depth: 65], ~r/:depth must be an integer in 1..64, got: 65/},
          {[name: :x, depth: :deep], ~r/:depth/},
          {[name: :x, callback_timeout: 0], ~r/:callback_timeout/},
          {[name: :x, cluster_size: :big],
           ~r/:cluster_size must be an integer in 1..4096, got: :big/},
          {[name: String.to_atom(String.duplicate("n", 244))], ~r/at most 243 characters/},
          {[name: nil], ~r/:name must be an atom other than nil/},
          {:not_a_list, ~r/keyword list/}
        ] do
      assert_raise ArgumentError, message, fn -> HRW.Cluster.start_link(opts) end
      assert_raise ArgumentError, message, fn -> HRW.Cluster.child_spec(opts) end
    end

    assert {:error, {:pg_scope_not_started, :hrw_no_scope}} =
             HRW.Cluster.start(name: :hrw_no_scope, source: {:pg, :hrw_no_scope, :g})

    assert {:error, {:evaluation_failed, message}} =
             HRW.Cluster.start(name: :hrw_bad_weight, weight_fn: fn _ -> 0 end)

    assert message =~ ":weight_fn returned 0 for #{inspect(node())}, not a positive number"

    assert_raise ArgumentError, fn -> HRW.Cluster.owner(:hrw_bad_weight, "k") end
  end

  test "errors about huge or deep option values are short" do
    huge = 2 ** 1_000_000
    deep = Enum.reduce(1..100_000, :leaf, &[&1, &2])
    long = String.duplicate("x", 1_000_000)

    for key <- [:debounce, :depth, :cluster_size, :poll_interval, :callback_timeout, :name],
        value <- [huge, -huge, deep, long, {long, long}] do
      opts = Keyword.put([name: :hrw_huge], key, value)
      error = assert_raise ArgumentError, fn -> HRW.Cluster.start_link(opts) end
      assert error.message =~ inspect(key)
      assert byte_size(error.message) < 300, "#{key}: #{byte_size(error.message)} bytes"
    end

    for opts <- [
          [name: :hrw_huge, source: {:pg, long}],
          [name: :hrw_huge, source: huge],
          [name: :hrw_huge, allow: [long, long]],
          [name: :hrw_huge, deny: long],
          [name: :hrw_huge, weight_fn: deep],
          [name: :hrw_huge, structure: huge],
          [{:name, :hrw_huge}, {long, 1}],
          [long]
        ] do
      error = assert_raise ArgumentError, fn -> HRW.Cluster.start_link(opts) end
      assert byte_size(error.message) < 300, "#{byte_size(error.message)} bytes"
    end

    {:ok, pid} = HRW.Cluster.start(name: :hrw_huge, depth: 2)

    for call <- [
          fn -> HRW.Cluster.owner(:hrw_huge, "k", back: huge) end,
          fn -> HRW.Cluster.owners(:hrw_huge, "k", 1, back: -huge) end,
          fn -> HRW.Cluster.owners(:hrw_huge, "k", huge * -1) end,
          fn -> HRW.Cluster.owners(:hrw_huge, "k", untyped(long)) end,
          fn -> HRW.Cluster.stable_owners(:hrw_huge, "k", untyped(deep)) end,
          fn -> HRW.Cluster.members(:hrw_huge, back: untyped(long)) end,
          fn -> HRW.Cluster.structure(:hrw_huge, untyped([{:back, 0}, {:other, long}])) end,
          fn -> HRW.Cluster.owner(:hrw_huge, "k", untyped(long)) end
        ] do
      error = assert_raise ArgumentError, call
      assert byte_size(error.message) < 300, "#{byte_size(error.message)} bytes"
    end

    assert_raise ArgumentError, ~r/beyond the history .* keeps 2 generations \(depth: 2\)/, fn ->
      HRW.Cluster.owner(:hrw_huge, "k", back: huge)
    end

    GenServer.stop(pid)
  end
end
