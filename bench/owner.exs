# HRW.owner/2 on a list, a ring and a skeleton at 10 and 10k nodes, varying binary keys
# ("key-<i>", nodes "node-1"..), ns per call, median of 21 rounds; one line per cell:
# cell, median, fastest round.
#
#   MIX_ENV=prod mix run bench/owner.exs
#
# To compare two commits, run it alternately in a checkout of each (docs/BENCHMARKS.md,
# "HRW.owner/2 against an earlier commit").
import Bitwise
keys = List.to_tuple(for i <- 1..4096, do: "key-#{i}")

loop = fn
  _f, _t, 0, _i ->
    :ok

  f, t, n, i ->
    HRW.owner(elem(keys, band(i, 4095)), t)
    f.(f, t, n - 1, i + 1)
end

for n <- [10, 10_000] do
  nodes = for i <- 1..n, do: "node-#{i}"
  targets = [list: nodes, ring: HRW.Ring.new(nodes), skeleton: HRW.build(nodes)]

  for {name, t} <- targets do
    reps = if name == :list and n == 10_000, do: 100, else: 20_000
    loop.(loop, t, reps, 0)

    rounds =
      for _ <- 1..21 do
        {us, :ok} = :timer.tc(fn -> loop.(loop, t, reps, 0) end)
        us * 1000 / reps
      end

    med = rounds |> Enum.sort() |> Enum.at(10)
    IO.puts("#{name}@#{n}\t#{Float.round(med, 1)}\t#{Float.round(Enum.min(rounds), 1)}")
  end
end

# HRW.owner_batch/2 of 100,000 keys ("key-1".."key-100000") on a skeleton of 10k
# nodes, ns per key (same columns).
batch_keys = for i <- 1..100_000, do: "key-#{i}"
batch_target = HRW.build(for i <- 1..10_000, do: "node-#{i}")
HRW.owner_batch(batch_keys, batch_target)

batch_rounds =
  for _ <- 1..21 do
    {us, _} = :timer.tc(fn -> HRW.owner_batch(batch_keys, batch_target) end)
    us * 1000 / 100_000
  end

batch_med = batch_rounds |> Enum.sort() |> Enum.at(10)

IO.puts(
  "owner_batch@10000\t#{Float.round(batch_med, 1)}\t#{Float.round(Enum.min(batch_rounds), 1)}"
)
