# The NIF's speed, one line per case: lookups (HRW.owner/2 on a list, a ring and
# a skeleton), term ids per key type, and batches (owner_batch, group_by_owner,
# moves). Each figure is the median of 7 rounds, ns per call for single calls
# (loop included), us per batch for batches. An A/B runs it in two checkouts in
# turn (bench/native_ab.sh). From a checkout's root:
#   MIX_ENV=prod mix run path/to/bench/native_ab.exs
# BENCH_QUICK=1 runs fewer calls per round (a check that the harness works).
quick? = System.get_env("BENCH_QUICK") == "1"
calls = if quick?, do: 100_000, else: 1_000_000
names = fn n -> Enum.map(1..n, &"node-#{&1}") end
tuple_of = fn f -> 1..1000 |> Enum.map(f) |> List.to_tuple() end

list10 = names.(10)
ring100 = HRW.Ring.new(names.(100))
skel1k = HRW.build(names.(1_000))
binary_keys = tuple_of.(&"key-#{&1}")

# ns per call of `fun.(key)` over `calls` calls cycling through `keys` (a tuple of
# 1000), the median of 7 rounds after one warm-up round.
single = fn keys, fun ->
  round = fn ->
    {us, _} =
      :timer.tc(fn ->
        for _ <- 1..div(calls, 1000), i <- 0..999, do: fun.(elem(keys, i))
      end)

    us * 1000 / calls
  end

  _ = round.()
  rounds = for _ <- 1..7, do: round.()
  Enum.at(Enum.sort(rounds), 3)
end

singles = [
  {"owner list 10", binary_keys, &HRW.owner(&1, list10)},
  {"owner ring 100", binary_keys, &HRW.owner(&1, ring100)},
  {"owner skeleton 1k", binary_keys, &HRW.owner(&1, skel1k)},
  {"term_id binary", binary_keys, &HRW.term_id/1},
  {"term_id integer", tuple_of.(&(&1 * 104_729)), &HRW.term_id/1},
  {"term_id atom", tuple_of.(&:"atom-#{rem(&1, 100)}"), &HRW.term_id/1},
  {"term_id tuple", tuple_of.(&{:user, &1}), &HRW.term_id/1},
  {"term_id map", tuple_of.(&%{id: &1, kind: :user}), &HRW.term_id/1},
  {"term_id float", tuple_of.(&(&1 * 0.5)), &HRW.term_id/1}
]

for {label, keys, fun} <- singles do
  IO.puts("#{label}\t#{Float.round(single.(keys, fun), 1)} ns/call")
end

# us per batch, the median of 7 rounds (each of enough batches for ~50 ms).
batch = fn fun ->
  time = fn reps ->
    {us, _} = :timer.tc(fn -> for _ <- 1..reps, do: fun.() end)
    us / reps
  end

  reps = max(1, min(20_000, round(50_000 / max(time.(1), 1.0))))
  _ = time.(reps)
  rounds = for _ <- 1..7, do: time.(reps)
  Enum.at(Enum.sort(rounds), 3)
end

keys = fn n -> Enum.map(1..n, &"key-#{&1}") end
k100 = keys.(100)
k5000 = keys.(5_000)
k100k = keys.(100_000)
skel10k = HRW.build(names.(10_000))
skel100k = HRW.build(names.(100_000))

batches =
  [
    {"owner_batch ring 100, 100 keys", fn -> HRW.owner_batch(k100, ring100) end},
    {"owner_batch skeleton 1k, 5000 keys", fn -> HRW.owner_batch(k5000, skel1k) end},
    {"owner_batch skeleton 100k, 100 keys", fn -> HRW.owner_batch(k100, skel100k) end},
    {"owner_batch skeleton 100k, 100000 keys", fn -> HRW.owner_batch(k100k, skel100k) end},
    {"group_by_owner skeleton 1k, 5000 keys", fn -> HRW.group_by_owner(k5000, skel1k) end},
    {"moves ring 100 -> skeleton 1k, 5000 keys", fn -> HRW.moves(k5000, ring100, skel1k) end}
  ] ++
    if quick?,
      do: [],
      else: [
        {"owner_batch skeleton 10k, 1M keys",
         (
           k1m = keys.(1_000_000)
           fn -> HRW.owner_batch(k1m, skel10k) end
         )}
      ]

for {label, fun} <- batches do
  IO.puts("#{label}\t#{Float.round(batch.(fun), 2)} us/batch")
end
