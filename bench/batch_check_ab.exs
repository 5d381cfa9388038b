# What the batches' node check costs: HRW.owner_batch/2, group_by_owner/2 and
# moves/3 on rings and skeletons, µs per batch, the median of 7 rounds. An A/B:
# run it in two checkouts in turn (one without the check) and compare the rows.
#   MIX_ENV=prod mix run bench/batch_check_ab.exs
keys = Map.new([1, 100, 5_000, 100_000], fn n -> {n, Enum.map(1..n, &"key-#{&1}")} end)
keys = &Map.fetch!(keys, &1)
names = fn n -> Enum.map(1..n, &"node-#{&1}") end

ring100 = HRW.Ring.new(names.(100))
skel1k = HRW.build(names.(1_000))
skel100k = HRW.build(names.(100_000))

cases = [
  {"owner_batch ring 100, 1 key", fn -> HRW.owner_batch(keys.(1), ring100) end},
  {"owner_batch ring 100, 100 keys", fn -> HRW.owner_batch(keys.(100), ring100) end},
  {"owner_batch ring 100, 5000 keys", fn -> HRW.owner_batch(keys.(5_000), ring100) end},
  {"owner_batch skeleton 1k, 1 key", fn -> HRW.owner_batch(keys.(1), skel1k) end},
  {"owner_batch skeleton 1k, 100 keys", fn -> HRW.owner_batch(keys.(100), skel1k) end},
  {"owner_batch skeleton 1k, 5000 keys", fn -> HRW.owner_batch(keys.(5_000), skel1k) end},
  {"owner_batch skeleton 100k, 100 keys", fn -> HRW.owner_batch(keys.(100), skel100k) end},
  {"owner_batch skeleton 100k, 100000 keys", fn -> HRW.owner_batch(keys.(100_000), skel100k) end},
  {"group_by_owner skeleton 1k, 5000 keys", fn -> HRW.group_by_owner(keys.(5_000), skel1k) end},
  {"moves ring 100 -> skeleton 1k, 5000 keys", fn -> HRW.moves(keys.(5_000), ring100, skel1k) end}
]

time = fn fun, reps ->
  {us, _} = :timer.tc(fn -> for _ <- 1..reps, do: fun.() end)
  us / reps
end

med = fn l -> Enum.at(Enum.sort(l), div(length(l), 2)) end

for {label, fun} <- cases do
  # Enough repetitions for ~50 ms a round.
  one = time.(fun, 1)
  reps = max(1, min(20_000, round(50_000 / max(one, 1.0))))
  _ = time.(fun, reps)
  rounds = for _ <- 1..7, do: time.(fun, reps)
  IO.puts("#{label}\t#{Float.round(med.(rounds), 2)} us/batch")
end
