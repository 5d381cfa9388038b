defmodule HRW.ClusterFingerprintTest do
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent

  import Bitwise
  alias HRW.Cluster.Fingerprint

  doctest HRW.Cluster.Fingerprint

  # docs/HASHING.md §7: cross-checked with docs/reference.py's term ids.
  @vectors [
    {[], 0xE220A8397B1DCDAF},
    {[:"a@127.0.0.1"], 0xC6DA3682B95FA4D4},
    {[:"a@127.0.0.1", :"b@127.0.0.1"], 0x7EE530DD8C159E1E},
    {[:"b@127.0.0.1", :"a@127.0.0.1", :"c@127.0.0.1"], 0x35F133CFD79AD90E},
    {[{:"a@127.0.0.1", 1}, {:"b@127.0.0.1", 2.5}], 0xE05ABB5FB83027F1},
    {["cache-1", "cache-2"], 0x1121E77D890254C9},
    # A weighted node given twice folds to its largest weight (§6).
    {[{:"a@127.0.0.1", 1}, {:"a@127.0.0.1", 2}], 0xD7C16D33AA0417E5},
    {[{:"a@127.0.0.1", 2}], 0xD7C16D33AA0417E5},
    # Not every member {node, number}: bare, in either order.
    {[{:"a@127.0.0.1", 1}, :"b@127.0.0.1"], 0x5405969FE413EC08},
    {[:"b@127.0.0.1", {:"a@127.0.0.1", 1}], 0x5405969FE413EC08}
  ]

  test "the pinned vectors of docs/HASHING.md §7" do
    for {members, expected} <- @vectors do
      assert Fingerprint.of(members) == expected, inspect(members)
    end
  end

  test "the definition, step by step, from term ids" do
    members = [:"a@127.0.0.1", :"b@127.0.0.1"]
    sum = members |> Enum.map(&Fingerprint.mix(HRW.term_id(&1))) |> Enum.sum()
    sum = band(sum, 0xFFFF_FFFF_FFFF_FFFF)
    assert Fingerprint.of(members) == Fingerprint.mix(bxor(2, sum))
  end

  test "independent of order and duplicates, sensitive to members and weights" do
    members = Enum.map(1..50, &:"n#{&1}@host")

    for seed <- 1..20 do
      :rand.seed(:exsss, {seed, seed, seed})
      shuffled = Enum.shuffle(members)
      assert Fingerprint.of(shuffled) == Fingerprint.of(members)
      assert Fingerprint.of(shuffled ++ Enum.take(shuffled, 5)) == Fingerprint.of(members)
    end

    fingerprints = for n <- 0..50, do: Fingerprint.of(Enum.take(members, n))
    assert length(Enum.uniq(fingerprints)) == 51
    refute Fingerprint.of([{:a, 1}]) == Fingerprint.of([{:a, 2}])
    refute Fingerprint.of([{:a, 1}]) == Fingerprint.of([:a])
    assert Fingerprint.of([{:a, 2}]) == Fingerprint.of([{:a, 2.0}])
  end

  test "two member lists that build the same structure have the same fingerprint" do
    for {a, b} <- [
          {[{:n, 1}, {:n, 2}], [{:n, 2}]},
          {[{:n, 2}, {:n, 1}, {:m, 3}], [{:m, 3.0}, {:n, 2}]},
          {[{0.0, 1}, {-0.0, 5}], [{0.0, 5}]},
          {[:a, :a, :b], [:b, :a]}
        ] do
      assert Fingerprint.of(a) == Fingerprint.of(b), inspect({a, b})
    end

    # The structures agree: the ring built from each holds the same nodes.
    ring = &HRW.Ring.new(&1, scorer: %HRW.Weighted{})
    assert HRW.Ring.nodes(ring.([{:n, 1}, {:n, 2}])) == HRW.Ring.nodes(ring.([{:n, 2}]))

    # Weighted or bare is decided from every member, so order never changes it.
    mixed = [{:a, 1}, {:b, :x}]
    assert Fingerprint.of(mixed) == Fingerprint.of(Enum.reverse(mixed))
    assert Fingerprint.of(mixed) == Fingerprint.of(mixed, weighted: false)
  end

  test "weights outside docs/HASHING.md §3 are refused, as a structure refuses them" do
    for weight <- [0, -1, 9_007_199_254_740_993, 1.0e300, Integer.pow(2, 1100)] do
      assert_raise ArgumentError, ~r/0 < weight <= 2\^53/, fn ->
        Fingerprint.of([{:a, weight}])
      end

      assert_raise ArgumentError, fn -> HRW.Ring.new([{:a, weight}], scorer: %HRW.Weighted{}) end
    end

    assert_raise ArgumentError, ~r/a weighted member is/, fn ->
      Fingerprint.of([{:a, 1}, :b], weighted: true)
    end

    assert Fingerprint.of([{:a, 9_007_199_254_740_992}]) ==
             Fingerprint.of([{:a, 9_007_199_254_740_992.0}])
  end

  test "bad input" do
    assert_raise ArgumentError, ~r/list of members/, fn -> Fingerprint.of(:a) end
    assert_raise ArgumentError, ~r/0..2\^64-1/, fn -> Fingerprint.mix(-1) end
    assert_raise ArgumentError, fn -> Fingerprint.mix(1 <<< 64) end
  end
end
