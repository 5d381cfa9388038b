defmodule HRWTest.ReverseScorer do
  @moduledoc false
  @behaviour HRW.Scorer
  defstruct []
  @impl true
  def score(_, _key, node), do: -node
end

defmodule HRWTest do
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent
  doctest HRW
  doctest HRW.Scorer

  import HRW.TestStats

  @fixture Path.expand("fixtures/reference_owners.tsv", __DIR__)

  describe "owner/3 and owners/4 on lists" do
    test "agree with an independent implementation of the spec (docs/reference.py)" do
      cases =
        @fixture
        |> File.read!()
        |> String.split("\n", trim: true)
        |> Enum.map(&String.split(&1, "\t"))

      assert length(cases) == 300

      for [key, nodes, owner, top3] <- cases do
        nodes = String.split(nodes, ",")
        assert HRW.owner(key, nodes) == owner, "owner of #{inspect(key)}"
        assert HRW.owners(key, nodes, 3) == String.split(top3, ",")
      end
    end

    test "owner is the node with the highest HRW.score" do
      nodes = [:a, {:b, 1}, "c", 4, 5.0, [6], %{seven: 7}]

      for i <- 1..200 do
        key = {:key, i}
        expected = Enum.max_by(nodes, &HRW.score(%HRW{}, key, &1))
        assert HRW.owner(key, nodes) == expected
      end
    end

    test "owners are distinct, best first, and the first is the owner" do
      nodes = node_names(20)

      for i <- 1..200 do
        key = "key-#{i}"
        owners = HRW.owners(key, nodes, 5)
        assert length(owners) == 5
        assert Enum.uniq(owners) == owners
        assert hd(owners) == HRW.owner(key, nodes)
        assert HRW.owners(key, nodes, 1) == [HRW.owner(key, nodes)]
        scores = Enum.map(owners, &HRW.score(%HRW{}, key, &1))
        assert scores == Enum.sort(scores, :desc)
      end
    end

    test "a count above the number of distinct nodes returns all of them" do
      nodes = ["a", "b", "c", "b", "a"]
      owners = HRW.owners("k", nodes, 10)
      assert Enum.sort(owners) == ["a", "b", "c"]
      assert HRW.owners("k", nodes, 0) == []
      assert length(HRW.owners("k", nodes, 2 ** 70)) == 3
    end

    test "repeated nodes count once and order does not matter" do
      nodes = node_names(30)

      for i <- 1..200 do
        key = "key-#{i}"
        owner = HRW.owner(key, nodes)
        assert HRW.owner(key, Enum.reverse(nodes) ++ nodes) == owner
        assert HRW.owner(key, Enum.shuffle(nodes)) == owner
        assert HRW.owners(key, nodes ++ nodes, 30) == HRW.owners(key, nodes, 30)
      end
    end

    # 30 keys per node at 1000 nodes in the quick run, 100 in ./scripts/test.
    @keys HRW.TestSize.pick(quick: 30_000, ci: 100_000, long: 100_000)

    test "spreads keys evenly over 10, 100 and 1000 nodes (chi-square, #{@keys} keys)" do
      keys = @keys

      for n <- [10, 100, 1000] do
        nodes = node_names(n)
        counts = Enum.frequencies(for i <- 1..keys, do: HRW.owner("key-#{i}", nodes))
        chi = chi_square(counts, nodes, keys)
        assert chi <= chi_bound(n), "#{n} nodes: chi2 #{chi} > #{chi_bound(n)}"
      end
    end

    test "adding a node moves only the keys the new node wins" do
      nodes = node_names(50)
      grown = nodes ++ ["node-new"]
      keys = for i <- 1..20_000, do: "key-#{i}"

      moved =
        for key <- keys, HRW.owner(key, nodes) != HRW.owner(key, grown) do
          assert HRW.owner(key, grown) == "node-new"
          key
        end

      # About 1/51 of the keys: a sanity check that movement happened at all.
      assert length(moved) in 250..550
    end

    test "long lists run on a dirty scheduler and give the same owner" do
      nodes = node_names(200_000)
      key = "some key"
      expected = Enum.max_by(nodes, &HRW.score(%HRW{}, key, &1))
      assert HRW.owner(key, nodes) == expected
      assert hd(HRW.owners(key, nodes, 3)) == expected
    end
  end

  describe "compatibility with hrw 0.2.1" do
    @phash2 %HRW{hash_fn: &:erlang.phash2/1}

    test "hash_fn: &:erlang.phash2/1 reproduces hrw's documented placements" do
      nodes = ["server1", "server2", "server3"]
      assert HRW.owner("192.168.0.1", nodes, scorer: @phash2) == "server2"
      assert HRW.owners("192.168.0.1", nodes, 2, scorer: @phash2) == ["server2", "server3"]
    end

    test "hash_fn path is hrw's algorithm: first max over sorted, deduplicated nodes" do
      nodes = Enum.shuffle(node_names(40) ++ node_names(10))

      for i <- 1..300 do
        key = {:user, i}
        sorted = nodes |> Enum.sort() |> Enum.dedup()
        expected = Enum.max_by(sorted, &:erlang.phash2({key, &1}))
        assert HRW.owner(key, nodes, scorer: @phash2) == expected

        expected3 = sorted |> Enum.sort_by(&:erlang.phash2({key, &1}), :desc) |> Enum.take(3)
        assert HRW.owners(key, nodes, 3, scorer: @phash2) == expected3
      end
    end

    test "a custom HRW.Scorer module is called for every node" do
      assert HRW.owner(:k, [3, 1, 2], scorer: %HRWTest.ReverseScorer{}) == 1
      assert HRW.owners(:k, [3, 1, 2], 2, scorer: %HRWTest.ReverseScorer{}) == [1, 2]
    end
  end

  describe "bad input raises ArgumentError" do
    test "nodes that are not a non-empty proper list" do
      for nodes <- [[], :nodes, "abc", %{a: 1}, nil] do
        assert_raise ArgumentError, ~r/non-empty list/, fn -> HRW.owner("k", nodes) end
        assert_raise ArgumentError, ~r/non-empty list/, fn -> HRW.owners("k", nodes, 1) end
      end

      for scorer <- [[], [scorer: %HRW{hash_fn: &:erlang.phash2/1}]] do
        assert_raise ArgumentError, ~r/improper list/, fn ->
          HRW.owner("k", [1, 2 | 3], scorer)
        end

        assert_raise ArgumentError, ~r/improper list/, fn ->
          HRW.owners("k", [1 | 2], 1, scorer)
        end
      end
    end

    test "a count that is not a non-negative integer" do
      for count <- [-1, 1.0, :all, nil] do
        assert_raise ArgumentError, ~r/count must be a non-negative integer/, fn ->
          HRW.owners("k", ["a"], count)
        end
      end
    end

    test "unknown options and bad scorers" do
      assert_raise ArgumentError, ~r/unknown options: \[:fanout\]/, fn ->
        HRW.owner("k", ["a"], fanout: 2)
      end

      assert_raise ArgumentError, ~r/keyword list/, fn -> HRW.owner("k", ["a"], [:x]) end

      assert_raise ArgumentError, ~r/arity 1/, fn ->
        HRW.owner("k", ["a"], scorer: %HRW{hash_fn: 1})
      end

      assert_raise ArgumentError, ~r/scorer struct/, fn -> HRW.owner("k", ["a"], scorer: :x) end

      assert_raise ArgumentError, ~r/does not implement/, fn ->
        HRW.owner("k", ["a"], scorer: %URI{})
      end
    end

    # Every public function that takes options, on every kind of target.
    defp option_entry_points do
      ring = HRW.Ring.new(["a", "b"])
      skeleton = HRW.build(["a", "b"])
      phash2_skeleton = HRW.build(["a", "b"], scorer: %HRW{hash_fn: &:erlang.phash2/1})
      targets = [ring, skeleton, phash2_skeleton, ["a", "b"]]

      for(
        target <- targets,
        {name, call} <- [
          {"owner/3", &HRW.owner("k", target, &1)},
          {"owners/4", &HRW.owners("k", target, 2, &1)},
          {"owner_batch/3", &HRW.owner_batch(["k"], target, &1)},
          {"group_by_owner/3", &HRW.group_by_owner(["k"], target, &1)},
          {"moves/4", &HRW.moves(["k"], target, ["a"], &1)},
          {"moves/4 (later)", &HRW.moves(["k"], ["a"], target, &1)},
          {"moved_fraction/4", &HRW.moved_fraction(["k"], target, ["a"], &1)},
          {"moved_fraction/4, no keys", &HRW.moved_fraction([], target, ["a"], &1)}
        ],
        do: {"#{name} on #{inspect(target)}", call, :scorer}
      ) ++
        [
          {"build/2", &HRW.build(["a"], &1), :fanout},
          {"build/2", &HRW.build(["a"], &1), :cluster_size},
          {"build/2", &HRW.build(["a"], &1), :scorer},
          {"build/2", &HRW.build(["a"], &1), :overrides},
          {"Ring.new/2", &HRW.Ring.new(["a"], &1), :scorer},
          {"Ring.new/2", &HRW.Ring.new(["a"], &1), :overrides},
          {"Bounded.assignments/3", &HRW.Bounded.assignments(["k"], ["a"], &1), :epsilon},
          {"Bounded.assignments/3", &HRW.Bounded.assignments(["k"], ["a"], &1), :hash_fn}
        ]
    end

    @valid %{
      scorer: %HRW{},
      fanout: 2,
      cluster_size: 16,
      overrides: %{},
      epsilon: 0.5,
      hash_fn: &:erlang.phash2/1
    }

    test "an option given twice is reported as duplicated, by every function" do
      for {name, call, option} <- option_entry_points() do
        value = Map.fetch!(@valid, option)
        # Once is fine; twice is an error naming the option.
        call.([{option, value}])

        error = assert_raise ArgumentError, fn -> call.([{option, value}, {option, value}]) end
        assert error.message =~ "duplicated options: [#{inspect(option)}]", name
        refute error.message =~ "unknown", name
      end
    end

    test "unknown options are refused by every function, whatever the target" do
      for {name, call, _option} <- option_entry_points() do
        error = assert_raise ArgumentError, fn -> call.(bogus: 1) end
        assert error.message =~ "unknown options: [:bogus]", name
        error = assert_raise ArgumentError, fn -> call.([:not_keyword]) end
        assert error.message =~ "keyword list", name
      end
    end

    test "terms nested too deeply" do
      deep = Enum.reduce(1..300, :leaf, &{&1, &2})
      assert_raise ArgumentError, ~r/nested deeper/, fn -> HRW.owner(deep, ["a"]) end
      assert_raise ArgumentError, ~r/nested deeper/, fn -> HRW.owner("k", [deep]) end
    end
  end
end
