defmodule HRW.WeightedTest do
  use ExUnit.Case, async: true
  doctest HRW.Weighted

  import HRW.TestStats

  @w %HRW.Weighted{}
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
          [{"a", 2 ** 80}]
        ],
        call <- [
          &HRW.owner("k", &1, scorer: @w),
          &HRW.owners("k", &1, 2, scorer: @w),
          &HRW.Ring.new(&1, scorer: @w),
          &HRW.build(&1, scorer: @w)
        ] do
      assert_raise ArgumentError, ~r/weight/, fn -> call.(nodes) end
    end
  end
end
