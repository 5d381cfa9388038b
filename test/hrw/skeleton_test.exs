defmodule HRW.SkeletonTest do
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent
  doctest HRW.Skeleton

  import HRW.TestStats

  defp keys(n), do: Enum.map(1..n, &"key-#{&1}")

  defp moved_fraction(keys, a, b) do
    Enum.count(keys, &(HRW.owner(&1, a) != HRW.owner(&1, b))) / length(keys)
  end

  test "pinned placements (docs/HASHING.md §4): a change here moves keys in running clusters" do
    skeleton = HRW.build(node_names(100))
    owners = Enum.map_join(1..12, " ", &HRW.owner("key-#{&1}", skeleton))

    assert owners ==
             "node-59 node-11 node-53 node-50 node-50 node-99 node-52 node-51 node-90 node-61 node-5 node-31"

    assert HRW.owners("key-1", skeleton, 3) == ["node-59", "node-45", "node-46"]
  end

  test "at or below cluster_size nodes the owner is exactly the list's" do
    for n <- [1, 2, 5, 16], size <- [16, 32] do
      nodes = node_names(n)
      skeleton = HRW.build(nodes, cluster_size: size)

      for key <- keys(300) do
        assert HRW.owner(key, skeleton) == HRW.owner(key, nodes)
      end
    end
  end

  test "fair over 1000 and 10,000 nodes (chi-square, 100k keys)" do
    keys = keys(100_000)

    for n <- [1000, 10_000] do
      nodes = node_names(n)
      skeleton = HRW.build(nodes)
      counts = Enum.frequencies(Enum.map(keys, &HRW.owner(&1, skeleton)))
      chi = chi_square(counts, nodes, length(keys))
      assert chi <= chi_bound(n), "#{n} nodes: chi2 #{chi} > #{chi_bound(n)}"
    end
  end

  test "one node joining or leaving 10,000 moves few keys, on average at most 8/N" do
    n = 10_000
    nodes = node_names(n)
    base = HRW.build(nodes)
    keys = keys(100_000)

    fractions =
      for trial <- 1..8 do
        joined = HRW.build(["joiner-#{trial}" | nodes])
        left = HRW.build(List.delete(nodes, "node-#{trial * 997}"))
        [moved_fraction(keys, base, joined), moved_fraction(keys, base, left)]
      end
      |> List.flatten()

    mean = Enum.sum(fractions) / length(fractions)
    assert mean <= 8 / n, "mean moved #{mean * n}/N"
    assert Enum.max(fractions) <= 20 / n, "max moved #{Enum.max(fractions) * n}/N"
  end

  test "no wholesale reshuffle at sizes around powers of two and cluster_size multiples" do
    keys = keys(40_000)

    for n <- [15, 16, 17, 31, 32, 33, 255, 256, 257, 1023, 1024, 1025] do
      nodes = node_names(n)
      a = HRW.build(nodes)
      b = HRW.build(nodes ++ ["node-extra"])
      fraction = moved_fraction(keys, a, b)
      # Ideal is 1/(N+1); a leaf split costs up to about cluster_size/(2N) more.
      assert fraction <= 24 / n, "#{n} -> #{n + 1}: moved #{fraction * n}/N"
    end
  end

  test "input order and repeated nodes do not change the skeleton" do
    nodes = node_names(500)
    a = HRW.build(nodes)
    b = HRW.build(Enum.shuffle(nodes) ++ Enum.take(nodes, 50))
    assert HRW.Skeleton.size(b) == 500
    assert Enum.all?(keys(5000), &(HRW.owner(&1, a) == HRW.owner(&1, b)))
  end

  test "owners: k distinct nodes, the first is the owner, stable under churn" do
    nodes = node_names(2000)
    skeleton = HRW.build(nodes)
    grown = HRW.build(["node-new" | nodes])

    changed =
      for key <- keys(5000) do
        owners = HRW.owners(key, skeleton, 3)
        assert length(Enum.uniq(owners)) == 3
        assert hd(owners) == HRW.owner(key, skeleton)
        if HRW.owners(key, grown, 3) != owners, do: 1, else: 0
      end

    # Each of 3 ranks moves a few/N of the keys: far below a reshuffle.
    assert Enum.sum(changed) / 5000 < 0.05
    assert length(HRW.owners("k", HRW.build(["a", "b"]), 5)) == 2
  end

  test "works after term_to_binary round trips and from :persistent_term and ETS" do
    nodes = node_names(300)
    bin = :erlang.term_to_binary(HRW.build(nodes))
    live = HRW.build(nodes)
    :erlang.garbage_collect()
    orphan = :erlang.binary_to_term(bin)
    copy = live |> :erlang.term_to_binary() |> :erlang.binary_to_term()
    :persistent_term.put({__MODULE__, :skeleton}, live)
    table = :ets.new(:skeletons, [:public])
    :ets.insert(table, {:s, live})

    for key <- keys(300) do
      expected = HRW.owner(key, live)
      assert HRW.owner(key, orphan) == expected
      assert HRW.owner(key, copy) == expected
      assert HRW.owner(key, :persistent_term.get({__MODULE__, :skeleton})) == expected
      [{:s, from_ets}] = :ets.lookup(table, :s)
      assert HRW.owners(key, from_ets, 2) == HRW.owners(key, live, 2)
    end

    :persistent_term.erase({__MODULE__, :skeleton})
  end

  test "Elixir scorers keep hrw's semantics, exactly and in O(n)" do
    scorer = %HRW{hash_fn: &:erlang.phash2/1}
    nodes = node_names(40)
    skeleton = HRW.build(nodes, scorer: scorer)

    for key <- keys(100) do
      assert HRW.owner(key, skeleton) == HRW.owner(key, nodes, scorer: scorer)
      assert HRW.owners(key, skeleton, 3) == HRW.owners(key, nodes, 3, scorer: scorer)
    end
  end

  @fixture Path.expand("../fixtures/reference_skeleton.tsv", __DIR__)

  defp fixture_weight("i" <> digits), do: String.to_integer(digits)

  defp fixture_weight("f" <> hex) do
    <<w::float>> = <<String.to_integer(hex, 16)::64>>
    w
  end

  defp fixture_node(spec) do
    case String.split(spec, ":") do
      [name] -> name
      [name, weight] -> {name, fixture_weight(weight)}
    end
  end

  test "owners with replicas match docs/reference.py (HASHING.md §4 alone), weighted and not" do
    # Fixture: python3 docs/reference.py skeleton test/fixtures/reference_skeleton.tsv
    cases =
      for line <- File.stream!(@fixture), line = String.trim_trailing(line, "\n"), line != "" do
        [leaf, count, specs, cells] = String.split(line, "\t")
        {leaf, count} = {String.to_integer(leaf), String.to_integer(count)}
        entries = specs |> String.split(",") |> Enum.map(&fixture_node/1)
        weighted? = match?([{_, _} | _], entries)
        opts = if weighted?, do: [scorer: %HRW.Weighted{}], else: []
        skeleton = HRW.build(entries, [cluster_size: leaf] ++ opts)
        ring = HRW.Ring.new(entries, opts)
        node_at = fn i -> with {node, _} <- Enum.at(entries, i), do: node end

        for cell <- String.split(cells, ";") do
          [key, owners] = String.split(cell, "=")
          [sk, flat] = owners |> String.split("/") |> Enum.map(&String.split(&1, ","))
          expected = Enum.map(sk, &node_at.(String.to_integer(&1)))
          flat = Enum.map(flat, &node_at.(String.to_integer(&1)))
          assert HRW.owners(key, skeleton, count) == expected, "#{key} on #{line}"
          assert HRW.owner(key, skeleton) == hd(expected)
          assert HRW.owners(key, entries, count, opts) == flat, "#{key} (list) on #{line}"
          assert HRW.owners(key, ring, count) == flat
          1
        end
      end

    assert cases |> List.flatten() |> length() > 6000
  end

  test "bad input raises ArgumentError" do
    assert_raise ArgumentError, ~r/non-empty list/, fn -> HRW.build([]) end
    assert_raise ArgumentError, ~r/non-empty list/, fn -> HRW.build(%{}) end
    assert_raise ArgumentError, ~r/improper list/, fn -> HRW.build(["a" | :b]) end
    assert_raise ArgumentError, ~r/cluster_size/, fn -> HRW.build(["a"], cluster_size: 0) end
    assert_raise ArgumentError, ~r/fanout/, fn -> HRW.build(["a"], fanout: :x) end
    assert_raise ArgumentError, ~r/unknown options/, fn -> HRW.build(["a"], levels: 3) end
  end

  # docs/HASHING.md §4: HRW.build/1 places keys with cluster_size 16. Vectors from
  # `python3 docs/reference.py` ("cluster_size 16 (HRW.build/1's default)").
  test "HRW.build/1 places keys by the default cluster_size of 16, as the contract pins" do
    nodes = Enum.map(1..100, &"node-#{&1}")
    keys = Enum.map(1..12, &"key-#{&1}")
    owners = fn skeleton -> Enum.map(keys, &HRW.owner(&1, skeleton)) end
    pinned = fn numbers -> Enum.map(numbers, &"node-#{&1}") end

    assert owners.(HRW.build(nodes)) == pinned.([59, 11, 53, 50, 50, 99, 52, 51, 90, 61, 5, 31])
    assert owners.(HRW.build(nodes)) == owners.(HRW.build(nodes, cluster_size: 16))

    assert owners.(HRW.build(nodes, cluster_size: 8)) ==
             pinned.([85, 11, 32, 50, 50, 99, 52, 74, 20, 82, 69, 31])
  end

  test "cluster_size is an integer in 1..4096; fanout is accepted, ignored and shown as ignored" do
    nodes = Enum.map(1..100, &"node-#{&1}")
    assert HRW.build(nodes, cluster_size: 1) |> HRW.Skeleton.size() == 100
    assert HRW.owner("k", HRW.build(nodes, cluster_size: 4096)) == HRW.owner("k", nodes)

    for bad <- [0, 4097, 16.0, nil] do
      assert_raise ArgumentError, ~r/cluster_size.*1\.\.4096/, fn ->
        HRW.build(nodes, cluster_size: bad)
      end
    end

    keys = Enum.map(1..200, &"key-#{&1}")
    base = HRW.build(nodes)

    assert base.fanout == nil
    refute inspect(base) =~ "fanout"

    for fanout <- [2, 3, 16, 4096] do
      other = HRW.build(nodes, fanout: fanout)
      assert Enum.map(keys, &HRW.owner(&1, other)) == Enum.map(keys, &HRW.owner(&1, base))
      assert HRW.owner_batch(keys, other) == HRW.owner_batch(keys, base)
      assert other.fingerprint == base.fingerprint

      assert inspect(other) =~
               "#HRW.Skeleton<100 nodes, cluster_size: 16, fanout: #{fanout} (ignored),"
    end
  end

  test "nodes/1 returns the distinct nodes in order of first occurrence" do
    assert HRW.Skeleton.nodes(HRW.build(["c", "a", "b", "a", "c"])) == ["c", "a", "b"]

    assert HRW.Skeleton.nodes(HRW.build([{"c", 1}, {"a", 2}, {"c", 3}], scorer: %HRW.Weighted{})) ==
             [{"c", 3}, {"a", 2}]
  end
end
