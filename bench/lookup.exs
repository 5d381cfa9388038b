# Single lookups: which node owns a key, at 10, 100, 1k and 10k nodes.
#
#   mix run lookup.exs          (see README.md for the environment it needs)
#
# Two key modes:
#
#   * constant key: hrw 0.2.1's own benchmark setup, one lookup of "test" per
#     Benchee call. Every sample also holds the timer's cost: see the
#     "(empty function)" job.
#   * varying keys: each call looks up the next 100 keys of a cycle of 10,000
#     distinct keys; medians are divided by 100 (time per key). The loop's cost is
#     the "(key loop only)" job. Run once per key type (BENCH_KEY_TYPES, default
#     binary,integer,tuple: "key-<i>", i * 104729, {:user, i}), since hashing a key
#     costs differently by type for every library.
#
# Compared: hrw's owner on a list, HRW.Ring and the skeleton (HRW.build); libring
# HashRing.key_to_node; ExHashRing.Ring.find_node (a ring process, ETS lookups);
# hrw 0.2.1's owner on a list and on its skeleton, when loaded as OldHRW; and
# "libring-style ring", libring's algorithm written in HRWBench (128 points per
# node, phash2, a :gb_trees successor), which needs no package.

old = HRWBench.old_hrw()

inputs = HRWBench.inputs(old)

ours = ["hrw owner(list)", "hrw Ring", "hrw skeleton"]

theirs = [
  "libring",
  "libring-style ring",
  "ExHashRing",
  "hrw 0.2.1 owner(list)",
  "hrw 0.2.1 skeleton"
]

constant = %{
  "(empty function)" => fn _ -> :ok end,
  "hrw owner(list)" => fn %{nodes: nodes} -> HRW.owner("test", nodes) end,
  "hrw Ring" => fn %{ring: ring} -> HRW.owner("test", ring) end,
  "hrw skeleton" => fn %{skeleton: skeleton} -> HRW.owner("test", skeleton) end,
  "libring" => fn %{libring: ring} -> HashRing.key_to_node(ring, "test") end,
  "ExHashRing" => fn %{ex_hash_ring: ring} -> ExHashRing.Ring.find_node(ring, "test") end
}

per_call = 100

# The varying-key jobs, each looking up the next `per_call` keys that `next.()` gives.
varying_jobs = fn next ->
  %{
    "(key loop only)" => fn _ -> HRWBench.each(next.(), fn key -> key end) end,
    "hrw owner(list)" => fn %{nodes: nodes} ->
      HRWBench.each(next.(), &HRW.owner(&1, nodes))
    end,
    "hrw Ring" => fn %{ring: ring} -> HRWBench.each(next.(), &HRW.owner(&1, ring)) end,
    "hrw skeleton" => fn %{skeleton: skeleton} ->
      HRWBench.each(next.(), &HRW.owner(&1, skeleton))
    end,
    "libring" => fn %{libring: ring} ->
      HRWBench.each(next.(), &HashRing.key_to_node(ring, &1))
    end,
    "libring-style ring" => fn %{libring_style: tree} ->
      HRWBench.each(next.(), &HRWBench.libring_style_owner(tree, &1))
    end,
    "ExHashRing" => fn %{ex_hash_ring: ring} ->
      HRWBench.each(next.(), &ExHashRing.Ring.find_node(ring, &1))
    end
  }
end

# hrw 0.2.1, when loaded: called through a variable, as it may be absent.
old_constant = %{
  "hrw 0.2.1 owner(list)" => fn %{nodes: nodes} -> old.owner("test", nodes, []) end,
  "hrw 0.2.1 skeleton" => fn %{old_skeleton: skeleton} -> old.owner("test", skeleton, []) end
}

old_varying = fn next ->
  %{
    "hrw 0.2.1 owner(list)" => fn %{nodes: nodes} ->
      HRWBench.each(next.(), &old.owner(&1, nodes, []))
    end,
    "hrw 0.2.1 skeleton" => fn %{old_skeleton: skeleton} ->
      HRWBench.each(next.(), &old.owner(&1, skeleton, []))
    end
  }
end

constant = if old, do: Map.merge(constant, old_constant), else: constant

modes = System.get_env("BENCH_MODES", "constant,varying") |> String.split(",", trim: true)

if "constant" in modes do
  constant
  |> Benchee.run(HRWBench.options(inputs: inputs, title: "lookup, constant key"))
  |> HRWBench.summary("lookup, constant key \"test\"", ours, theirs)
end

# ExHashRing's find_node hashes to_string(key): a key without String.Chars (a
# tuple) raises. Such a cell is left out, with a note in the table, rather than
# crash the suite.
ex_hash_ring_skip = fn type ->
  [key | _] = HRWBench.keys(1, type)
  {_, %{ex_hash_ring: ring}} = hd(inputs)

  try do
    _ = ExHashRing.Ring.find_node(ring, key)
    []
  rescue
    e ->
      [
        {"ExHashRing",
         "find_node hashes to_string(key), which raises on #{inspect(key)} " <>
           "(#{inspect(e.__struct__)})"}
      ]
  end
end

if "varying" in modes do
  for type <- HRWBench.key_types() do
    {next, ^per_call} = HRWBench.key_cycle(10_000, per_call, type)
    skipped = ex_hash_ring_skip.(type)
    jobs = Map.drop(varying_jobs.(next), Enum.map(skipped, &elem(&1, 0)))
    jobs = if old, do: Map.merge(jobs, old_varying.(next)), else: jobs

    jobs
    |> Benchee.run(HRWBench.options(inputs: inputs, title: "lookup, varying #{type} keys"))
    |> HRWBench.summary("lookup, 10k varying #{type} keys", ours, theirs, per_call, skipped)
  end
end
