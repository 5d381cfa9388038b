defmodule HRW.WeightedTest do
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent
  doctest HRW.Weighted

  import HRW.TestStats

  @w %HRW.Weighted{}
  @phash %HRW.Weighted{hash_fn: &:erlang.phash2/1}
  @mix [{"a", 1}, {"b", 2}, {"c", 3}, {"d", 10}]

  test "pinned weighted owners (docs/reference.py, the same in Rust)" do
    nodes = @mix ++ [{"e", 0.5}]
    owners = Enum.map_join(1..20, &HRW.owner("key-#{&1}", nodes, scorer: @w))
    assert owners == "ddddddddbdccdedddcdd"
  end

  test "shares within 1% of w/Σw over a million keys, on list, ring and skeleton" do
    keys = Enum.map(1..1_000_000, &"key-#{&1}")
    total = @mix |> Enum.map(&elem(&1, 1)) |> Enum.sum()

    for target <- [@mix, HRW.Ring.new(@mix, scorer: @w), HRW.build(@mix, scorer: @w)] do
      counts = keys |> HRW.owner_batch(target, scorer: @w) |> Enum.frequencies()

      for {node, weight} <- @mix do
        share = counts[node] / length(keys)
        expected = weight / total
        assert abs(share - expected) / expected < 0.01, "#{node}: #{share} vs #{expected}"
      end
    end
  end

  test "a weighted skeleton over many nodes gives each its share" do
    nodes = for i <- 1..2000, do: {"node-#{i}", rem(i, 4) + 1}
    skeleton = HRW.build(nodes, scorer: @w)
    keys = Enum.map(1..400_000, &"key-#{&1}")
    counts = keys |> HRW.owner_batch(skeleton) |> Enum.frequencies()

    by_weight =
      Enum.group_by(nodes, &elem(&1, 1), &Map.get(counts, elem(&1, 0), 0))
      |> Map.new(fn {w, c} -> {w, Enum.sum(c) / length(keys)} end)

    total = nodes |> Enum.map(&elem(&1, 1)) |> Enum.sum()

    for {w, share} <- by_weight do
      expected = w * 500 / total
      assert abs(share - expected) / expected < 0.02, "weight #{w}: #{share} vs #{expected}"
    end
  end

  test "equal weights give exactly the unweighted owners" do
    nodes = node_names(50)
    weighted = Enum.map(nodes, &{&1, 3})

    for i <- 1..1000, key = "key-#{i}" do
      assert HRW.owner(key, weighted, scorer: @w) == HRW.owner(key, nodes)
    end

    # Also at the extremes of the range, and where only the cost decides (no
    # uniform-weight shortcut: one extra node with another weight never wins here).
    for w <- [5.0e-324, 1.0e-300, 2 ** 53] do
      same = Enum.map(nodes, &{&1, w})

      assert Enum.all?(
               1..300,
               &(HRW.owner("key-#{&1}", same, scorer: @w) == HRW.owner("key-#{&1}", nodes))
             )
    end

    skeleton = HRW.build(weighted, scorer: @w)
    plain = HRW.build(nodes)

    assert Enum.all?(
             1..1000,
             &(HRW.owner("key-#{&1}", skeleton) == HRW.owner("key-#{&1}", plain))
           )
  end

  test "changing one node's weight moves keys only to or from that node" do
    nodes = for i <- 1..30, do: {"node-#{i}", 1 + rem(i, 3)}
    heavier = List.keyreplace(nodes, "node-7", 0, {"node-7", 9})
    keys = Enum.map(1..20_000, &"key-#{&1}")

    for key <- keys do
      before = HRW.owner(key, nodes, scorer: @w)
      later = HRW.owner(key, heavier, scorer: @w)
      assert before == later or later == "node-7"
    end
  end

  test "owners are the bare nodes, best first" do
    owners = HRW.owners("k", @mix, 4, scorer: @w)
    assert Enum.sort(owners) == ["a", "b", "c", "d"]
    assert hd(owners) == HRW.owner("k", @mix, scorer: @w)
    assert HRW.owners("k", HRW.Ring.new(@mix, scorer: @w), 4) == owners
  end

  test "hash_fn runs hrw 0.2.1's weighted formula in Elixir" do
    scorer = %HRW.Weighted{hash_fn: &:erlang.phash2/1}

    for i <- 1..200, key = "key-#{i}" do
      expected =
        @mix
        |> Enum.sort()
        |> Enum.max_by(fn {n, w} -> :math.pow(:erlang.phash2({key, n}) / 0x7FFFFFF, 1 / w) end)
        |> elem(0)

      assert HRW.owner(key, @mix, scorer: scorer) == expected
    end
  end

  test "bad weights and malformed entries raise ArgumentError" do
    for nodes <- [
          [{"a", 0}],
          [{"a", -1}],
          [{"a", 0.0}],
          [{"a", "1"}],
          [{"a", nil}],
          ["a"],
          [{"a", 1, 2}],
          [{"a", 2 ** 80}],
          [{"a", 2 ** 53 + 1}],
          [{"a", 2 ** 64}],
          [{"a", 9_007_199_254_740_994.0}],
          [{"a", -(2 ** 70)}],
          [{"a", 1}, {"b", 2 ** 53 + 1}]
        ],
        call <- [
          &HRW.owner("k", &1, scorer: @w),
          &HRW.owners("k", &1, 2, scorer: @w),
          &HRW.Ring.new(&1, scorer: @w),
          &HRW.build(&1, scorer: @w),
          &HRW.owner_batch(["k"], &1, scorer: @w),
          &HRW.owner("k", &1, scorer: @phash),
          &HRW.owners("k", &1, 2, scorer: @phash)
        ] do
      assert_raise ArgumentError, ~r/weight/, fn -> call.(nodes) end
    end
  end

  test "weights up to 2^53 exactly are accepted, one more is refused with a clear message" do
    for top <- [2 ** 53, 9_007_199_254_740_992.0, 5.0e-324], scorer <- [@w, @phash] do
      assert HRW.owner("k", [{"a", top}, {"b", 1}], scorer: scorer) in ["a", "b"]
    end

    for scorer <- [@w, @phash] do
      assert_raise ArgumentError, ~r/weight must be at most 2\^53.*9007199254740993/, fn ->
        HRW.owner("k", [{"a", 2 ** 53 + 1}], scorer: scorer)
      end

      assert_raise ArgumentError, ~r/weight must be positive, got: -1/, fn ->
        HRW.owner("k", [{"a", -1}], scorer: scorer)
      end

      assert_raise ArgumentError, ~r/weight must be a number/, fn ->
        HRW.owner("k", [{"a", :x}], scorer: scorer)
      end
    end
  end

  test "a huge bad weight is described briefly, on the Elixir-scorer path too" do
    huge = -(2 ** 2_000_000)

    for scorer <- [@w, @phash] do
      error =
        assert_raise ArgumentError, fn ->
          HRW.owner("k", [{"a", 1}, {"b", huge}], scorer: scorer)
        end

      assert error.message =~ "weight must be positive"
      assert byte_size(error.message) < 200

      error =
        assert_raise ArgumentError, fn -> HRW.owner("k", [{"b", huge, 1}], scorer: scorer) end

      assert byte_size(error.message) < 300
    end
  end

  test "Ring.nodes/1 and Skeleton.nodes/1 return weights exactly as given" do
    # Compared with ===: 1.0e10 must not come back as the integer 10000000000.
    nodes = [{"a", 1.0e10}, {"b", 2}, {"c", 2.0}, {"d", 5.0e-324}, {"e", 2 ** 53}]
    assert HRW.Ring.nodes(HRW.Ring.new(nodes, scorer: @w)) === nodes
    assert HRW.Skeleton.nodes(HRW.build(nodes, scorer: @w)) === nodes

    # A repeated node: its first term, with its largest weight as first written.
    dups = [{"a", 1}, {"b", 3}, {"a", 2.0}, {"a", 2}, {"b", 3.0}]
    expected = [{"a", 2.0}, {"b", 3}]
    assert HRW.Ring.nodes(HRW.Ring.new(dups, scorer: @w)) === expected
    assert HRW.Skeleton.nodes(HRW.build(dups, scorer: @w)) === expected

    # And they survive a rebuild from another node's copy.
    ring = HRW.Ring.new(nodes, scorer: @w)
    copy = %{ring | resource: make_ref()}
    assert HRW.owner("k", copy) == HRW.owner("k", ring)
  end

  test "score/3 is exact for every valid weight and orders nodes as owners are chosen" do
    for weight <- [1.0e-310, 5.0e-324, 1, 2 ** 53, 0.5] do
      # (2^64 - 1 - cost) * 2^64 + the N3 score (HRW.Weighted.score/3's doc).
      score = HRW.Weighted.score(@w, "k", {"a", weight})
      assert score in 0..(2 ** 128 - 1)
      assert rem(score, 2 ** 64) == HRW.score(%HRW{}, "k", "a")
    end

    nodes = [{"a", 1.0e-310}, {"b", 5.0e-324}, {"c", 1.0e-300}]

    for i <- 1..300, key = "key-#{i}" do
      best = Enum.max_by(nodes, &HRW.Weighted.score(@w, key, &1))
      assert elem(best, 0) == HRW.owner(key, nodes, scorer: @w)

      ranked =
        nodes |> Enum.sort_by(&HRW.Weighted.score(@w, key, &1), :desc) |> Enum.map(&elem(&1, 0))

      assert ranked == HRW.owners(key, nodes, 3, scorer: @w)
    end
  end

  test "tiny weights: owners are distinct and a skeleton equals the list at <= cluster_size" do
    # A weight 300 orders of magnitude below the others still ranks its node once:
    # a cost that underflowed would repeat another node in the ranking.
    nodes = [{"a", 1}, {"b", 1.0e-300}, {"c", 2}]
    skeleton = HRW.build(nodes, scorer: @w)

    for i <- 1..2000, key = "key-#{i}" do
      owners = HRW.owners(key, skeleton, 3)
      assert Enum.sort(owners) == ["a", "b", "c"], "#{key}: #{inspect(owners)}"
      assert owners == HRW.owners(key, nodes, 3, scorer: @w)
    end
  end

  # A weight drawn over the whole valid range: any binary64 bit pattern from the
  # smallest subnormal to 2^53, the extremes, integers, or 1 beside tiny ones.
  defp wide_weight(:bits), do: float_of_bits(:rand.uniform(0x4340000000000000))
  defp wide_weight(:subnormal), do: float_of_bits(:rand.uniform(64))
  defp wide_weight(:int), do: Enum.random([1, 2, 7, 2 ** 53, :rand.uniform(2 ** 53)])

  defp wide_weight(:tiny),
    do: Enum.random([1, 1, 1, 5.0e-324, 1.0e-323, 1.0e-310, 1.0e-300, 1.0e-290])

  defp float_of_bits(bits) do
    <<w::float>> = <<bits::64>>
    w
  end

  test "seeded loops over wide weights: list, ring and skeleton agree, owners distinct" do
    :rand.seed(:exsss, {11, 22, 33})

    for round <- 1..150 do
      kind = Enum.at([:bits, :tiny, :subnormal, :int], rem(round, 4))
      size = Enum.random([1, 2, 4, 16])
      n = Enum.random([1, 2, size, size + 1, 3 * size + 1, 40])
      nodes = for i <- 1..n, do: {"node-#{i}", wide_weight(kind)}
      skeleton = HRW.build(nodes, scorer: @w, cluster_size: size)
      ring = HRW.Ring.new(nodes, scorer: @w)

      for i <- 1..40, key = "key-#{round}-#{i}" do
        flat = HRW.owners(key, nodes, 4, scorer: @w)
        assert HRW.owners(key, ring, 4) == flat
        assert hd(flat) == HRW.owner(key, nodes, scorer: @w)
        owners = HRW.owners(key, skeleton, 4)
        assert length(Enum.uniq(owners)) == min(4, n), "round #{round}: #{inspect(owners)}"
        assert hd(owners) == HRW.owner(key, skeleton)
        if n <= size, do: assert(owners == flat, "round #{round} #{key}: #{inspect(nodes)}")
      end
    end
  end

  test "shares follow weights for the smallest subnormals too" do
    # Weights of 1, 2 and 3 units of 5.0e-324: shares 1/6, 2/6, 3/6.
    nodes = [{"a", 5.0e-324}, {"b", 1.0e-323}, {"c", 1.5e-323}]
    keys = Enum.map(1..300_000, &"key-#{&1}")

    for target <- [
          nodes,
          HRW.Ring.new(nodes, scorer: @w),
          HRW.build(nodes, scorer: @w, cluster_size: 1)
        ] do
      counts = keys |> HRW.owner_batch(target, scorer: @w) |> Enum.frequencies()

      for {{node, _}, expected} <- Enum.zip(nodes, [1 / 6, 2 / 6, 3 / 6]) do
        share = counts[node] / length(keys)
        assert abs(share - expected) / expected < 0.02, "#{node}: #{share} vs #{expected}"
      end
    end
  end

  # docs/HASHING.md §3: messages print a refused weight exactly, so 2^53 + 2 never
  # reads as 2^53 ("9.007199e+15").
  test "a refused weight is printed as HASHING.md §3 says, the same on every path" do
    outside = "an integer outside the 64-bit range"

    cases = [
      {9_007_199_254_740_994.0, "9007199254740994.0"},
      {1.0e300, "1.0e300"},
      {-5.0e-324, "-5.0e-324"},
      {-1.5, "-1.5"},
      {2 ** 53 + 1, "9007199254740993"},
      {2 ** 53 + 2, "9007199254740994"},
      {2 ** 63 - 1, "9223372036854775807"},
      {-(2 ** 63), "-9223372036854775808"},
      {2 ** 63, outside},
      {2 ** 64, outside},
      {2 ** 4000, outside},
      {-(2 ** 63) - 1, outside}
    ]

    calls = [
      &HRW.owner("k", &1, scorer: @w),
      &HRW.Ring.new(&1, scorer: @w),
      &HRW.build(&1, scorer: @w),
      &HRW.owner_batch(["k"], &1, scorer: @w),
      &HRW.Weighted.score(@w, "k", hd(&1)),
      &HRW.owner("k", &1, scorer: @phash),
      &HRW.build(&1, scorer: @phash)
    ]

    for {weight, shown} <- cases, call <- calls do
      error = assert_raise ArgumentError, fn -> call.([{"a", weight}, {"b", 1}]) end

      assert String.ends_with?(error.message, "got: #{shown}"),
             "#{inspect(weight)}: #{error.message}"

      refute error.message =~ "e+"
    end
  end

  # docs/HASHING.md §3: every entry of a weighted list is {node, weight}; there is
  # no implicit weight for a bare node.
  test "a bare node in a weighted list is refused, not given weight 1" do
    for nodes <- [["b"], [{"a", 1}, "b"], ["b", {"a", 2}]],
        call <- [
          &HRW.owner("k", &1, scorer: @w),
          &HRW.Ring.new(&1, scorer: @w),
          &HRW.build(&1, scorer: @w),
          &HRW.owner("k", &1, scorer: @phash)
        ] do
      assert_raise ArgumentError, ~r/\{node, weight\} tuples/, fn -> call.(nodes) end
    end
  end
end
