defmodule HRW.ClusterFingerprintTest do
  use ExUnit.Case, async: true

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
    {["cache-1", "cache-2"], 0x1121E77D890254C9}
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

  test "bad input" do
    assert_raise ArgumentError, ~r/list of members/, fn -> Fingerprint.of(:a) end
    assert_raise ArgumentError, ~r/0..2\^64-1/, fn -> Fingerprint.mix(-1) end
    assert_raise ArgumentError, fn -> Fingerprint.mix(1 <<< 64) end
  end
end
