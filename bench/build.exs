# Build (and so rebuild) time of each structure from a list of N nodes, at 10, 100,
# 1k and 10k nodes.
#
#   mix run build.exs          (see README.md for the environment it needs)
#
# hrw's skeleton (HRW.build) and exact ring (HRW.Ring.new) are immutable: a change
# of membership is a rebuild, so this is also their rebuild time. libring builds
# with HashRing.add_nodes on an empty ring (128 points per node). ExHashRing's ring
# is a process with an ETS table (512 points per node): its time is start_link with
# the nodes, then stop, which deletes the table. hrw 0.2.1's build/2 is included
# when loaded as OldHRW.

old = HRWBench.old_hrw()

inputs = for n <- HRWBench.sizes(), do: {"#{n} nodes", HRWBench.nodes(n)}

jobs = %{
  "hrw build (skeleton)" => fn nodes -> HRW.build(nodes) end,
  "hrw Ring.new" => fn nodes -> HRW.Ring.new(nodes) end,
  "libring add_nodes" => fn nodes -> HashRing.add_nodes(HashRing.new(), nodes) end,
  "ExHashRing start+stop" => fn nodes ->
    {:ok, ring} = ExHashRing.Ring.start_link(nodes: nodes)
    ExHashRing.Ring.stop(ring)
  end
}

jobs = if old, do: Map.put(jobs, "hrw 0.2.1 build", &old.build(&1, [])), else: jobs

jobs
|> Benchee.run(HRWBench.options(inputs: inputs, title: "build"))
|> HRWBench.summary(
  "build from N nodes",
  ["hrw build (skeleton)", "hrw Ring.new"],
  ["libring add_nodes", "ExHashRing start+stop", "hrw 0.2.1 build"]
)
