defmodule ShardedStoreRestartTest do
  # The store on real :peer nodes: a member killed (SIGKILL) and restarted empty
  # under the same name, with and without a lease; how long a killed member's
  # keys keep one copy; the refusal of a key whose two owners left outliving the
  # members that saw it; two writers of one version; forged messages. Every wait is a poll with a deadline far above its
  # usual time; no figure is asserted. SHARDED_STORE_REPORT=1 prints the figures.
  use ExUnit.Case, async: false

  alias HRW.Cluster.Fingerprint

  @keys for i <- 1..300, do: "key-#{i}"

  defp deadline, do: HRW.TestTimeouts.ms(120_000)

  defp rpc(node, m, f, a, timeout \\ 60_000), do: :erpc.call(node, m, f, a, timeout)

  defp join(name, live, opts) do
    {_peer, node} = ShardedStore.TestPeer.start(name)
    for other <- live, do: true = rpc(node, :net_kernel, :connect_node, [other])
    {:ok, _} = rpc(node, ShardedStore, :start, [opts])
    node
  end

  defp names,
    do: for(i <- 1..5, do: :"ssr_#{System.pid()}_#{System.unique_integer([:positive])}_#{i}")

  defp cluster(opts) do
    nodes = Enum.reduce(names(), [], fn name, nodes -> nodes ++ [join(name, nodes, opts)] end)

    on_exit(fn -> for node <- nodes, do: sigkill(node) end)
    settle(nodes)
    nodes
  end

  defp sigkill(node) do
    os_pid = rpc(node, :os, :getpid, [], 5_000)
    {_, 0} = System.cmd("kill", ["-9", to_string(os_pid)])
    until(fn -> node not in Node.list(:hidden) and node not in Node.list() end, "#{node} down")
  catch
    _, _ -> :ok
  end

  defp until(check, what, started \\ System.monotonic_time(:millisecond)) do
    cond do
      check.() ->
        System.monotonic_time(:millisecond) - started

      System.monotonic_time(:millisecond) - started > deadline() ->
        flunk("timed out waiting: #{what}")

      true ->
        Process.sleep(10)
        until(check, what, started)
    end
  end

  defp quorum?(node) do
    rpc(node, HRW.Cluster, :snapshot, [ShardedStore.cluster()], 10_000).quorum?
  catch
    _, _ -> false
  end

  defp status(node) do
    rpc(node, ShardedStore, :status, [], 10_000)
  catch
    _, _ -> :no_answer
  end

  # Every node has processed exactly `nodes`, pushed everything and (a new
  # replica) heard from every member, and its cluster has its quorum (a restarted
  # server with a lease counts from the first heartbeats answered).
  defp settle(nodes) do
    expected = Fingerprint.of(nodes)

    until(
      fn ->
        Enum.all?(nodes, &(match?({^expected, 0, _}, status(&1)) and quorum?(&1))) or
          ShardedStore.TestPeer.mend([nodes])
      end,
      "agreement on #{inspect(nodes)}"
    )
  end

  defp held(node) do
    rpc(node, :sys, :get_state, [ShardedStore.Replica]).machine.data
  catch
    _, _ -> %{}
  end

  defp owners(node, key), do: rpc(node, HRW.Cluster, :owners, [ShardedStore.cluster(), key, 2])

  # Each write retried with the same version until acknowledged, as a client
  # does: a view being published (a lease's quorum, say) refuses a write.
  defp write_all(nodes, version) do
    for key <- @keys do
      put = fn -> rpc(Enum.random(nodes), ShardedStore, :put, [key, version, {key, version}]) end
      until(fn -> put.() == :ok end, "#{key} acknowledged")
    end
  end

  defp report(line), do: ShardedStore.TestReport.print(line)

  # The keys `victim` owns and, for each, whether two of `survivors` hold it.
  defp copies(victim_keys, survivors) do
    data = Map.new(survivors, &{&1, held(&1)})

    Enum.count(victim_keys, fn key -> Enum.count(survivors, &Map.has_key?(data[&1], key)) >= 2 end)
  end

  for lease <- [3_000, nil] do
    @tag timeout: 600_000
    test "a member killed and restarted empty under the same name (lease: " <>
           "#{inspect(lease)}) gets its keys back; the other owner killed next loses nothing" do
      opts = [expected: 5, lease: unquote(lease)]
      nodes = cluster(opts)
      write_all(nodes, 1)
      [d | rest] = nodes
      mine = Enum.filter(@keys, &(d in owners(hd(rest), &1)))
      name = d |> to_string() |> String.split("@") |> hd() |> String.to_atom()
      sigkill(d)
      ^d = join(name, rest, opts)
      settle(nodes)
      held = held(d)

      report(
        "restarted #{d}: holds #{Enum.count(mine, &Map.has_key?(held, &1))} of its #{length(mine)} keys"
      )

      assert Enum.all?(mine, &Map.has_key?(held, &1))

      # Another owner of some of d's keys, killed once settled: d holds them.
      a = Enum.find(rest, fn a -> Enum.any?(mine, &(a in owners(d, &1))) end)
      assert a != nil
      survivors = nodes -- [a]
      sigkill(a)
      settle(survivors)
      read = rpc(d, ShardedStore, :get_many, [@keys], 120_000)
      lost = for key <- @keys, read[key] != {:ok, {1, {key, 1}}}, do: {key, read[key]}
      assert lost == []
    end
  end

  @tag timeout: 600_000
  test "the replica alone killed and started again (faster than the view's debounce) " <>
         "gets its keys back" do
    nodes = cluster(expected: 5)
    write_all(nodes, 1)
    [d | rest] = nodes
    mine = Enum.filter(@keys, &(d in owners(hd(rest), &1)))

    old = rpc(d, Process, :whereis, [ShardedStore.Replica])
    true = rpc(d, Process, :exit, [old, :kill])

    until(
      fn -> match?({:ok, _}, rpc(d, ShardedStore.Replica, :start, [5_000])) end,
      "a new replica on #{d}"
    )

    settle(nodes)
    held = held(d)
    assert Enum.all?(mine, &Map.has_key?(held, &1))
  end

  for lease <- [3_000, nil] do
    @tag timeout: 600_000
    test "after a kill (lease: #{inspect(lease)}) every key has two copies again " <>
           "before the view drops the killed member" do
      nodes = cluster(expected: 5, lease: unquote(lease))
      write_all(nodes, 1)
      [d | survivors] = nodes
      mine = Enum.filter(@keys, &(d in owners(hd(survivors), &1)))
      killed = System.monotonic_time(:microsecond)
      sigkill(d)

      # Polled every 10 ms: the last key's second copy, and whether every
      # survivor's view still held d then.
      until(fn -> copies(mine, survivors) == length(mine) end, "two copies of #{d}'s keys")
      restored = System.monotonic_time(:microsecond)

      still_named =
        Enum.count(
          survivors,
          &(d in rpc(&1, HRW.Cluster, :snapshot, [ShardedStore.cluster()]).members)
        )

      settle(survivors)
      dropped = System.monotonic_time(:microsecond)

      report(
        "lease #{inspect(unquote(lease))}: #{length(mine)} keys of the killed node at two copies " <>
          "#{div(restored - killed, 1000)} ms after the kill (polled every 10 ms), " <>
          "#{still_named} of 4 views still naming it then; views settled " <>
          "#{div(dropped - killed, 1000)} ms after the kill"
      )

      # With a lease the views keep the killed member for about the lease (3 s):
      # the copies are back before that, not after.
      if unquote(lease), do: assert(still_named == length(survivors))
    end
  end

  @tag timeout: 600_000
  test "both owners of a key killed at once, three members join and the three " <>
         "that saw it leave, one at a time: reads of the key still refuse, never :not_found" do
    opts = [expected: 5, forget: 600_000]
    nodes = cluster(opts)
    write_all(nodes, 1)
    [c | _] = nodes

    {a, b} =
      Enum.find_value(@keys, fn key ->
        case owners(c, key) do
          [x, y] when c not in [x, y] -> {x, y}
          _ -> nil
        end
      end)

    both = Enum.filter(@keys, &(Enum.sort(owners(c, &1)) == Enum.sort([a, b])))
    # The two owners at once: a double failure, their keys are gone with them.
    for node <- [a, b], do: spawn(fn -> sigkill(node) end)
    until(fn -> a not in Node.list(:hidden) and b not in Node.list(:hidden) end, "the kills")
    saw = nodes -- [a, b]
    settle(saw)

    joined =
      Enum.reduce(names() |> Enum.take(3), [], fn name, joined ->
        node = join(name, saw ++ joined, opts)
        on_exit(fn -> sigkill(node) end)
        settle(saw ++ joined ++ [node])
        joined ++ [node]
      end)

    Enum.reduce(saw, saw ++ joined, fn old, live ->
      sigkill(old)
      settle(live -- [old])
      live -- [old]
    end)

    for key <- both, node <- joined do
      assert rpc(node, ShardedStore, :get, [key]) == {:error, :unavailable}
      assert rpc(node, ShardedStore, :put, [key, 1, :again]) == {:error, :unavailable}
    end
  end

  @tag timeout: 600_000
  test "two writers of one version, 1 and 1.0, at once from two nodes: the integer " <>
         "write is :ok, the float one :ok or told the conflict, and every key ends at {1, 1}" do
    nodes = cluster(expected: 5)
    [a, b | _] = nodes

    writer = fn node, value ->
      Task.async(fn ->
        for key <- @keys, do: {key, rpc(node, ShardedStore, :put, [key, 1, value])}
      end)
    end

    [ints, floats] = Task.await_many([writer.(a, 1), writer.(b, 1.0)], deadline())

    assert Enum.all?(ints, &match?({_, :ok}, &1)),
           inspect(Enum.reject(ints, &match?({_, :ok}, &1)))

    assert Enum.all?(floats, fn {_, result} -> result in [:ok, {:error, {:conflict, 1}}] end)
    both_ok = Enum.count(floats, &match?({_, :ok}, &1))
    report("1 and 1.0 at once: the float write :ok on #{both_ok} of #{length(@keys)} keys too")
    read = rpc(hd(nodes), ShardedStore, :get_many, [@keys], 120_000)
    assert Enum.all?(@keys, &(read[&1] === {:ok, {1, 1}}))
  end

  @tag timeout: 600_000
  test "forged messages of every shape leave the replica running and its data whole" do
    nodes = cluster(expected: 5)
    write_all(nodes, 1)
    [node | _] = nodes
    replica = rpc(node, Process, :whereis, [ShardedStore.Replica])
    before = held(node)

    junk = [
      {:hrw_cluster_snapshot, :sharded_store, nil, :junk},
      {:hrw_cluster_snapshot, :sharded_store, :junk, %{members: [:x@y]}},
      {:handoff_ack, make_ref(), "node"},
      {:sync, :nobody, make_ref()},
      {:sync, {node(), self()}, make_ref()},
      {:sync_reply, {:x@y, self()}, make_ref(), 0, %{"key-1" => {99, :forged}}, []},
      {:sync_reply, :junk, :junk, :junk, :junk, :junk},
      {:DOWN, make_ref(), :process, self(), :normal},
      {:"$gen_cast", {:handoff, :nobody, make_ref(), :junk}},
      {:"$gen_cast", :junk},
      {:"$gen_call", :junk, :status},
      {:"$gen_call", {self(), [:alias | :junk]}, :status},
      {:"$gen_call", {:junk, make_ref()}, {:read, "key-1"}},
      {:system, :junk, :get_state},
      {:system, {self(), make_ref()}, {:debug, :junk}},
      {:system, {self(), make_ref()}, {:replace_state, :junk}},
      :retry,
      :junk
    ]

    for message <- junk, do: send(replica, message)
    assert {_, 0, _} = status(node)
    assert rpc(node, Process, :whereis, [ShardedStore.Replica]) == replica
    assert held(node) == before
    assert rpc(node, ShardedStore, :get, ["key-1"]) == {:ok, {1, {"key-1", 1}}}
  end
end
