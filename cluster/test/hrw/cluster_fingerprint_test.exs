defmodule HRW.ClusterFingerprintTest do
  use ExUnit.Case, async: true

  import Bitwise
  alias HRW.Cluster.Fingerprint

  doctest HRW.Cluster.Fingerprint

  # docs/FINGERPRINT.md: cross-checked with ../docs/reference.py's term ids.
  @vectors [
    {[], 0xE220A8397B1DCDAF},
    {[:"a@127.0.0.1"], 0xC6DA3682B95FA4D4},
    {[:"a@127.0.0.1", :"b@127.0.0.1"], 0x7EE530DD8C159E1E},
    {[:"b@127.0.0.1", :"a@127.0.0.1", :"c@127.0.0.1"], 0x35F133CFD79AD90E},
    {[{:"a@127.0.0.1", 1}, {:"b@127.0.0.1", 2.5}], 0x20EF0D1E0BB95FAA},
    {["cache-1", "cache-2"], 0x1121E77D890254C9},
    # A weighted node given twice folds to its largest weight (§6).
    {[{:"a@127.0.0.1", 1}, {:"a@127.0.0.1", 2}], 0x40E498A8FDC16513},
    {[{:"a@127.0.0.1", 2}], 0x40E498A8FDC16513},
    # Not every member {node, number}: bare, in either order.
    {[{:"a@127.0.0.1", 1}, :"b@127.0.0.1"], 0x5405969FE413EC08},
    {[:"b@127.0.0.1", {:"a@127.0.0.1", 1}], 0x5405969FE413EC08},
    # A weighted node nested 256 deep, as HRW.build/2 takes it.
    {[{Enum.reduce(1..256, :leaf, fn _, acc -> [acc] end), 3}], 0xAC90C791BBB38E27}
  ]

  test "the pinned vectors of docs/FINGERPRINT.md" do
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

  test "a weighted member's id is made from its node's id and its weight's bits" do
    for {node, weight} <- [{:"a@127.0.0.1", 1}, {"cache-1", 2.5}, {{:x, [1]}, 2 ** 53}] do
      <<bits::64>> = <<weight / 1::float-64>>
      expected = HRW.term_id({HRW.term_id(node), bits})

      assert Fingerprint.of([{node, weight}]) ==
               Fingerprint.mix(bxor(1, Fingerprint.mix(expected)))
    end
  end

  test "every weighted node a structure takes has a fingerprint, however deep" do
    nested = fn n -> Enum.reduce(1..n, :leaf, fn _, acc -> [acc] end) end
    deep = nested.(256)

    # HRW.build/2 and HRW.Ring.new/2 take the node: so does the fingerprint, and it
    # tells it from its neighbours in depth.
    skeleton = HRW.build([{deep, 3}, {:a, 1}], scorer: %HRW.Weighted{})
    assert {deep, 3} in HRW.Skeleton.nodes(skeleton)
    assert HRW.Ring.nodes(HRW.Ring.new([{deep, 3}], scorer: %HRW.Weighted{})) == [{deep, 3}]
    fingerprint = Fingerprint.of([{deep, 3}, {:a, 1}])
    assert fingerprint == Fingerprint.of([{:a, 1.0}, {deep, 2}, {deep, 3}])
    refute fingerprint == Fingerprint.of([{nested.(255), 3}, {:a, 1}])

    # One level deeper no structure takes the node, and the fingerprint refuses it.
    assert_raise ArgumentError, fn -> HRW.build([{nested.(257), 3}], scorer: %HRW.Weighted{}) end
    assert_raise ArgumentError, ~r/nested deeper/, fn -> Fingerprint.of([{nested.(257), 3}]) end
  end

  test "a number is an integer or a float: {name, integer} members count as weighted" do
    # Folded as a weighted structure folds them: one member, the largest weight.
    assert Fingerprint.of([{:rack, 1}, {:rack, 2}]) == Fingerprint.of([{:rack, 2}])

    assert Fingerprint.of([{:rack, 1}, {:rack, 2}]) ==
             Fingerprint.of([{:rack, 2.0}], weighted: true)

    refute Fingerprint.of([{:rack, 1}, {:rack, 2}]) ==
             Fingerprint.of([{:rack, 1}, {:rack, 2}], weighted: false)

    # 0 is a number but not a weight: the list is weighted, and refused.
    assert_raise ArgumentError, ~r/0 < weight <= 2\^53/, fn -> Fingerprint.of([{:shard, 0}]) end

    # Given as bare, it is one member: the tuple's own id.
    assert Fingerprint.of([{:shard, 0}], weighted: false) ==
             Fingerprint.mix(bxor(1, Fingerprint.mix(HRW.term_id({:shard, 0}))))

    # Anything else in the second place (an atom, a binary, a list) makes the list bare.
    for other <- [:x, "1", [1], true] do
      assert Fingerprint.of([{:shard, other}]) ==
               Fingerprint.of([{:shard, other}], weighted: false)
    end
  end

  test "the range is checked on the exact weight, before it becomes a float" do
    # 2^53 + 1 and 2^53 are the same float, but only 2^53 is a weight.
    assert 9_007_199_254_740_993 / 1 == 9_007_199_254_740_992.0

    assert Fingerprint.of([{:a, 9_007_199_254_740_992}]) ==
             Fingerprint.of([{:a, 9_007_199_254_740_992.0}])

    for weighted <- [[], [weighted: true]] do
      assert_raise ArgumentError, ~r/0 < weight <= 2\^53/, fn ->
        Fingerprint.of([{:a, 9_007_199_254_740_993}], weighted)
      end
    end
  end

  test "weighted: true refuses a bare member and a 3-tuple" do
    for members <- [[{:a, 1}, :b], [:b], [{:a, 1, 2}], [{:a, 1}, {:b, 2, 3}], [{:a}]] do
      assert_raise ArgumentError, ~r/a weighted member is \{node, weight\}/, fn ->
        Fingerprint.of(members, weighted: true)
      end
    end
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

  # docs/HASHING.md §3: a refused integer prints exactly inside the signed 64-bit
  # range and as words outside it, never its digits, as hrw's own weights print.
  test "a refused weight prints as docs/HASHING.md §3 says, at the edges of the 64-bit range" do
    words = "an integer outside the 64-bit range"
    max = 0x7FFF_FFFF_FFFF_FFFF
    min = -0x8000_0000_0000_0000

    for weight <- [
          max + 1,
          2 ** 64,
          2 ** 64 + 1,
          Integer.pow(2, 1100),
          min - 1,
          -Integer.pow(2, 99)
        ],
        call <- [&Fingerprint.of([{:a, &1}]), &Fingerprint.of([{:a, &1}], weighted: true)] do
      error = assert_raise ArgumentError, fn -> call.(weight) end
      assert error.message =~ words
      refute error.message =~ Integer.to_string(weight)

      hrw =
        assert_raise ArgumentError, fn ->
          HRW.Ring.new([{:a, weight}], scorer: %HRW.Weighted{})
        end

      assert hrw.message =~ words
    end

    for weight <- [max, min, 9_007_199_254_740_993] do
      error = assert_raise ArgumentError, fn -> Fingerprint.of([{:a, weight}]) end
      assert error.message =~ Integer.to_string(weight)
      refute error.message =~ words
    end
  end

  test "bad input" do
    assert_raise ArgumentError, ~r/list of members/, fn -> Fingerprint.of(:a) end
    assert_raise ArgumentError, ~r/0..2\^64-1/, fn -> Fingerprint.mix(-1) end
    assert_raise ArgumentError, fn -> Fingerprint.mix(1 <<< 64) end
  end
end
