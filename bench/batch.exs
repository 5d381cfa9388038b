# The owners of 100,000 keys ("key-1".."key-100000") at once: HRW.owner_batch/3
# against mapping single lookups over the keys, with hrw and with the other
# libraries, at 10, 100, 1k and 10k nodes.
#
#   mix run batch.exs          (see README.md for the environment it needs)
#
# owner_batch runs large batches on dirty CPU schedulers, over a pool of one thread
# fewer than the dirty CPU schedulers (1 thread on a 2-core machine).
#
# Enum.map over 100k keys holds a deep stack and a growing result list, which every
# garbage collection has to scan: lookups that allocate per key (libring's gb_trees
# iterator, ExHashRing, hrw 0.2.1) trigger many and pay for it here, well beyond
# their single-lookup time in lookup.exs. That is part of what is measured.

old = HRWBench.old_hrw()
keys = HRWBench.keys(100_000)

setup = fn n ->
  nodes = HRWBench.nodes(n)
  {:ok, ex_hash_ring} = ExHashRing.Ring.start_link(nodes: nodes)

  %{
    nodes: nodes,
    ring: HRW.Ring.new(nodes),
    skeleton: HRW.build(nodes),
    libring: HashRing.add_nodes(HashRing.new(), nodes),
    ex_hash_ring: ex_hash_ring,
    old_skeleton: old && old.build(nodes, [])
  }
end

IO.puts("building the rings for #{inspect(HRWBench.sizes())} nodes...")
inputs = for n <- HRWBench.sizes(), do: {"#{n} nodes", setup.(n)}

jobs = %{
  "hrw owner_batch(skeleton)" => fn %{skeleton: skeleton} -> HRW.owner_batch(keys, skeleton) end,
  "hrw owner_batch(Ring)" => fn %{ring: ring} -> HRW.owner_batch(keys, ring) end,
  "hrw owner_batch(list)" => fn %{nodes: nodes} -> HRW.owner_batch(keys, nodes) end,
  "hrw Enum.map owner(skeleton)" => fn %{skeleton: skeleton} ->
    Enum.map(keys, &HRW.owner(&1, skeleton))
  end,
  "hrw Enum.map owner(Ring)" => fn %{ring: ring} -> Enum.map(keys, &HRW.owner(&1, ring)) end,
  "libring Enum.map" => fn %{libring: ring} -> Enum.map(keys, &HashRing.key_to_node(ring, &1)) end,
  "ExHashRing Enum.map" => fn %{ex_hash_ring: ring} ->
    Enum.map(keys, &ExHashRing.Ring.find_node(ring, &1))
  end
}

jobs =
  if old do
    Map.put(jobs, "hrw 0.2.1 Enum.map owner(skeleton)", fn %{old_skeleton: skeleton} ->
      Enum.map(keys, &old.owner(&1, skeleton, []))
    end)
  else
    jobs
  end

jobs
|> Benchee.run(HRWBench.options(inputs: inputs, title: "owners of 100k keys"))
|> HRWBench.summary(
  "owners of 100k keys",
  ["hrw owner_batch(skeleton)", "hrw owner_batch(Ring)", "hrw owner_batch(list)"],
  [
    "hrw Enum.map owner(skeleton)",
    "hrw Enum.map owner(Ring)",
    "libring Enum.map",
    "ExHashRing Enum.map",
    "hrw 0.2.1 Enum.map owner(skeleton)"
  ]
)
