defmodule HRW.ClusterOverridesTest do
  # Starts Erlang distribution and peer nodes on loopback: not async.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  @debounce 30
  @keys Enum.map(1..200, &"key-#{&1}")
  @outsider :outsider@nowhere

  setup_all do
    HRW.TestPeers.distributed!()
  end

  defp start_peer(tag), do: HRW.TestPeers.start_peer(:hrw_ov, tag)
  defp stop_peer(peer), do: HRW.TestPeers.stop_peer(peer)

  import HRW.TestPeers, only: [eventually: 2]

  # Looks "hot" and plain keys up in a loop; counts lookups that raise or answer nil.
  defp start_lookups(name) do
    parent = self()

    spawn_monitor(fn ->
      loop = fn loop, n, failures ->
        receive do
          :stop -> send(parent, {:lookups, n, failures})
        after
          0 ->
            ok? =
              try do
                HRW.Cluster.owner(name, "hot") != nil and
                  HRW.Cluster.owner(name, {:key, n}) != nil and
                  HRW.Cluster.stable_owners(name, "hot", 1) != []
              rescue
                _ -> false
              end

            loop.(loop, n + 1, if(ok?, do: failures, else: failures + 1))
        end
      end

      loop.(loop, 0, 0)
    end)
  end

  defp stop_lookups({pid, ref}) do
    send(pid, :stop)
    assert_receive {:lookups, n, failures}, 10_000
    assert_receive {:DOWN, ^ref, :process, ^pid, :normal}
    assert failures == 0, "#{failures} of #{n} lookups failed"
    assert n > 0
  end

  # What the module doc promises for a key pinned to `pinned`, on `structure`'s members.
  defp expected(key, pinned, structure, count) do
    own = HRW.owners(key, Tuple.to_list(structure.nodes), count + length(pinned))
    Enum.take(pinned ++ Enum.reject(own, &(&1 in pinned)), count)
  end

  test "overrides: pinned owners in every generation, put_overrides republishes, " <>
         "history answers with the overrides of its time, a takeover keeps them" do
    {_pa, a} = start_peer(:a)
    {pb, b} = start_peer(:b)
    name = :hrw_overridden

    opts = [
      name: name,
      depth: 3,
      debounce: @debounce,
      overrides: %{"hot" => [b, @outsider, b], {:user, 1} => a}
    ]

    start_supervised!({HRW.Cluster, opts})
    :ok = HRW.Cluster.subscribe(name)
    lookups = start_lookups(name)

    # Generation 1: the option's overrides; the outsider is no member.
    first = HRW.Cluster.structure(name)
    assert HRW.Cluster.members(name) == Enum.sort([node(), a, b])
    assert HRW.Cluster.owner(name, "hot") == b
    assert HRW.Cluster.owners(name, "hot", 3) == expected("hot", [b, @outsider], first, 3)
    assert HRW.Cluster.owner(name, {:user, 1}) == a
    assert HRW.Skeleton.overrides(first) == %{"hot" => [b, @outsider], {:user, 1} => [a]}

    for key <- @keys do
      assert HRW.Cluster.owner(name, key) == HRW.owner(key, HRW.Cluster.members(name))
    end

    # put_overrides publishes before it returns.
    assert :ok = HRW.Cluster.put_overrides(name, %{"hot" => node()})
    assert HRW.Cluster.generation(name) == 2
    assert_received {:hrw_cluster_changed, ^name, ^first, second}
    assert HRW.Cluster.structure(name) == second
    assert HRW.Skeleton.overrides(second) == %{"hot" => [node()]}
    assert HRW.Cluster.owner(name, "hot") == node()

    assert HRW.Cluster.owner(name, {:user, 1}) ==
             HRW.owner({:user, 1}, second.nodes |> Tuple.to_list())

    assert HRW.Cluster.owner(name, "hot", back: 1) == b

    assert HRW.owner_batch(["hot", {:user, 1}], second) == [
             node(),
             HRW.Cluster.owner(name, {:user, 1})
           ]

    assert HRW.group_by_owner(["hot"], second) == %{node() => ["hot"]}
    assert HRW.moves(["hot"], first, second) == [{"hot", b, node()}]

    # The same overrides again: nothing published.
    assert :ok = HRW.Cluster.put_overrides(name, %{"hot" => [node()]})
    assert HRW.Cluster.generation(name) == 2
    refute_received {:hrw_cluster_changed, _, _, _}

    # A membership change keeps the current overrides.
    stop_peer(pb)
    assert_receive {:hrw_cluster_changed, ^name, ^second, third}, 15_000
    assert HRW.Cluster.generation(name) == 3
    assert HRW.Cluster.members(name) == Enum.sort([node(), a])
    assert HRW.Cluster.owner(name, "hot") == node()
    assert HRW.Cluster.owner(name, "hot", back: 2) == b
    assert HRW.Cluster.stable_owners(name, "hot", 1) == [node(), b]

    assert HRW.Cluster.stable_owners(name, "hot", 2) ==
             Enum.uniq(
               HRW.owners("hot", third, 2) ++
                 HRW.owners("hot", second, 2) ++ HRW.owners("hot", first, 2)
             )

    # A crash and restart: the new server keeps the overrides that were put.
    server = GenServer.whereis(:"HRW.Cluster:#{name}")

    capture_log(fn ->
      :ok = :sys.terminate(server, :crash)

      eventually(
        fn -> GenServer.whereis(:"HRW.Cluster:#{name}") not in [nil, server] end,
        "a restarted server"
      )
    end)

    assert HRW.Cluster.generation(name) == 3
    assert HRW.Cluster.owner(name, "hot") == node()

    # A server started with another :overrides option applies its option.
    :ok = stop_supervised({HRW.Cluster, name})
    start_supervised!({HRW.Cluster, Keyword.put(opts, :overrides, %{"hot" => a})})
    assert HRW.Cluster.generation(name) == 4
    assert HRW.Cluster.owner(name, "hot") == a
    assert HRW.Cluster.owner(name, "hot", back: 1) == node()

    # %{} removes them.
    assert :ok = HRW.Cluster.put_overrides(name, %{})
    assert HRW.Cluster.generation(name) == 5
    assert HRW.Skeleton.overrides(HRW.Cluster.structure(name)) == %{}
    assert HRW.Cluster.owner(name, "hot") == HRW.owner("hot", HRW.Cluster.members(name))

    stop_lookups(lookups)
  end

  test "put_overrides during an evaluation wins over the evaluation's older overrides" do
    {_pa, a} = start_peer(:a)
    hold = :atomics.new(2, [])
    local = node()

    # The weight function blocks for nodes other than `local` and `a` while held.
    weight_fn = fn node ->
      if node not in [local, a] do
        :atomics.add(hold, 2, 1)

        wait = fn wait ->
          if :atomics.get(hold, 1) == 1 do
            Process.sleep(10)
            wait.(wait)
          end
        end

        wait.(wait)
      end

      1
    end

    name = :hrw_overrides_race

    start_supervised!(
      {HRW.Cluster,
       name: name, structure: :ring, weight_fn: weight_fn, overrides: %{"hot" => local}}
    )

    assert HRW.Cluster.owner(name, "hot") == local
    :atomics.put(hold, 1, 1)
    {_pc, c} = start_peer(:c)
    eventually(fn -> :atomics.get(hold, 2) >= 1 end, "an evaluation in progress")

    # The server answers while the evaluation runs, and publishes at once.
    assert :ok = HRW.Cluster.put_overrides(name, %{"hot" => a})
    assert HRW.Cluster.owner(name, "hot") == a
    assert HRW.Cluster.members(name) == Enum.sort([local, a])

    :atomics.put(hold, 1, 0)
    eventually(fn -> c in HRW.Cluster.members(name) end, "c joins")
    assert HRW.Cluster.owner(name, "hot") == a
    assert HRW.Ring.overrides(HRW.Cluster.structure(name)) == %{"hot" => [a]}
  end

  # Whether `pid` calls HRW.Skeleton.build/2 while `fun` runs (call tracing).
  defp builds_in?(pid, fun) do
    :erlang.trace_pattern({HRW.Skeleton, :build, 2}, true, [:global])
    1 = :erlang.trace(pid, true, [:call])

    try do
      fun.()
      ref = :erlang.trace_delivered(pid)
      assert_receive {:trace_delivered, ^pid, ^ref}, 5_000
    after
      :erlang.trace(pid, false, [:call])
      :erlang.trace_pattern({HRW.Skeleton, :build, 2}, false, [:global])
    end

    receive do
      {:trace, ^pid, :call, {HRW.Skeleton, :build, _}} -> true
    after
      0 -> false
    end
  end

  test "put_overrides builds in an evaluation process, never in the server" do
    name = :ov_build_outside
    pid = start_supervised!({HRW.Cluster, name: name})

    refute builds_in?(pid, fn ->
             :ok = HRW.Cluster.put_overrides(name, %{"hot" => @outsider})
           end)

    assert HRW.Cluster.owner(name, "hot") == @outsider

    # The same check sees a build in the process that runs one.
    me = self()

    builder =
      spawn(fn ->
        receive(do: (:go -> send(me, {:built, HRW.build([:a])})))
        receive(do: (:stop -> :ok))
      end)

    assert builds_in?(builder, fn ->
             send(builder, :go)
             assert_receive {:built, %HRW.Skeleton{}}, 5_000
           end)

    send(builder, :stop)
  end

  test "put_overrides without members, bad overrides, and no server" do
    name = :hrw_overrides_empty
    start_supervised!({HRW.Cluster, name: name, deny: [~r/.*/], depth: 2})
    assert :ok = HRW.Cluster.put_overrides(name, %{"hot" => :x@y})
    assert HRW.Cluster.generation(name) == 1
    assert HRW.Cluster.owner(name, "hot") == nil

    long = String.duplicate("x", 1_000_000)

    for bad <- [:x, [1], %{"k" => []}, %{long => []}, MapSet.new([1]), long] do
      for call <- [
            fn -> HRW.Cluster.put_overrides(name, bad) end,
            fn -> HRW.Cluster.start_link(name: :hrw_bad_overrides, overrides: bad) end
          ] do
        error = assert_raise ArgumentError, ~r/:overrides/, call
        assert byte_size(error.message) < 300
      end
    end

    assert_raise ArgumentError, ~r/no HRW.Cluster named :hrw_nowhere is running/, fn ->
      HRW.Cluster.put_overrides(:hrw_nowhere, %{})
    end
  end
end
