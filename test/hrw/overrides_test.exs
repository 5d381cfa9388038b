defmodule HRW.OverridesTest do
  use ExUnit.Case, async: true

  import HRW.TestStats

  @phash2 %HRW{hash_fn: &:erlang.phash2/1}
  @weighted %HRW.Weighted{}

  @nodes node_names(40)
  @weighted_nodes Enum.map(@nodes, &{&1, :erlang.phash2(&1, 4) + 1})

  # Pinned keys of every shape: a member, several members, a stranger, a mix, a
  # repeated node, and keys that differ from others only by exact term (1 vs 1.0).
  @overrides %{
    "hot" => "node-3",
    "pair" => ["node-7", "node-2"],
    "away" => :not_a_member,
    "mixed" => [:outside, "node-5", :outside, "node-9"],
    1 => "node-11",
    {:user, 42} => [nil, false]
  }

  # {label, build} for every prepared structure, each built with and without overrides.
  defp builders do
    [
      {"ring", &HRW.Ring.new(@nodes, &1)},
      {"weighted ring", &HRW.Ring.new(@weighted_nodes, [scorer: @weighted] ++ &1)},
      {"skeleton", &HRW.build(@nodes, &1)},
      {"small-leaf skeleton", &HRW.build(@nodes, [cluster_size: 4] ++ &1)},
      {"weighted skeleton", &HRW.build(@weighted_nodes, [scorer: @weighted] ++ &1)},
      {"phash2 skeleton", &HRW.build(@nodes, [scorer: @phash2] ++ &1)}
    ]
  end

  defp structures do
    for {label, build} <- builders() do
      {label, build.([]), build.(overrides: @overrides)}
    end
  end

  defp keys(n) do
    pinned = Map.keys(@overrides)
    plain = Enum.map(1..n//1, &if(rem(&1, 4) == 0, do: {:k, &1}, else: "key-#{&1}"))
    # Pinned keys spread through the list, some twice, plus near misses.
    Enum.shuffle(plain ++ pinned ++ pinned ++ [1.0, {:user, 42.0}, "Hot"])
  end

  # The documented meaning, computed from the structure without overrides.
  defp expected_owners(key, plain, count) do
    case Map.fetch(@overrides, key) do
      :error ->
        HRW.owners(key, plain, count)

      {:ok, value} ->
        pinned = value |> List.wrap() |> Enum.uniq()
        own = HRW.owners(key, plain, count + length(pinned))
        Enum.take(pinned ++ Enum.reject(own, &(&1 in pinned)), count)
    end
  end

  describe "owner and owners" do
    test "an overridden key's owner is its first pinned node; other keys keep theirs" do
      for {label, plain, pinned} <- structures(), key <- keys(300) do
        expected = hd(expected_owners(key, plain, 1))
        assert HRW.owner(key, pinned) === expected, "#{label}, #{inspect(key)}"
      end
    end

    test "owners list the pinned nodes first, then the structure's own owners without them" do
      for {label, plain, pinned} <- structures(),
          key <- keys(100),
          count <- [0, 1, 2, 3, 5, 45] do
        expected = expected_owners(key, plain, count)
        got = HRW.owners(key, pinned, count)
        assert got === expected, "#{label}, #{inspect(key)}, count #{count}"
        assert Enum.uniq(got) == got
      end
    end

    test "the documented examples: order, distinctness, strangers, too few nodes" do
      ring = HRW.Ring.new(["a", "b", "c"], overrides: %{"k" => ["z", "b", "z"], "j" => "a"})
      [own_first | _] = HRW.owners("k", HRW.Ring.new(["a", "c"]), 2)

      assert HRW.owner("k", ring) == "z"
      assert HRW.owners("k", ring, 1) == ["z"]
      assert HRW.owners("k", ring, 2) == ["z", "b"]
      assert HRW.owners("k", ring, 3) == ["z", "b", own_first]
      assert Enum.sort(HRW.owners("k", ring, 10)) == ["a", "b", "c", "z"]
      assert HRW.owners("k", ring, 2 ** 40) |> length() == 4
      assert HRW.owner("j", ring) == "a"
      assert hd(HRW.owners("j", ring, 3)) == "a"
      assert Enum.sort(HRW.owners("j", ring, 3)) == ["a", "b", "c"]
    end

    test "keys match exactly, as map keys: 1 and 1.0 are different keys" do
      for {_label, plain, pinned} <- structures() do
        assert HRW.owner(1, pinned) == "node-11"
        assert HRW.owner(1.0, pinned) == HRW.owner(1.0, plain)
        assert HRW.owner({:user, 42.0}, pinned) == HRW.owner({:user, 42.0}, plain)
        assert HRW.owner({:user, 42}, pinned) == nil
        assert HRW.owners({:user, 42}, pinned, 2) == [nil, false]
      end
    end

    test "a node that is itself a list is pinned by wrapping it" do
      ring = HRW.Ring.new([[1], [2]], overrides: %{"k" => [[2]], "j" => [1, 2]})
      assert HRW.owner("k", ring) == [2]
      assert HRW.owner("j", ring) == 1
      assert HRW.owners("j", ring, 2) == [1, 2]
    end

    test "options given with a structure are still checked" do
      ring = HRW.Ring.new(["a"], overrides: %{"k" => "z"})

      assert_raise ArgumentError, ~r/unknown options/, fn ->
        HRW.owner("k", ring, bogus: 1)
      end
    end
  end

  describe "batches" do
    test "owner_batch equals owner/2 per key, at every batch size" do
      for {label, _plain, pinned} <- structures(), n <- [0, 1, 50, 20_001] do
        keys = keys(n)
        expected = Enum.map(keys, &HRW.owner(&1, pinned))
        assert HRW.owner_batch(keys, pinned) === expected, "#{label}, #{n} keys"
      end
    end

    test "group_by_owner equals grouping by owner/2, groups in key order" do
      for {label, _plain, pinned} <- structures(), n <- [0, 1, 50, 10_000] do
        keys = keys(n)
        expected = Enum.group_by(keys, &HRW.owner(&1, pinned))
        groups = HRW.group_by_owner(keys, pinned)
        assert groups === expected, "#{label}, #{n} keys"
        assert Map.has_key?(groups, :not_a_member)
        assert Map.has_key?(groups, nil)
      end
    end

    test "group_by_owner with overrides equals grouping by owner/2 (seeded random cases)" do
      :rand.seed(:exsss, {14, 1, 2})
      nodes = node_names(8)

      for round <- 1..300 do
        # Few distinct keys, many repeats; pins to members, strangers and both.
        universe = Enum.map(1..12, &"k#{&1}")
        keys = for _ <- 1..:rand.uniform(60), do: Enum.random(universe)

        overrides =
          for key <- Enum.take_random(universe, :rand.uniform(6)), into: %{} do
            {key, Enum.take_random(nodes ++ [:x, :y], :rand.uniform(3))}
          end

        for structure <- [
              HRW.Ring.new(nodes, overrides: overrides),
              HRW.build(nodes, overrides: overrides)
            ] do
          expected = Enum.group_by(keys, &HRW.owner(&1, structure))
          assert HRW.group_by_owner(keys, structure) === expected, "round #{round}"
        end
      end
    end

    test "group_by_owner with no pinned key in the batch equals the plain structure's" do
      keys = Enum.map(1..500, &"other-#{&1}")

      for {label, plain, pinned} <- structures() do
        assert HRW.group_by_owner(keys, pinned) == HRW.group_by_owner(keys, plain), label
      end
    end

    test "moves honour both sides' overrides" do
      keys = keys(3000)
      grown = ["node-new" | @nodes]

      pairs = [
        {HRW.Ring.new(@nodes), HRW.Ring.new(@nodes, overrides: @overrides)},
        {HRW.Ring.new(@nodes, overrides: @overrides), HRW.Ring.new(grown)},
        {HRW.Ring.new(@nodes, overrides: @overrides),
         HRW.Ring.new(grown, overrides: %{"hot" => "node-3", "pair" => "node-new"})},
        {HRW.build(@nodes, overrides: @overrides), HRW.build(grown, overrides: @overrides)},
        {HRW.build(@nodes, overrides: @overrides), HRW.Ring.new(@nodes)},
        {HRW.build(@nodes, scorer: @phash2, overrides: @overrides), HRW.build(@nodes)},
        {@nodes, HRW.build(@nodes, overrides: @overrides)}
      ]

      for {before, later} <- pairs do
        expected =
          for key <- keys,
              {from, to} = {HRW.owner(key, before), HRW.owner(key, later)},
              from !== to,
              do: {key, from, to}

        assert HRW.moves(keys, before, later) === expected
        assert HRW.moved_fraction(keys, before, later) == length(expected) / length(keys)
      end

      # The same overrides on both sides move none of their keys.
      assert HRW.moves(
               Map.keys(@overrides),
               HRW.build(@nodes, overrides: @overrides),
               HRW.build(grown, overrides: @overrides)
             ) == []
    end
  end

  describe "the structure" do
    test "overrides survive term_to_binary round trips and stale resources" do
      # Built in a process that exits, so the binary's resources are gone here.
      bin =
        Task.async(fn ->
          :erlang.term_to_binary(
            {HRW.Ring.new(@nodes, overrides: @overrides),
             HRW.build(@nodes, overrides: @overrides)}
          )
        end)
        |> Task.await()

      :erlang.garbage_collect()
      {ring, skeleton} = :erlang.binary_to_term(bin)
      keys = keys(200)

      for structure <- [ring, skeleton] do
        assert HRW.owner("away", structure) == :not_a_member
        assert HRW.owners("pair", structure, 2) == ["node-7", "node-2"]
        expected = Enum.map(keys, &HRW.owner(&1, structure))
        assert HRW.owner_batch(keys, structure) == expected

        assert HRW.group_by_owner(keys, structure) ==
                 Enum.group_by(keys, &HRW.owner(&1, structure))
      end

      assert HRW.Ring.overrides(ring) ==
               HRW.Ring.overrides(HRW.Ring.new(["x"], overrides: @overrides))
    end

    test "the accessor returns the normalized map; no overrides is %{}" do
      ring = HRW.Ring.new(@nodes, overrides: @overrides)
      skeleton = HRW.build(@nodes, overrides: @overrides)

      expected = %{
        "hot" => ["node-3"],
        "pair" => ["node-7", "node-2"],
        "away" => [:not_a_member],
        "mixed" => [:outside, "node-5", "node-9"],
        1 => ["node-11"],
        {:user, 42} => [nil, false]
      }

      assert HRW.Ring.overrides(ring) == expected
      assert HRW.Skeleton.overrides(skeleton) == expected
      assert HRW.Ring.overrides(HRW.Ring.new(@nodes)) == %{}
      assert HRW.Skeleton.overrides(HRW.build(@nodes, overrides: %{})) == %{}
      assert HRW.Skeleton.overrides(HRW.build(@nodes, overrides: nil)) == %{}

      # Rebuilding from the accessor gives the same structure.
      again = HRW.Ring.new(HRW.Ring.nodes(ring), overrides: HRW.Ring.overrides(ring))
      assert again.overrides == ring.overrides
    end

    test "Inspect mentions the overrides, and only when there are some" do
      assert inspect(HRW.Ring.new(["a"], overrides: %{"k" => "b", "j" => "a"})) ==
               "#HRW.Ring<1 node, overrides: 2>"

      assert inspect(HRW.Ring.new([{"a", 2}], scorer: @weighted, overrides: %{"k" => "b"})) ==
               "#HRW.Ring<1 node, weighted, overrides: 1>"

      assert inspect(HRW.build(["a", "b"], overrides: %{"k" => "b"})) ==
               "#HRW.Skeleton<2 nodes, cluster_size: 16, scorer: %HRW{hash_fn: nil}, overrides: 1>"

      assert inspect(HRW.Ring.new(["a"], overrides: %{})) == "#HRW.Ring<1 node>"
    end

    test "a structure without overrides is the structure it always was" do
      ring = HRW.Ring.new(@nodes, overrides: %{})
      assert ring.overrides == nil
      assert %{ring | resource: nil} == %{HRW.Ring.new(@nodes) | resource: nil}
      assert HRW.build(@nodes, overrides: %{}).overrides == nil
    end
  end

  describe "bad options raise ArgumentError" do
    @bad [
      {:not_a_map, ~r/must be a map of key => node/},
      {[{"k", "a"}], ~r/must be a map of key => node/},
      {%URI{}, ~r/must be a map of key => node/},
      {%{"k" => []}, ~r/node list for key "k" is empty/},
      {%{"k" => ["a" | "b"]}, ~r/nodes for key "k" must be a proper list/}
    ]

    test "for rings and skeletons" do
      for {value, message} <- @bad,
          {caller, build} <- [
            {"HRW.Ring.new/2", &HRW.Ring.new(["a"], overrides: &1)},
            {"HRW.build/2", &HRW.build(["a"], overrides: &1)},
            {"HRW.build/2", &HRW.build(["a"], scorer: @phash2, overrides: &1)}
          ] do
        error = assert_raise ArgumentError, message, fn -> build.(value) end
        assert error.message =~ caller
      end
    end

    test "huge values are shown briefly" do
      huge = Map.new(1..100_000, &{&1, [&1]}) |> Map.put(:bad, [])
      error = assert_raise ArgumentError, fn -> HRW.Ring.new(["a"], overrides: huge) end
      assert byte_size(error.message) < 300

      error =
        assert_raise ArgumentError, fn ->
          HRW.Ring.new(["a"], overrides: Enum.to_list(1..100_000))
        end

      assert byte_size(error.message) < 300
    end

    test "a duplicated :overrides option" do
      assert_raise ArgumentError, ~r/duplicated options: \[:overrides\]/, fn ->
        HRW.Ring.new(["a"], overrides: %{}, overrides: %{"k" => "a"})
      end
    end

    test "an :overrides field changed by hand" do
      ring = %{HRW.Ring.new(["a"]) | overrides: :junk}
      skeleton = %{HRW.build(["a"]) | overrides: %{"k" => :not_a_list}}

      for call <- [
            fn -> HRW.owner("k", ring) end,
            fn -> HRW.owners("k", ring, 2) end,
            fn -> HRW.owner_batch(["k"], ring) end,
            fn -> HRW.owner("k", skeleton) end,
            fn -> HRW.owner_batch(["k"], skeleton) end,
            fn -> HRW.group_by_owner(["k"], skeleton) end
          ] do
        assert_raise ArgumentError, ~r/overrides field was changed by hand/, call
      end
    end
  end
end

defmodule HRW.OverridesDistributionTest do
  # Starts Erlang distribution and a peer node on loopback: not async.
  use ExUnit.Case, async: false

  import HRW.TestStats

  setup_all do
    HRW.TestPeers.distributed!()
    {_peer, node} = HRW.TestPeers.start_peer(:hrw_ov_peer, :main)
    {:ok, node: node}
  end

  test "overrides travel with the structure to another node", %{node: node} do
    nodes = node_names(100)
    overrides = %{"hot" => "elsewhere", "pair" => ["node-9", "node-1"]}
    keys = ["hot", "pair" | Enum.map(1..100, &"key-#{&1}")]

    for structure <- [
          HRW.Ring.new(nodes, overrides: overrides),
          HRW.build(nodes, overrides: overrides)
        ] do
      local = Enum.map(keys, &HRW.owner(&1, structure))
      assert :erpc.call(node, HRW, :owner_batch, [keys, structure]) == local
      assert :erpc.call(node, HRW, :owner, ["hot", structure]) == "elsewhere"

      assert :erpc.call(node, HRW, :owners, ["pair", structure, 3]) ==
               HRW.owners("pair", structure, 3)
    end
  end
end
