# The owners of 100,000 keys ("key-1".."key-100000") at once: HRW.owner_batch/3
# against looping single lookups over the keys, with hrw and with the other
# libraries, at 10, 100, 1k and 10k nodes.
#
#   mix run batch.exs          (see README.md for the environment it needs)
#
# owner_batch runs large batches on dirty CPU schedulers, over a pool of one thread
# fewer than the dirty CPU schedulers (1 thread on a 2-core machine).
#
# The single-lookup rows walk the keys with one loop for every library,
# HRWBench.each/2: tail-recursive, one call of the lookup per key, results
# dropped. It allocates nothing itself, so a row times the lookups and their own
# garbage, not the collections of a 100k-deep Enum.map's stack and result list.
# The row "libring Enum.map (GC included)" shows what that costs; it is in the
# medians only, not in the ratios. owner_batch builds its result list: that is
# part of what it returns.

old = HRWBench.old_hrw()
keys = HRWBench.keys(100_000)

inputs = HRWBench.inputs(old)

jobs = %{
  "hrw owner_batch(skeleton)" => fn %{skeleton: skeleton} -> HRW.owner_batch(keys, skeleton) end,
  "hrw owner_batch(Ring)" => fn %{ring: ring} -> HRW.owner_batch(keys, ring) end,
  "hrw owner_batch(list)" => fn %{nodes: nodes} -> HRW.owner_batch(keys, nodes) end,
  "hrw loop owner(skeleton)" => fn %{skeleton: skeleton} ->
    HRWBench.each(keys, &HRW.owner(&1, skeleton))
  end,
  "hrw loop owner(Ring)" => fn %{ring: ring} -> HRWBench.each(keys, &HRW.owner(&1, ring)) end,
  "libring loop" => fn %{libring: ring} ->
    HRWBench.each(keys, &HashRing.key_to_node(ring, &1))
  end,
  "ExHashRing loop" => fn %{ex_hash_ring: ring} ->
    HRWBench.each(keys, &ExHashRing.Ring.find_node(ring, &1))
  end,
  "libring Enum.map (GC included)" => fn %{libring: ring} ->
    Enum.map(keys, &HashRing.key_to_node(ring, &1))
  end
}

jobs =
  if old do
    Map.put(jobs, "hrw 0.2.1 loop owner(skeleton)", fn %{old_skeleton: skeleton} ->
      HRWBench.each(keys, &old.owner(&1, skeleton, []))
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
    "hrw loop owner(skeleton)",
    "hrw loop owner(Ring)",
    "libring loop",
    "ExHashRing loop",
    "hrw 0.2.1 loop owner(skeleton)"
  ]
)
