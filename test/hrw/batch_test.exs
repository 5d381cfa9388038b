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

  @tag timeout: 300_000
  test "a 10M-key batch does not delay a 1 ms timer on a normal scheduler by more than a few ms" do
    nodes = node_names(10_000)
    skeleton = HRW.build(nodes)
    keys = Enum.to_list(1..10_000_000)
    parent = self()

    watcher =
      spawn_link(fn ->
        receive do
          :start -> :ok
        end

        send(
          parent,
          {:worst_lateness_us, timer_loop(0, System.monotonic_time(:microsecond) + 5_000_000)}
        )
      end)

    send(watcher, :start)
    batch = HRW.owner_batch(keys, skeleton)
    assert length(batch) == 10_000_000
    assert_receive {:worst_lateness_us, worst}, 10_000
    assert worst < 5_000, "a 1 ms timer was late by #{worst} µs"
  end

  defp timer_loop(worst, deadline) do
    before = System.monotonic_time(:microsecond)

    if before > deadline do
      worst
    else
      receive do
      after
        1 -> :ok
      end

      late = System.monotonic_time(:microsecond) - before - 1000
      timer_loop(max(worst, late), deadline)
    end
  end
end
