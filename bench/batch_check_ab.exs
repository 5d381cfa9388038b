# What the batches' node check costs: `HRW.owner_batch/2` on rings and skeletons
# of binary and of atom nodes, with the check on and off in turn in one VM (us per
# batch; the median of 15 rounds, and the median of the pairwise on/off ratios).
# The check reads every node a batch answers and compares its id with the one its
# resource holds there (docs/GUARANTEES.md, "Structures changed by hand"). Needs a
# test build (the `batch_check/1` switch, which no production build has):
#   MIX_ENV=test mix run bench/batch_check_ab.exs
switch = &apply(HRW.Native, :batch_check, [&1])
binaries = fn n -> Enum.map(1..n, &"node-#{&1}") end
atoms = fn n -> Enum.map(1..n, &:"node-#{&1}@host") end
keys = fn n -> Enum.map(1..n, &"key-#{&1}") end

# us per batch over enough batches for about 50 ms.
time = fn fun ->
  reps = max(1, round(50_000 / max(elem(:timer.tc(fun), 0), 1)))
  {us, _} = :timer.tc(fn -> for _ <- 1..reps, do: fun.() end)
  us / reps
end

cases = [
  {"ring of 100 binaries, 100 keys", HRW.Ring.new(binaries.(100)), keys.(100)},
  {"skeleton of 1k binaries, 5000 keys", HRW.build(binaries.(1_000)), keys.(5_000)},
  {"skeleton of 100k binaries, 100 keys", HRW.build(binaries.(100_000)), keys.(100)},
  {"skeleton of 10k binaries, 10000 keys", HRW.build(binaries.(10_000)), keys.(10_000)},
  {"skeleton of 10k binaries, 1M keys", HRW.build(binaries.(10_000)), keys.(1_000_000)},
  {"ring of 100 atoms, 100 keys", HRW.Ring.new(atoms.(100)), keys.(100)},
  {"skeleton of 1k atoms, 5000 keys", HRW.build(atoms.(1_000)), keys.(5_000)}
]

med = fn l -> Enum.at(Enum.sort(l), div(length(l), 2)) end

for {label, target, keys} <- cases do
  fun = fn -> HRW.owner_batch(keys, target) end
  false = switch.(false)
  unchecked = fun.()

  rounds =
    for _ <- 1..15 do
      true = switch.(true)
      on = time.(fun)
      false = switch.(false)
      off = time.(fun)
      {on, off}
    end

  switch.(true)
  true = fun.() == unchecked
  {on, off} = {med.(Enum.map(rounds, &elem(&1, 0))), med.(Enum.map(rounds, &elem(&1, 1)))}
  ratio = med.(Enum.map(rounds, fn {a, b} -> a / b end))

  IO.puts(
    "#{label}: on #{Float.round(on, 1)} us, off #{Float.round(off, 1)} us, " <>
      "on/off #{Float.round(on / off, 3)} (pairwise #{Float.round(ratio, 3)})"
  )
end
