defmodule HRW.BudgetTest do
  # No NIF call may run long on a normal scheduler. Each normal-scheduler NIF charges
  # a budget for the work it is about to do, before doing it, and moves to a dirty
  # scheduler when the budget would run out. This checks it by construction, not by
  # timing: test builds count the work each call actually does where it is done
  # (scores, descent levels, terms visited, bytes hashed, elements copied, sorts; see
  # native/hrw_core/src/cost.rs, its `work` tally), and every call below, over a grid of shapes, must
  # have charged at least what it counted, and never more than the budget.
  use ExUnit.Case, async: true
  # The sub-binary header it reads (native/hrw_nif/src/bits.rs) is laid out by byte
  # order; s390x runs this file big-endian.
  @moduletag :cpu_dependent
  @moduletag :work_probes
  @moduletag skip: HRW.TestBuild.without_work_probes()

  alias HRW.NativeProbe

  # native/hrw_core/src/cost.rs, NORMAL_BUDGET.
  @budget 400_000

  # Runs the normal-scheduler NIF `name` on `args` and checks its tallies; returns
  # how it ended.
  defp probe(name, args) do
    {outcome, charged, counted} = NativeProbe.probe(name, args)
    label = "#{name} #{describe(args)}: #{inspect(outcome, limit: 3)}"
    assert charged <= @budget, "#{label} charged #{charged} > budget #{@budget}"

    assert counted <= charged,
           "#{label} did #{counted} units of work but charged only #{charged}"

    outcome
  end

  @covered ~w(term_id score weighted_score list_owner list_owners ring_new ring_owner
               ring_owners skeleton_new skeleton_owner skeleton_owners batch_owners
               batch_groups batch_moves bounded_assignments)a

  test "every normal-scheduler NIF has a probe, and every probe is exercised here" do
    probes =
      for {name, _arity} <- HRW.Native.__info__(:functions),
          text = Atom.to_string(name),
          String.ends_with?(text, "_probe"),
          do: text |> String.trim_trailing("_probe") |> String.to_atom()

    assert Enum.sort(probes) == Enum.sort(@covered)
  end

  test "a call that spends much of its budget reports it to the scheduler (reductions)" do
    # Each NIF call counts as one reduction unless it reports its time: a process
    # calling 0.3 ms NIFs back to back would then keep its scheduler for tens of
    # milliseconds. The report shows up in the caller's reductions.
    map = Map.new(1..4_000, &{&1, &1})
    nodes = names(10_000)
    small = HRW.build(names(10))

    for {fun, at_least} <- [
          {fn -> HRW.term_id(map) end, 100},
          {fn -> HRW.owner("k", nodes) end, 100},
          {fn -> HRW.owner("k", small) end, 0}
        ] do
      fun.()
      {:reductions, before} = Process.info(self(), :reductions)
      fun.()
      {:reductions, later} = Process.info(self(), :reductions)
      assert later - before >= at_least
      # A lookup of a few hundred units reports nothing: the hot path stays cheap.
      if at_least == 0, do: assert(later - before < 20)
    end
  end

  test "the probes count real work (so the checks below are not vacuous)" do
    s = HRW.build(names(1_000))
    r = HRW.Ring.new(names(1_000))

    for {name, args, at_least} <- [
          {:term_id, [{:user, 42}], 3},
          {:skeleton_owner, [s.resource, "k"], 16},
          {:ring_owner, [r.resource, "k"], 1_000},
          {:batch_owners, [names(100), HRW.Prepared.nif_target(s), 1], 100 * 16}
        ] do
      {:ok, charged, counted} = NativeProbe.probe(name, args)
      assert counted >= at_least and charged >= counted
    end
  end

  defp describe(args) do
    args
    |> Enum.map(fn
      [_ | _] = list ->
        "a list of #{HRW.Brief.brief(Enum.count(Stream.take(cells(list), 100_001)))} cells"

      t when is_tuple(t) and tuple_size(t) > 4 ->
        "tuple(#{tuple_size(t)})"

      r when is_reference(r) ->
        "resource"

      other ->
        HRW.Brief.brief(other)
    end)
    |> Enum.join(", ")
  end

  defp cells(list),
    do:
      Stream.unfold(list, fn
        [_ | t] -> {1, t}
        _ -> nil
      end)

  defp names(n, prefix \\ "node-"), do: Enum.map(1..n, &"#{prefix}#{&1}")
  defp weighted(nodes), do: Enum.with_index(nodes, fn n, i -> {n, rem(i, 7) + 1} end)

  defp terms do
    big_map = Map.new(1..12_000, &{&1, &1})

    [
      "order:123",
      :binary.copy("x", 1_000_000),
      :binary.copy("x", 20_000_000),
      123 * 104_729,
      -(2 ** 128 - 1),
      2 ** 200,
      -(2 ** 100_000),
      1.5,
      :an_atom,
      {:user, 42},
      {:tenant, :eu, 42},
      %{id: 1, kind: :doc},
      # The flat fast paths handing over to the general walk at every position.
      {1, [2], 3},
      {:a, {:b, 1}},
      {"x", 2.5, :c, 2 ** 70, <<1::3>>},
      {:a, 1, 2, 3, 4, 5, 6, 7},
      {1, 2, 3, 4, 5, 6, 7, 8, 9},
      %{a: [1], b: 2},
      %{[1] => :x},
      %{a: 1, b: 2.0, c: {1, 2}},
      %{1.0 => 2, 3 => "z", 4 => %{5 => [6]}},
      String.to_atom("budget_atom_#{System.unique_integer([:positive])}"),
      {String.to_atom("budget_atom_#{System.unique_integer([:positive])}"), 1},
      Map.new(1..40, &{&1, &1}),
      big_map,
      Map.new(1..100_000, &{&1, &1}),
      List.duplicate(1, 30_000),
      List.to_tuple(List.duplicate(1, 30_000)),
      List.to_tuple(List.duplicate(:a, 1_000_000)),
      [1, 2 | 3],
      <<1::3>>,
      self(),
      make_ref(),
      Enum.reduce(1..200, [], &[&1, &2]),
      Enum.reduce(1..300, [], &[&1, &2])
    ]
  end

  test "term_id and score charge every term, byte, element and sort of the term walk" do
    for term <- terms() do
      probe(:term_id, [term])
      probe(:score, [term, "node"])
      probe(:score, ["key", term])
      probe(:weighted_score, [term, {"node", 2}])
      probe(:weighted_score, ["key", {term, 2}])
    end

    assert probe(:term_id, [Map.new(1..12_000, &{&1, &1})]) == :needs_dirty
    assert probe(:weighted_score, ["key", List.to_tuple(List.duplicate(1, 1_000_000))]) != :ok
  end

  test "list owners charge every node, score and sort" do
    for n <- [1, 2, 10, 1_000, 20_000, 30_000, 100_000],
        nodes = names(n),
        weighted? <- [false, true],
        nodes = if(weighted?, do: weighted(nodes), else: nodes) do
      probe(:list_owner, ["key", nodes, weighted?])

      for count <- Enum.uniq([1, 2, div(n, 2) + 1, n]) do
        probe(:list_owners, ["key", nodes, count, weighted?])
      end
    end

    # Nodes that are themselves large terms.
    fat = Enum.map(1..200, &{:node, &1, List.duplicate(&1, 200)})
    probe(:list_owner, ["key", fat, false])
    probe(:list_owners, ["key", fat, 3, false])
    assert probe(:list_owners, ["key", weighted(names(22_000)), 2, true]) == :needs_dirty
  end

  test "rings charge their build, every scanned node and the owners sort" do
    for n <- [1, 10, 1_000, 10_000, 100_000], weighted? <- [false, true] do
      nodes = if weighted?, do: weighted(names(n)), else: names(n)
      probe(:ring_new, [nodes, weighted?])
      ring = HRW.Ring.new(nodes, if(weighted?, do: [scorer: %HRW.Weighted{}], else: []))

      for key <- ["k", {:user, 1}, :binary.copy("k", 2_000_000)] do
        probe(:ring_owner, [ring.resource, key])

        for count <- Enum.uniq([0, 1, 2, 100, n, n + 5]),
            do: probe(:ring_owners, [ring.resource, key, count])
      end
    end

    assert probe(:ring_owners, [HRW.Ring.new(names(100_000)).resource, "k", 2]) == :needs_dirty
    assert probe(:ring_new, [names(22_000), false]) == :needs_dirty
  end

  # The deepest skeleton: about 12 levels above its 16-node leaves in the quick run,
  # 13 in ./scripts/test.
  @deep HRW.TestSize.pick(quick: 50_000, ci: 100_000, long: 100_000)

  test "skeletons charge every level, every leaf node scanned and every rank" do
    shapes =
      for n <- [1, 5, 16, 17, 1_000, @deep],
          leaf <- [1, 4, 16, 256, 4096],
          weighted? <- [false, true],
          leaf <= max(n, 16),
          do: {n, leaf, weighted?}

    for {n, leaf, weighted?} <- shapes do
      nodes = if weighted?, do: weighted(names(n)), else: names(n)
      scorer = if weighted?, do: [scorer: %HRW.Weighted{}], else: []
      if n <= 10_000, do: probe(:skeleton_new, [nodes, weighted?, leaf])
      skeleton = HRW.build(nodes, [cluster_size: leaf] ++ scorer)

      for key <- ["k", 42, {:user, 7}] do
        probe(:skeleton_owner, [skeleton.resource, key])

        for count <- Enum.uniq([0, 1, 2, 3, 47, 48, 100, 6666, n, n + 1]),
            count <= n + 1,
            do: probe(:skeleton_owners, [skeleton.resource, key, count])
      end
    end
  end

  test "a build too large for the budget goes dirty before decoding its list" do
    # Decided from the list's length (a capped walk of its cells), so the list is
    # decoded once, on the dirty scheduler, not also on the normal one first.
    for n <- [10_000, 100_000], {name, args} <- [skeleton_new: [false, 16], ring_new: [false]] do
      {outcome, _charged, counted} = NativeProbe.probe(name, [names(n) | args])
      assert outcome == :needs_dirty
      # The walk of at most ~3,200 cells; decoding even 1,000 nodes counts more.
      assert counted < 20_000, "#{name} of #{n} nodes counted #{counted} units before giving up"
    end

    # Lists that fit are still built on the normal scheduler.
    assert probe(:skeleton_new, [names(1_000), false, 16]) == :ok
    assert probe(:ring_new, [names(1_000), false]) == :ok
  end

  test "a key list longer than 8,192 keys asks for a dirty scheduler before hashing a key" do
    # native/hrw_core/src/cost.rs, MAX_NORMAL_KEYS: only the cells are counted (2 units a
    # cell, in chunks of 64); hashing 8,193 keys would charge 16 units each.
    t = HRW.Prepared.nif_target(HRW.build(names(10)))
    keys = Enum.map(1..8_193, &"key-#{&1}")
    cells = 2 * 64 * (div(8_193, 64) + 1)

    for {name, args} <- [
          batch_owners: [keys, t, 1],
          batch_groups: [keys, t, 1],
          batch_moves: [keys, t, t, 1],
          bounded_assignments: [keys, names(10), 0.1]
        ] do
      assert {:needs_dirty, charged, _} = NativeProbe.probe(name, args)
      assert charged <= cells + 2_000, "#{name} charged #{charged}"
    end

    assert {:ok, _, _} = NativeProbe.probe(:batch_owners, [Enum.take(keys, 1_000), t, 1])
  end

  test "the found stalls now go to a dirty scheduler" do
    # 6666 replicas on a weighted 100k-node skeleton with 4096-node leaves.
    nodes = weighted(names(100_000))
    s = HRW.build(nodes, cluster_size: 4096, scorer: %HRW.Weighted{})
    assert probe(:skeleton_owners, [s.resource, "k", 6666]) == :needs_dirty

    assert probe(:batch_owners, [Enum.to_list(1..3_900), HRW.Prepared.nif_target(s), 1]) ==
             :needs_dirty

    # Still answered, on the dirty scheduler.
    assert length(HRW.owners("k", s, 6666)) == 6666
  end

  # A million nodes in ./scripts/test, 200,000 in the quick run.
  @big HRW.TestSize.pick(quick: 200_000, ci: 1_000_000, long: 1_000_000)

  @tag timeout: HRW.TestTimeouts.ms(300_000)
  test "batches charge keys, lookups and results, never the size of the target" do
    big = HRW.build(names(@big))
    skeletons = [HRW.build(names(10)), HRW.build(names(10_000)), big]
    rings = [HRW.Ring.new(names(10)), HRW.Ring.new(names(5_000))]
    lists = [{:list, names(10), false}, {:list, weighted(names(1_000)), true}]
    targets = Enum.map(skeletons ++ rings, &HRW.Prepared.nif_target/1) ++ lists

    for t <- targets, n <- [0, 1, 2, 100, 3_000, 8_192] do
      keys = Enum.map(1..n//1, &"key-#{&1}")
      probe(:batch_owners, [keys, t, 1])
      probe(:batch_groups, [keys, t, 1])
      probe(:batch_moves, [keys, t, hd(targets), 1])
    end

    # One key against the largest skeleton costs one lookup: the nodes tuple is never
    # read.
    one = ["key"]
    big_t = HRW.Prepared.nif_target(big)

    for name <- [:batch_owners, :batch_groups],
        do: assert(probe(name, [one, big_t, 1]) == :ok)

    assert probe(:batch_moves, [one, big_t, big_t, 1]) == :ok
  end

  # A binary of `n` bytes that does not start on a byte boundary (inspecting it
  # copies it).
  defp unaligned(n) do
    # The size is read by the same pattern that uses it: Elixir 1.20 warns on a
    # size variable bound outside the match, and 1.14 cannot pin one.
    <<size::64, _::1, k::binary-size(size), _::7>> = <<n::64, :binary.copy(<<0>>, n + 1)::binary>>
    k
  end

  # A node term of `n` bytes that is not shared with any other (a fresh copy).
  defp blob(i, n), do: :binary.copy(<<rem(i, 251)>>, n)

  test "node terms of 1 B to 1 MB: builds, owners, groups and moves charge their size" do
    keys = Enum.map(1..2_000, &"key-#{&1}")

    for size <- [1, 100, 10_000, 100_000, 1_000_000], count <- [1, 3, 40] do
      nodes = Enum.map(1..count, &blob(&1, size))
      # The same nodes, copied separately (as through :persistent_term).
      copies = Enum.map(nodes, &:binary.copy/1)
      ring = HRW.Ring.new(nodes)
      {ta, tb} = {HRW.Prepared.nif_target(ring), HRW.Prepared.nif_target(HRW.Ring.new(copies))}
      probe(:list_owner, ["key", nodes, false])
      probe(:ring_new, [nodes, false])
      probe(:batch_owners, [keys, ta, 1])
      probe(:batch_groups, [keys, ta, 1])
      probe(:batch_moves, [keys, ta, tb, 1])
      probe(:batch_moves, [keys, ta, {:list, copies, false}, 1])
      probe(:batch_moves, [keys, {:list, copies, false}, ta, 1])
    end
  end

  test "the found uncharged work is charged (each returned :ok before)" do
    keys = Enum.map(1..2_000, &"key-#{&1}")
    mb = Enum.map(1..3, &blob(&1, 1_000_000))
    :persistent_term.put({__MODULE__, :mb}, HRW.Ring.new(mb))
    copied = :persistent_term.get({__MODULE__, :mb})
    ring = HRW.Ring.new(mb)

    # moves over separately copied 1 MB nodes compared them as terms for each key;
    # now each node is hashed once and paid for (or the call goes dirty).
    {outcome, charged, _} =
      NativeProbe.probe(:batch_moves, [
        keys,
        HRW.Prepared.nif_target(ring),
        HRW.Prepared.nif_target(copied),
        1
      ])

    assert outcome == :needs_dirty or charged >= 6 * div(1_000_000, 16)

    # group_by_owner's map hashes its 40 one-megabyte keys.
    forty = HRW.Ring.new(Enum.map(1..40, &blob(&1, 1_000_000)))
    assert probe(:batch_groups, [keys, HRW.Prepared.nif_target(forty), 1]) == :needs_dirty

    # Unaligned binaries are copied before they are hashed: a key, a node, a batch.
    assert probe(:term_id, [unaligned(6_300_000)]) == :needs_dirty
    assert probe(:term_id, [unaligned(500_000)]) == :needs_dirty
    assert {:ok, charged, _} = NativeProbe.probe(:term_id, [unaligned(100_000)])
    assert charged >= 100_000
    assert probe(:list_owner, ["k", [unaligned(1_000_000), "b"], false]) == :needs_dirty
    assert probe(:ring_new, [[unaligned(1_000_000), "b"], false]) == :needs_dirty
    batch = Enum.map(1..10, fn _ -> unaligned(100_000) end)
    assert probe(:batch_owners, [batch, HRW.Prepared.nif_target(ring), 1]) == :needs_dirty

    # ids built through term_to_binary, charged by their (bounded) encoded size.
    assert probe(:term_id, [Enum.map(1..1_000, &(2 ** 2039 + &1))]) == :needs_dirty
    assert probe(:term_id, [Enum.map(1..1_000, &(-(2 ** 2039) - &1))]) == :needs_dirty
    assert probe(:term_id, [Enum.map(1..1_000, fn _ -> make_ref() end)]) == :needs_dirty
    assert probe(:term_id, [List.duplicate(self(), 1_000)]) == :needs_dirty

    # An atom missing from the cache pays for reading its name, by its length.
    long = String.to_atom(String.duplicate("q", 240) <> "#{System.unique_integer([:positive])}")
    assert {:ok, charged, _} = NativeProbe.probe(:term_id, [long])
    assert charged >= 240 / 2 + 48
  end

  test "the atom cache keeps caching new atoms once it is full" do
    # More atoms than its 8,192 slots, then fresh ones: the second id of a fresh
    # atom comes from the cache (no name read charged). It evicts, so a concurrent
    # test may evict one of ours: one hit among a few fresh atoms is enough.
    fill = for i <- 1..20_000, do: String.to_atom("cache_fill_#{i}_#{System.unique_integer()}")
    HRW.NativeProbe.dirty_term_id(fill)

    hits =
      for i <- 1..5 do
        atom = String.to_atom("cache_fresh_#{i}_#{System.unique_integer([:positive])}")
        {:ok, first, _} = NativeProbe.probe(:term_id, [atom])
        {:ok, second, _} = NativeProbe.probe(:term_id, [atom])
        second < first
      end

    assert Enum.any?(hits)
  end

  test "ETF-built ids, unaligned binaries and atom misses in every container shape" do
    atoms =
      for i <- 1..300,
          do:
            String.to_atom(
              String.duplicate("z", 230) <> "#{i}_#{System.unique_integer([:positive])}"
            )

    for term <- [
          unaligned(1),
          unaligned(64),
          unaligned(10_000),
          {unaligned(100), unaligned(5)},
          [unaligned(3) | unaligned(1_000)],
          %{unaligned(7) => unaligned(9)},
          Enum.map(1..300, &(2 ** 2000 + &1)),
          List.to_tuple(Enum.map(1..300, &(2 ** 100 + &1))),
          Map.new(1..100, &{&1, make_ref()}),
          {self(), make_ref(), hd(atoms)},
          atoms,
          List.to_tuple(atoms)
        ] do
      probe(:term_id, [term])
      probe(:list_owner, ["k", [term, "n"], false])
      probe(:batch_owners, [[term, "k"], HRW.Prepared.nif_target(HRW.build(names(10))), 1])
    end
  end

  test "bounded assignments charge keys, scans, sorts and the result map" do
    for k <- [0, 1, 100, 2_000, 8_000], n <- [1, 10, 100, 1_000] do
      keys = Enum.map(1..k//1, &"key-#{&1}")

      for eps <- [0.0, 0.25],
          do: probe(:bounded_assignments, [keys, names(n), eps])
    end

    # Large keys: the result map hashes (or compares) each of them.
    for size <- [1, 1_000, 100_000], k <- [2, 40, 200] do
      keys = Enum.map(1..k, &(blob(&1 + 1_000, size) <> "#{&1}"))
      probe(:bounded_assignments, [keys, names(10), 0.1])
    end

    big = Enum.map(1..40, &(blob(&1, 100_000) <> "#{&1}"))
    assert probe(:bounded_assignments, [big, names(10), 0.1]) == :needs_dirty
  end
end

defmodule HRW.SubBinaryLayoutTest do
  # The fallback of the one VM layout the library reads (native/hrw_nif/src/bits.rs:
  # the size of a binary that starts off a byte boundary, charged before the VM
  # copies it): on an ERTS whose layout it does not know, no size is read and the
  # copy goes uncharged. The ids must not change. Not async: the switch is the whole
  # VM's, and async tests (run before this module) read it.
  use ExUnit.Case, async: false
  @moduletag :cpu_dependent
  @moduletag :work_probes
  @moduletag skip: HRW.TestBuild.without_work_probes()

  # A binary of `n` bytes that does not start on a byte boundary.
  defp unaligned(n) do
    <<size::64, _::1, k::binary-size(size), _::7>> = <<n::64, :binary.copy(<<9>>, n + 1)::binary>>
    k
  end

  defp layout(on?), do: apply(HRW.Native, :sub_binary_layout, [on?])

  test "the same ids, owners and batches when the sub-binary layout is not read" do
    bins = Enum.map([0, 1, 7, 100, 4096, 100_000], &unaligned/1)

    terms =
      bins ++ [List.to_tuple(bins), bins, Map.new(Enum.with_index(bins)), {:k, hd(tl(bins))}]

    ring = HRW.Ring.new(["a", "b", "c"])
    skeleton = HRW.build(Enum.map(1..100, &"n#{&1}"))

    answers = fn ->
      {Enum.map(terms, &HRW.term_id/1), Enum.map(terms, &HRW.owner(&1, skeleton)),
       HRW.owner_batch(terms, ring), HRW.owner(Enum.at(bins, 3), bins)}
    end

    charged = fn -> elem(HRW.NativeProbe.probe(:term_id, [Enum.at(bins, 4)]), 1) end

    assert layout(true), "this VM's layout is read (docs/MAINTAINING.md lists the versions)"
    read = answers.()
    charged_read = charged.()

    try do
      refute layout(false)
      assert answers.() == read
      # The fallback took effect: the copy of 4096 bytes is no longer charged.
      assert charged.() < charged_read
      # The ids are the ids of aligned copies, as docs/HASHING.md defines them.
      assert elem(read, 0) |> Enum.take(length(bins)) ==
               Enum.map(bins, &HRW.term_id(:binary.copy(&1)))
    after
      layout(true)
    end

    assert charged.() == charged_read
  end
end

defmodule HRW.AtomCacheTest do
  # The fallback of the atom cache (native/hrw_nif/src/term_id/mod.rs: atom ids
  # cached under the atom's term word, on the ERTS versions whose atoms are never
  # collected): on any other ERTS the cache is off and every atom's id comes from
  # its name. The ids must not change. Not async: the switch is the whole VM's.
  use ExUnit.Case, async: false
  @moduletag :work_probes
  @moduletag skip: HRW.TestBuild.without_work_probes()

  defp cache(on?), do: apply(HRW.Native, :atom_cache, [on?])

  test "the same ids, owners and batches without the atom cache" do
    # Atoms the cache has seen and atoms it has not, alone and inside terms.
    atoms = [
      :ok,
      nil,
      true,
      :"a-#{System.unique_integer()}",
      :ünïcödé,
      :"#{String.duplicate("z", 255)}"
    ]

    # Walks guess an atom after an atom, and a map's keys are guessed atoms: the
    # guesses must not matter, right or wrong.
    mixed = [:a, 1, :b, "x", :c, {:d}, :e, %{}, :f, [:g], 2.5, :h]
    mixed_keys = %{:a => 1, "b" => :c, 3 => :d, {:e} => :f, [:g] => "h", 4.5 => nil}

    terms =
      atoms ++
        [List.to_tuple(atoms), atoms, Map.new(Enum.with_index(atoms)), {:user, 7}] ++
        mixed ++ [mixed, mixed_keys, Map.new(mixed, &{&1, &1})]

    ring = HRW.Ring.new([:a, :b, :c])
    skeleton = HRW.build(Enum.map(1..100, &:"n#{&1}"))

    answers = fn ->
      {Enum.map(terms, &HRW.term_id/1), Enum.map(terms, &HRW.owner(&1, skeleton)),
       HRW.owner_batch(terms, ring), HRW.owner(:k, atoms), HRW.owner(:k, mixed)}
    end

    charged = fn ->
      elem(HRW.NativeProbe.probe(:term_id, [:"#{String.duplicate("y", 200)}"]), 1)
    end

    assert cache(true), "this VM's atoms are cached (docs/MAINTAINING.md lists the versions)"
    cached = answers.()
    # Its second use: from the cache.
    _first = charged.()
    charged_cached = charged.()

    try do
      refute cache(false)
      assert answers.() == cached
      # The fallback took effect: the atom's name is read and hashed again.
      assert charged.() > charged_cached
    after
      cache(true)
    end

    assert charged.() == charged_cached
  end
end
