defmodule HRW.ClusterHistoryTest do
  # Starts Erlang distribution and peer nodes on loopback: not async.
  use ExUnit.Case, async: false
  import HRW.TestValues, only: [untyped: 1]

  @debounce 30
  @keys Enum.map(1..300, &"key-#{&1}")

  setup_all do
    HRW.TestPeers.distributed!()
  end

  defp start_peer(tag), do: HRW.TestPeers.start_peer(:hrw_hi, tag)
  defp stop_peer(peer), do: HRW.TestPeers.stop_peer(peer)

  defp owners_on(nil, _key, _count), do: []
  defp owners_on(structure, key, count), do: HRW.owners(key, structure, count)

  # Waits for the next published change and records it as generation `generation`.
  defp next_generation(name, published, generation) do
    previous = Map.fetch!(published, generation - 1)
    assert_receive {:hrw_cluster_changed, ^name, ^previous, new}, 15_000
    assert HRW.Cluster.generation(name) == generation
    Map.put(published, generation, new)
  end

  # Every lookup of every kept generation answers as the structure published then.
  defp assert_history(name, published, generation, depth) do
    assert HRW.Cluster.generation(name) == generation

    for back <- 0..(depth - 1) do
      # Generations before the first are empty.
      then = Map.get(published, generation - back)
      assert HRW.Cluster.structure(name, back: back) == then

      assert HRW.Cluster.members(name, back: back) ==
               if(then, do: Tuple.to_list(then.nodes), else: [])

      for key <- @keys do
        assert HRW.Cluster.owner(name, key, back: back) == if(then, do: HRW.owner(key, then))
        assert HRW.Cluster.owners(name, key, 2, back: back) == owners_on(then, key, 2)
      end
    end

    for key <- @keys, count <- [0, 1, 2] do
      union =
        0..(depth - 1)
        |> Enum.flat_map(&owners_on(Map.get(published, generation - &1), key, count))
        |> Enum.uniq()

      assert HRW.Cluster.stable_owners(name, key, count) == union
    end

    assert_raise ArgumentError, ~r/keeps #{depth} generations \(depth: #{depth}\)/, fn ->
      HRW.Cluster.owner(name, "k", back: depth)
    end
  end

  test "history over four membership changes: back: answers as the structure published then, " <>
         "stable_owners is their union in order, one entry per cluster" do
    name = :hrw_history
    depth = 3
    start_supervised!({HRW.Cluster, name: name, depth: depth, debounce: @debounce})
    :ok = HRW.Cluster.subscribe(name)
    published = %{0 => nil, 1 => HRW.Cluster.structure(name)}
    assert Tuple.to_list(published[1].nodes) == [node()]
    assert_history(name, published, 1, depth)

    {pa, a} = start_peer(:a)
    published = next_generation(name, published, 2)
    assert_history(name, published, 2, depth)

    {_pb, b} = start_peer(:b)
    published = next_generation(name, published, 3)
    assert_history(name, published, 3, depth)

    {_pc, c} = start_peer(:c)
    published = next_generation(name, published, 4)
    assert Tuple.to_list(published[4].nodes) == Enum.sort([node(), a, b, c])
    assert_history(name, published, 4, depth)

    # Keys that moved to c are found on c first, then where they were before.
    moved = for {key, from, ^c} <- HRW.moves(@keys, published[3], published[4]), do: {key, from}
    assert moved != []

    for {key, from} <- moved,
        do: assert([^c, ^from | _] = HRW.Cluster.stable_owners(name, key, 1))

    stop_peer(pa)
    published = next_generation(name, published, 5)
    assert Tuple.to_list(published[5].nodes) == Enum.sort([node(), b, c])
    assert_history(name, published, 5, depth)

    # Generation 2 is no longer kept: back: 2 is generation 3.
    assert HRW.Cluster.structure(name, back: 2) == published[3]

    # One :persistent_term entry for the cluster, whatever the depth.
    entries = for {key, _} <- :persistent_term.get(), key == {HRW.Cluster, name}, do: key
    assert length(entries) == 1

    refute_received {:hrw_cluster_changed, _, _, _}
  end

  test "depth 1 (the default) keeps the current generation only" do
    name = :hrw_history_default
    start_supervised!({HRW.Cluster, name: name, debounce: @debounce})
    :ok = HRW.Cluster.subscribe(name)
    first = HRW.Cluster.structure(name)
    {_pa, a} = start_peer(:default)
    assert_receive {:hrw_cluster_changed, ^name, ^first, second}, 15_000
    assert Tuple.to_list(second.nodes) == Enum.sort([node(), a])
    assert HRW.Cluster.generation(name) == 2
    assert HRW.Cluster.structure(name, back: 0) == second

    for key <- @keys do
      assert HRW.Cluster.stable_owners(name, key, 2) == HRW.Cluster.owners(name, key, 2)
    end

    assert_raise ArgumentError,
                 "back: 1 is beyond the history of HRW.Cluster :hrw_history_default, " <>
                   "which keeps 1 generation (depth: 1)",
                 fn -> HRW.Cluster.owner(name, "k", back: 1) end
  end

  test "the depth bounds, and bad lookup options, raise ArgumentError" do
    for depth <- [0, -1, 65, 1.0, :two, nil, 2 ** 1_000_000] do
      error =
        assert_raise ArgumentError, fn -> HRW.Cluster.start_link(name: :hrw_d, depth: depth) end

      assert error.message =~ ":depth must be an integer in 1..64"
      assert byte_size(error.message) < 200
    end

    {:ok, pid} = HRW.Cluster.start(name: :hrw_d, depth: 64)
    assert HRW.Cluster.owner(:hrw_d, "k", back: 63) == nil
    assert_raise ArgumentError, ~r/depth: 64/, fn -> HRW.Cluster.owner(:hrw_d, "k", back: 64) end

    for {call, message} <- [
          {fn -> HRW.Cluster.owner(:hrw_d, "k", back: -1) end, ~r/back must be a non-negative/},
          {fn -> HRW.Cluster.owners(:hrw_d, "k", 1, back: untyped(1.5)) end, ~r/back must be/},
          {fn -> HRW.Cluster.members(:hrw_d, back: untyped(nil)) end, ~r/back must be/},
          {fn -> HRW.Cluster.structure(:hrw_d, untyped(bogus: 1)) end,
           ~r/unknown options: \[:bogus\]/},
          {fn -> HRW.Cluster.owner(:hrw_d, "k", back: 1, back: 2) end, ~r/duplicated options/},
          {fn -> HRW.Cluster.owner(:hrw_d, "k", untyped(:back)) end, ~r/keyword list of options/},
          {fn -> HRW.Cluster.stable_owners(:hrw_d, "k", -1) end, ~r/count must be/},
          {fn -> HRW.Cluster.owners(:hrw_d, "k", untyped(:two)) end, ~r/count must be/}
        ] do
      assert_raise ArgumentError, message, call
    end

    GenServer.stop(pid)
  end
end
