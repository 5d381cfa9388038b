# Key types and the speed targets, with nothing but hrw: no Benchee, no Hex.
#
#   MIX_ENV=prod mix run bench/keys.exs            (from the repository root)
#
# Every figure is a median over repeated batches of one run (7 unless the table's
# title says otherwise), with varying keys (20,000
# distinct keys per type, each batch walks all of them): ns per call, including the
# loop (a direct recursive call per key, measured alone as "loop"). Ratios are
# within the run and, as in every bench/ table, theirs / ours: above 1 hrw is
# that many times faster (below 1, slower). Nodes are "node-1".."node-N". Each
# section runs in a fresh process. Sections (choose with
# BENCH_ONLY=term,owner,build,batch,bounded):
#
#   * term:    HRW.term_id/1 against :erlang.phash2/1 per key type;
#   * owner:   HRW.owner/2 on a skeleton and on a ring, against a libring-style ring
#              (libring's algorithm written here: 128 points per node, phash2 of
#              {node, i} in 2^32, a :gb_trees successor), at 10 and 10k nodes;
#   * build:   HRW.build and HRW.Ring.new of 10k nodes against phash2 over them
#              (Enum.map, and Map.new);
#   * batch:   HRW.owner_batch/2 of 1M binary keys on a 10k-node skeleton (one
#              rayon thread unless config says otherwise), next to the same batch
#              on a 1-node skeleton (everything but the descent), an Enum.map
#              of phash2 over the keys (what building a 1M-element list costs)
#              and the 10k-node batch of 1M {:user, i} keys;
#   * bounded: HRW.Bounded.assignments/3, 100k keys x 100 nodes, against hrw 0.2.1's
#              greedy (sort, dedup, per key the phash2 max over open nodes), next
#              to building a 100k-entry map alone.

defmodule KeysBench do
  @moduledoc false

  def key_types do
    [
      {"binary \"order:<i>\"", fn i -> "order:#{i}" end},
      {"integer i*104729", fn i -> i * 104_729 end},
      {"{:user, i}", fn i -> {:user, i} end},
      {"{:tenant, :eu, i}", fn i -> {:tenant, :eu, i} end},
      {"%{id: i, kind: :doc}", fn i -> %{id: i, kind: :doc} end}
    ]
  end

  def keys(gen, n \\ 20_000), do: Enum.map(1..n, gen)

  # Runs one section in a process of its own, so no section times the garbage
  # collection of another's data.
  def isolated(fun), do: fun |> Task.async() |> Task.await(:infinity)

  # Median ns per element of `fun.(keys)` (which walks every key once).
  def median_ns(keys, fun, batches \\ 7) do
    n = length(keys)
    fun.(keys)

    for _ <- 1..batches do
      {us, _} = :timer.tc(fn -> fun.(keys) end)
      us * 1000 / n
    end
    |> Enum.sort()
    |> Enum.at(div(batches, 2))
  end

  def median_us(fun, batches \\ 7) do
    fun.()

    for _ <- 1..batches do
      {us, _} = :timer.tc(fun)
      us
    end
    |> Enum.sort()
    |> Enum.at(div(batches, 2))
  end

  # Direct loops: no anonymous function call per key.
  def loop([_ | t]), do: loop(t)
  def loop([]), do: :ok

  def phash2([k | t]) do
    :erlang.phash2(k)
    phash2(t)
  end

  def phash2([]), do: :ok

  def term_id([k | t]) do
    HRW.term_id(k)
    term_id(t)
  end

  def term_id([]), do: :ok

  def owner([k | t], target) do
    HRW.owner(k, target)
    owner(t, target)
  end

  def owner([], _), do: :ok

  def libring([k | t], ring) do
    libring_owner(ring, k)
    libring(t, ring)
  end

  def libring([], _), do: :ok

  defdelegate libring_new(nodes), to: HRW.Report.Yardsticks, as: :libring_style

  defdelegate libring_owner(tree, key),
    to: HRW.Report.Yardsticks,
    as: :libring_style_owner

  # hrw 0.2.1's bounded greedy: HRW.Bounded runs exactly it given phash2.
  def old_bounded(keys, nodes, epsilon),
    do: HRW.Bounded.assignments(keys, nodes, epsilon: epsilon, hash_fn: &:erlang.phash2/1)

  def f(x) when x >= 100, do: :erlang.float_to_binary(x / 1, decimals: 0)
  def f(x), do: :erlang.float_to_binary(x / 1, decimals: 2)

  def row(cells), do: IO.puts("| " <> Enum.join(Enum.map(cells, &to_string/1), " | ") <> " |")
end

only = System.get_env("BENCH_ONLY", "term,owner,build,batch,bounded") |> String.split(",")
nodes = fn n -> Enum.map(1..n, &"node-#{&1}") end

if "term" in only do
  KeysBench.isolated(fn ->
    IO.puts("\n### HRW.term_id/1 against :erlang.phash2/1 (ns per call, 20k keys, median of 7)\n")
    KeysBench.row(["key", "loop", "phash2", "term_id", "phash2 / term_id"])
    KeysBench.row(["---", "--:", "--:", "--:", "--:"])

    for {name, gen} <- KeysBench.key_types() do
      keys = KeysBench.keys(gen)
      loop = KeysBench.median_ns(keys, &KeysBench.loop/1)
      ph = KeysBench.median_ns(keys, &KeysBench.phash2/1)
      id = KeysBench.median_ns(keys, &KeysBench.term_id/1)

      KeysBench.row([
        name,
        KeysBench.f(loop),
        KeysBench.f(ph),
        KeysBench.f(id),
        KeysBench.f(ph / id) <> "×"
      ])
    end
  end)
end

if "owner" in only do
  KeysBench.isolated(fn ->
    for n <- [10, 10_000] do
      ns = nodes.(n)
      skeleton = HRW.build(ns)
      ring = HRW.Ring.new(ns)
      lib = KeysBench.libring_new(ns)

      IO.puts(
        "\n### HRW.owner/2 at #{n} nodes against a libring-style ring " <>
          "(ns per call, median of 7)\n"
      )

      KeysBench.row([
        "key",
        "skeleton",
        "ring",
        "libring-style",
        "libring / skeleton",
        "libring / ring"
      ])

      KeysBench.row(["---", "--:", "--:", "--:", "--:", "--:"])

      for {name, gen} <- Enum.take(KeysBench.key_types(), 4) do
        keys = KeysBench.keys(gen)
        sk = KeysBench.median_ns(keys, &KeysBench.owner(&1, skeleton))
        ri = KeysBench.median_ns(keys, &KeysBench.owner(&1, ring))
        li = KeysBench.median_ns(keys, &KeysBench.libring(&1, lib))

        KeysBench.row([
          name,
          KeysBench.f(sk),
          KeysBench.f(ri),
          KeysBench.f(li),
          KeysBench.f(li / sk) <> "×",
          KeysBench.f(li / ri) <> "×"
        ])
      end
    end
  end)
end

if "build" in only do
  KeysBench.isolated(fn ->
    ns = nodes.(10_000)
    sk = KeysBench.median_us(fn -> HRW.build(ns) end, 11)
    ri = KeysBench.median_us(fn -> HRW.Ring.new(ns) end, 11)
    ph = KeysBench.median_us(fn -> Enum.map(ns, &:erlang.phash2/1) end, 11)
    pm = KeysBench.median_us(fn -> Map.new(ns, &{&1, :erlang.phash2(&1)}) end, 11)
    IO.puts("\n### Build from 10k nodes (µs, median of 11)\n")

    KeysBench.row([
      "HRW.build",
      "HRW.Ring.new",
      "Enum.map phash2",
      "Map.new phash2",
      "Enum.map / build",
      "Map.new / build"
    ])

    KeysBench.row(["--:", "--:", "--:", "--:", "--:", "--:"])
    KeysBench.row([sk, ri, ph, pm, KeysBench.f(ph / sk) <> "×", KeysBench.f(pm / sk) <> "×"])
  end)
end

if "batch" in only do
  KeysBench.isolated(fn ->
    skeleton = HRW.build(nodes.(10_000))
    one = HRW.build(["only"])
    keys = Enum.map(1..1_000_000, &"key-#{&1}")
    per_key = fn f -> KeysBench.f(KeysBench.median_us(f, 5) * 1000 / 1_000_000) end
    batch = per_key.(fn -> HRW.owner_batch(keys, skeleton) end)
    batch_one = per_key.(fn -> HRW.owner_batch(keys, one) end)
    map = per_key.(fn -> Enum.map(keys, &:erlang.phash2/1) end)
    tuples = Enum.map(1..1_000_000, &{:user, &1})
    batch_tuples = per_key.(fn -> HRW.owner_batch(tuples, skeleton) end)

    IO.puts(
      "\n### owner_batch, 1M binary keys (ns per key, median of 5, " <>
        "#{HRW.Batch.threads()} thread(s))\n"
    )

    KeysBench.row([
      "10k-node skeleton",
      "1-node skeleton (no descent)",
      "Enum.map phash2 (a 1M list)",
      "10k-node skeleton, {:user, i} keys"
    ])

    KeysBench.row(["--:", "--:", "--:", "--:"])
    KeysBench.row([batch, batch_one, map, batch_tuples])
  end)
end

if "bounded" in only do
  KeysBench.isolated(fn ->
    keys = Enum.map(1..100_000, &"key-#{&1}")
    ns = nodes.(100)
    native = KeysBench.median_us(fn -> HRW.Bounded.assignments(keys, ns) end, 5)
    old = KeysBench.median_us(fn -> KeysBench.old_bounded(keys, ns, 0.25) end, 3)
    pairs = Enum.zip(keys, Stream.cycle(ns))
    map = KeysBench.median_us(fn -> :maps.from_list(pairs) end, 5)

    IO.puts(
      "\n### HRW.Bounded.assignments/3, 100k keys x 100 nodes " <>
        "(ms; medians of 5, hrw 0.2.1 greedy of 3)\n"
    )

    KeysBench.row(["native", "hrw 0.2.1 greedy", "greedy / native", "the result map alone"])
    KeysBench.row(["--:", "--:", "--:", "--:"])

    KeysBench.row([
      KeysBench.f(native / 1000),
      KeysBench.f(old / 1000),
      KeysBench.f(old / native) <> "×",
      KeysBench.f(map / 1000)
    ])
  end)
end
