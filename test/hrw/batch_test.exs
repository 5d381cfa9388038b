defmodule HRW.BatchTest.Scorer do
  @moduledoc false
  # A user scorer module (scored in Elixir) that accepts any node term.
  @behaviour HRW.Scorer
  defstruct []
  @impl true
  def score(_, key, node), do: :erlang.phash2({node, key, :custom})
end

defmodule HRW.BatchTest do
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent

  import HRW.TestStats

  @weighted %HRW.Weighted{}

  # Nodes of the targets below: a list scores every node for every key, so the
  # quick run takes fewer; either way a skeleton has several levels of 16-node leaves.
  @nodes HRW.TestSize.pick(quick: 100, ci: 300, long: 300)

  defp targets do
    nodes = node_names(@nodes)
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

  # Sizes around the skeleton's 8-key lock-step groups, the normal/dirty switch
  # (8192 keys) and the parallel threshold (20,000).
  test "owner_batch equals one owner/3 per key, at every batch size" do
    sizes = [0, 1, 2, 255, 256, 257, 513, 8192, 8193, 19_999, 20_000, 20_001]

    for {name, target, opts} <- targets() do
      # `keys(n)` is a prefix of `keys(m)` for n < m: one lookup per key of the
      # largest batch gives every size's expected owners.
      all = Enum.map(keys(Enum.max(sizes)), &HRW.owner(&1, target, opts))

      for n <- sizes do
        expected = Enum.take(all, n)
        assert HRW.owner_batch(keys(n), target, opts) == expected, "#{name}, #{n} keys"
      end
    end
  end

  # A million keys in ./scripts/test; the quick run's 200,000 are still ten times
  # the parallel threshold.
  @large HRW.TestSize.pick(quick: 200_000, ci: 1_000_000, long: 1_000_000)

  test "owner_batch of #{@large} keys on a skeleton and a ring" do
    keys = keys(@large)
    nodes = node_names(1000)

    for target <- [HRW.build(nodes), HRW.Ring.new(nodes)] do
      batch = HRW.owner_batch(keys, target)
      assert length(batch) == @large
      # Spot-check against single lookups (all of them would take a while), by
      # index into tuples: Enum.at/2 on the lists would walk up to 2000 × 1M cells.
      {batch, keys} = {List.to_tuple(batch), List.to_tuple(keys)}

      for i <- Enum.take_random(0..(@large - 1), 2000) do
        assert elem(batch, i) == HRW.owner(elem(keys, i), target)
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

  test "moves compares owners by node, not by where their terms live" do
    # The same large nodes copied separately (as through :persistent_term): no key
    # moves; a node added moves exactly the keys it wins, as the term compare did.
    keys = Enum.map(1..500, &"key-#{&1}")
    nodes = Enum.map(1..3, &:binary.copy(<<&1>>, 100_000))
    copies = Enum.map(nodes, &:binary.copy/1)
    grown = copies ++ [:binary.copy("n", 100_000)]

    for built <- [&HRW.Ring.new/1, &HRW.build/1, & &1] do
      assert HRW.moves(keys, built.(nodes), built.(copies)) == []

      expected =
        for k <- keys, o = HRW.owner(k, nodes), n = HRW.owner(k, grown), o != n, do: {k, o, n}

      assert expected != []
      assert HRW.moves(keys, built.(nodes), built.(grown)) == expected
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

  # Every target kind the batch functions take: native, weighted, and scored in Elixir.
  defp all_targets do
    nodes = ["a", "b", "c"]
    weighted = [{"a", 1}, {"b", 2}, {"c", 3}]
    phash2 = %HRW{hash_fn: &:erlang.phash2/1}
    weighted_phash2 = %HRW.Weighted{hash_fn: &:erlang.phash2/1}

    [
      {"phash2 list", nodes, [scorer: phash2]},
      {"list", nodes, []},
      {"weighted list", weighted, [scorer: @weighted]},
      {"weighted phash2 list", weighted, [scorer: weighted_phash2]},
      {"custom scorer list", [1, 2, 3], [scorer: %HRW.BatchTest.Scorer{}]},
      {"ring", HRW.Ring.new(nodes), []},
      {"ring with overrides", HRW.Ring.new(nodes, overrides: %{"k" => "z"}), []},
      {"skeleton", HRW.build(nodes), []},
      {"weighted skeleton", HRW.build(weighted, scorer: @weighted), []},
      {"phash2 skeleton", HRW.build(nodes, scorer: phash2), []},
      {"weighted phash2 skeleton", HRW.build(weighted, scorer: weighted_phash2), []},
      {"phash2 skeleton with overrides",
       HRW.build(nodes, scorer: phash2, overrides: %{"k" => "z"}), []}
    ]
  end

  defp batch_entry_points(target, opts) do
    # The other side of a move: a list the options fit.
    other = if match?([scorer: %HRW.Weighted{}], opts), do: [{"a", 1}], else: ["a"]

    [
      {"owner_batch", &HRW.owner_batch(&1, target, opts)},
      {"group_by_owner", &HRW.group_by_owner(&1, target, opts)},
      {"moves (before)", &moves(&1, target, other, opts)},
      {"moves (after)", &moves(&1, other, target, opts)},
      {"moves (both)", &moves(&1, target, target, opts)},
      {"moved_fraction", &moved_fraction(&1, target, other, opts)}
    ]
  end

  test "improper and non-list keys raise ArgumentError on every batch path" do
    for {label, target, opts} <- all_targets(),
        {name, call} <- batch_entry_points(target, opts) do
      for keys <- [["k" | :x], ["k", "j" | "tail"], [1, 2, 3 | %{}]] do
        error = assert_raise ArgumentError, fn -> call.(keys) end
        assert error.message =~ "keys must be a proper list", "#{name} on #{label}"
      end

      for keys <- [:x, "abc", %{}, {1, 2}] do
        error = assert_raise ArgumentError, fn -> call.(keys) end
        assert error.message =~ "keys must be a list", "#{name} on #{label}"
      end

      # And proper lists work, the empty one included.
      call.([])
      call.(["k", "j"])
    end

    assert_raise ArgumentError, ~r/keys must be a proper list/, fn ->
      HRW.Bounded.assignments(["k" | :x], ["a"], hash_fn: &:erlang.phash2/1)
    end
  end

  test "bad targets raise ArgumentError on every batch path, even with no keys" do
    for {_label, _target, opts} <- all_targets(),
        bad <- [[], :x, ["a" | :b]],
        {name, call} <- batch_entry_points(bad, opts),
        keys <- [[], ["k"]] do
      label = "#{name} on #{inspect(bad)} with #{inspect(opts)}, keys #{inspect(keys)}"

      message =
        try do
          call.(keys)
          flunk("no error: #{label}")
        rescue
          error in ArgumentError -> error.message
        end

      assert message =~ ~r/non-empty list|proper list/, label
    end
  end

  # moves/3 and moved_fraction/3 when there are no options (they are the calls
  # users make today), else the /4 forms.
  defp moves(keys, a, b, []), do: HRW.moves(keys, a, b)
  defp moves(keys, a, b, opts), do: HRW.moves(keys, a, b, opts)
  defp moved_fraction(keys, a, b, []), do: HRW.moved_fraction(keys, a, b)
  defp moved_fraction(keys, a, b, opts), do: HRW.moved_fraction(keys, a, b, opts)

  # Targets whose owners are nil, false, 1 and 1.0: scored in Elixir and natively.
  defp odd_targets do
    phash2 = %HRW{hash_fn: &:erlang.phash2/1}

    for nodes <- [[nil], [false], [1], [1.0], [nil, false], [1, 1.0], [nil, 1]],
        {kind, target, opts} <- [
          {"phash2 skeleton", HRW.build(nodes, scorer: phash2), []},
          {"phash2 list", nodes, [scorer: phash2]},
          {"custom scorer list", nodes, [scorer: %HRW.BatchTest.Scorer{}]},
          {"skeleton", HRW.build(nodes), []},
          {"ring", HRW.Ring.new(nodes), []},
          {"list", nodes, []}
        ],
        do: {"#{kind} of #{inspect(nodes)}", target, opts}
  end

  test "moves and moved_fraction compare owners exactly; nil and false are owners" do
    keys = Enum.map(1..200, &"key-#{&1}")
    # The reproductions.
    phash2 = [scorer: %HRW{hash_fn: &:erlang.phash2/1}]
    assert length(HRW.moves(keys, HRW.build([nil], phash2), HRW.build([:x], phash2))) == 200
    assert length(HRW.moves(keys, HRW.build([false], phash2), HRW.build([:x], phash2))) == 200
    assert length(HRW.moves(keys, HRW.build([1], phash2), HRW.build([1.0], phash2))) == 200
    assert HRW.moved_fraction(keys, HRW.build([1], phash2), HRW.build([1.0], phash2)) == 1.0

    targets = odd_targets()

    for {label_a, a, opts_a} <- targets, {label_b, b, opts_b} <- targets, opts_a == opts_b do
      expected =
        for key <- keys,
            {from, to} = {HRW.owner(key, a, opts_a), HRW.owner(key, b, opts_b)},
            from !== to,
            do: {key, from, to}

      label = "#{label_a} -> #{label_b}"
      assert moves(keys, a, b, opts_a) === expected, label
      assert moved_fraction(keys, a, b, opts_a) == length(expected) / length(keys), label
    end
  end

  test "owner_batch and group_by_owner keep nil, false, 1 and 1.0 apart" do
    keys = Enum.map(1..200, &"key-#{&1}")

    for {label, target, opts} <- odd_targets() do
      owners = Enum.map(keys, &HRW.owner(&1, target, opts))
      assert HRW.owner_batch(keys, target, opts) === owners, label
      groups = HRW.group_by_owner(keys, target, opts)
      assert groups === Enum.group_by(keys, &HRW.owner(&1, target, opts)), label
      assert MapSet.new(Map.keys(groups)) == MapSet.new(owners), label
    end
  end

  test "moves on weighted lists and weighted structures score the weights" do
    keys = Enum.map(1..2000, &"key-#{&1}")
    before = [{"a", 1}, {"b", 1}, {"c", 1}]
    later = [{"a", 1}, {"b", 1}, {"c", 8}]
    weighted_phash2 = %HRW.Weighted{hash_fn: &:erlang.phash2/1}

    for scorer <- [@weighted, weighted_phash2] do
      opts = [scorer: scorer]

      expected =
        for key <- keys,
            {from, to} = {HRW.owner(key, before, opts), HRW.owner(key, later, opts)},
            from !== to,
            do: {key, from, to}

      moves = HRW.moves(keys, before, later, opts)
      assert moves === expected
      assert moves != []
      # Only keys going to the node that grew, and owners are bare nodes, not tuples.
      assert Enum.all?(moves, fn {_key, from, to} -> to == "c" and from in ["a", "b"] end)
      assert HRW.moved_fraction(keys, before, later, opts) == length(expected) / 2000

      built = fn nodes -> HRW.build(nodes, scorer: scorer) end
      assert HRW.moves(keys, built.(before), built.(later)) === expected
      assert HRW.moves(keys, built.(before), later, opts) === expected
    end

    ring = fn nodes -> HRW.Ring.new(nodes, scorer: @weighted) end

    assert HRW.moves(keys, ring.(before), ring.(later)) ==
             HRW.moves(keys, before, later, scorer: @weighted)
  end

  # A struct's node tuple changed by hand: reversed, two nodes swapped, one node
  # replaced by another term, one replaced by a copy of another node.
  defp tampered(%{nodes: nodes} = prepared) do
    list = Tuple.to_list(nodes)
    last = length(list) - 1
    swapped = list |> List.replace_at(0, Enum.at(list, last)) |> List.replace_at(last, hd(list))

    [
      reversed: %{prepared | nodes: list |> Enum.reverse() |> List.to_tuple()},
      swapped: %{prepared | nodes: List.to_tuple(swapped)},
      edited: %{prepared | nodes: put_elem(nodes, 7, "intruder")},
      duplicated: %{prepared | nodes: put_elem(nodes, 7, elem(nodes, 8))}
    ]
  end

  test "every batch refuses a ring or skeleton whose nodes were reordered or edited" do
    nodes = node_names(40)
    weighted = Enum.map(nodes, &{&1, :erlang.phash2(&1, 4) + 1})
    many = keys(500)

    prepared = [
      {"ring", HRW.Ring.new(nodes), []},
      {"weighted ring", HRW.Ring.new(weighted, scorer: @weighted), [scorer: @weighted]},
      {"ring with overrides", HRW.Ring.new(nodes, overrides: %{"k" => "z"}), []},
      {"skeleton", HRW.build(nodes), []},
      {"weighted skeleton", HRW.build(weighted, scorer: @weighted), [scorer: @weighted]},
      {"skeleton with overrides", HRW.build(nodes, overrides: %{"k" => "z"}), []}
    ]

    for {label, target, opts} <- prepared, {how, bad} <- tampered(target) do
      # Every node is some key's owner.
      assert many |> HRW.owner_batch(target, opts) |> Enum.uniq() |> length() == 40

      changed? = fn key ->
        elem(bad.nodes, index(target, key)) != elem(target.nodes, index(target, key))
      end

      one = Enum.find(many, changed?)
      untouched = Enum.reject(many, changed?)

      for {name, call} <- batch_entry_points(bad, opts), keys <- [many, [one]] do
        what = "#{name} on a #{how} #{label}, #{length(keys)} keys"
        error = assert_raise ArgumentError, fn -> call.(keys) end

        assert error.message =~ ~r/HRW\.(Ring|Skeleton) struct's nodes do not match its resource/,
               what

        # The same struct as built is accepted by the same call.
        good = target |> batch_entry_points(opts) |> Map.new() |> Map.fetch!(name)
        good.(keys)
      end

      # Keys that name no changed place get the resource's answers: the nodes they
      # name are checked, the others are not read.
      assert HRW.owner_batch(untouched, bad, opts) == HRW.owner_batch(untouched, target, opts)
      assert HRW.owner_batch([], bad, opts) == []
    end
  end

  # The index in `prepared`'s node tuple of the owner of `key` (no key of the
  # tests above is overridden).
  defp index(%{nodes: nodes} = prepared, key) do
    owner = HRW.owner(key, prepared)
    Enum.find_index(Tuple.to_list(nodes), &(&1 == owner))
  end

  test "a single lookup on a reordered struct reads its resource, as documented" do
    nodes = node_names(40)

    for target <- [HRW.Ring.new(nodes), HRW.build(nodes)],
        {_how, bad} <- tampered(target),
        key <- keys(50) do
      index = Enum.find_index(nodes, &(&1 == HRW.owner(key, target)))
      assert HRW.owner(key, bad) == elem(bad.nodes, index)
    end
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
  @moduletag :cpu_dependent

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
