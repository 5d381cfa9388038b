defmodule HRW.BatchTest do
  use ExUnit.Case, async: true

  import HRW.TestStats

  @weighted %HRW.Weighted{}

  defp targets do
    nodes = node_names(300)
    weighted = Enum.map(nodes, &{&1, :erlang.phash2(&1, 4) + 1})

    [
      {"list", nodes, []},
      {"weighted list", weighted, [scorer: @weighted]},
      {"ring", HRW.Ring.new(nodes), []},
      {"weighted ring", HRW.Ring.new(weighted, scorer: @weighted), []},
      {"skeleton", HRW.build(nodes), []},
      {"weighted skeleton", HRW.build(weighted, scorer: @weighted), []},
      {"phash2 list", Enum.take(nodes, 20), [scorer: %HRW{hash_fn: &:erlang.phash2/1}]}
    ]
  end

  # Mixed key types: binaries take the parallel hashing path, the rest the term path.
  defp keys(n), do: Enum.map(1..n//1, &if(rem(&1, 3) == 0, do: {:k, &1}, else: "key-#{&1}"))

  test "owner_batch equals one owner/3 per key, at every batch size" do
    for {name, target, opts} <- targets(), n <- [0, 1, 2, 19_999, 20_000, 20_001] do
      keys = keys(n)
      expected = Enum.map(keys, &HRW.owner(&1, target, opts))
      assert HRW.owner_batch(keys, target, opts) == expected, "#{name}, #{n} keys"
    end
  end

  test "owner_batch of a million keys on a skeleton and a ring" do
    keys = keys(1_000_000)
    nodes = node_names(1000)

    for target <- [HRW.build(nodes), HRW.Ring.new(nodes)] do
      batch = HRW.owner_batch(keys, target)
      assert length(batch) == 1_000_000
      # Spot-check against single lookups (all of them would take a while).
      for i <- Enum.take_random(0..999_999, 2000) do
        assert Enum.at(batch, i) == HRW.owner(Enum.at(keys, i), target)
      end
    end
  end

  test "group_by_owner equals Enum.group_by with owner/3" do
    for {name, target, opts} <- targets(), n <- [0, 1, 25_000] do
      keys = keys(n)
      expected = Enum.group_by(keys, &HRW.owner(&1, target, opts))
      assert HRW.group_by_owner(keys, target, opts) == expected, "#{name}, #{n} keys"
    end
  end

  test "moves lists exactly the keys whose owner changed, with from and to" do
    nodes = node_names(500)
    grown = ["node-new" | nodes]
    keys = keys(30_000)

    for {before, later} <- [
          {nodes, grown},
          {HRW.Ring.new(nodes), HRW.Ring.new(grown)},
          {HRW.build(nodes), HRW.build(grown)},
          {HRW.Ring.new(nodes), HRW.build(tl(nodes))}
        ] do
      expected =
        for key <- keys,
            from = HRW.owner(key, before),
            to = HRW.owner(key, later),
            from != to,
            do: {key, from, to}

      assert HRW.moves(keys, before, later) == expected
      assert HRW.moved_fraction(keys, before, later) == length(expected) / length(keys)
    end
  end

  test "batches work with stale resources" do
    nodes = node_names(50)
    bin = :erlang.term_to_binary({HRW.Ring.new(nodes), HRW.build(nodes)})
    :erlang.garbage_collect()
    {ring, skeleton} = :erlang.binary_to_term(bin)
    keys = keys(100)
    assert HRW.owner_batch(keys, ring) == Enum.map(keys, &HRW.owner(&1, nodes))
    assert HRW.owner_batch(keys, skeleton) == Enum.map(keys, &HRW.owner(&1, skeleton))
  end

  test "bad input raises ArgumentError" do
    assert_raise ArgumentError, ~r/keys must be a list/, fn -> HRW.owner_batch(:x, ["a"]) end
    assert_raise ArgumentError, ~r/proper list/, fn -> HRW.owner_batch(["k" | :x], ["a"]) end
    assert_raise ArgumentError, ~r/non-empty list/, fn -> HRW.owner_batch(["k"], []) end
    assert_raise ArgumentError, ~r/non-empty list/, fn -> HRW.group_by_owner(["k"], 3) end

    assert_raise ArgumentError, ~r/weight/, fn ->
      HRW.owner_batch(["k"], [{"a", -1}], scorer: @weighted)
    end
  end
end

defmodule HRW.BatchSchedulingTest do
  # Changes the application environment: runs alone. (Scheduler latency during a
  # 10M-key batch is timing, so it is a benchmark with an assertion instead:
  # `mix hrw.latency`.)
  use ExUnit.Case, async: false

  import HRW.TestStats

  test "the rayon split gives the same owners as single lookups" do
    Application.put_env(:hrw, :batch_threads, 2)
    on_exit(fn -> Application.delete_env(:hrw, :batch_threads) end)
    keys = Enum.map(1..200_000, &"key-#{&1}")
    nodes = node_names(2000)

    for target <- [HRW.build(nodes), HRW.Ring.new(Enum.take(nodes, 100))] do
      assert HRW.owner_batch(keys, target) == Enum.map(keys, &HRW.owner(&1, target))
    end
  end
end
