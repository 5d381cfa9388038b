# What the test build's two switches measure, each turned on and off in turn in
# one VM (15 rounds of about 50 ms each side; the medians, and the median of the
# pairwise on/off ratios):
#   * `atom_cache/1`: atom ids from the atom cache, against the fallback that
#     hashes every atom's name (HRW.term_id/1 of atoms; HRW.owner/2 of atom keys
#     on a 100-node ring); ns per call, loop included;
#   * `batch_check/1`: the batches' check of the struct's nodes, against none
#     (HRW.owner_batch/2 on rings and skeletons of binary and of atom nodes); us
#     per batch. A test build counts work on every charge, which the check's
#     per-node steps pay too, so its share here is an upper bound of a
#     production build's.
# Needs a test build (the switches exist in no production build):
#   MIX_ENV=test mix run bench/switch_ab.exs
Code.compile_string("""
defmodule SwitchAB do
  def ids(_keys, 0), do: :ok
  def ids(keys, n), do: (HRW.term_id(elem(keys, rem(n, 1000))); ids(keys, n - 1))
  def owners(_keys, _ring, 0), do: :ok
  def owners(keys, ring, n), do: (HRW.owner(elem(keys, rem(n, 1000)), ring); owners(keys, ring, n - 1))
end
""")

binaries = fn n -> Enum.map(1..n, &"node-#{&1}") end
atoms = fn n -> Enum.map(1..n, &:"node-#{&1}@host") end
keys = fn n -> Enum.map(1..n, &"key-#{&1}") end
atom_keys = 1..1000 |> Enum.map(&:"user-#{&1}") |> List.to_tuple()
ring = HRW.Ring.new(binaries.(100))
calls = 100_000
batch = fn target, keys -> fn -> HRW.owner_batch(keys, target) end end

# {switch, label, fun, calls per run of fun, unit}
cases = [
  {:atom_cache, "term_id of an atom", fn -> SwitchAB.ids(atom_keys, calls) end, calls, "ns"},
  {:atom_cache, "owner of an atom key, ring of 100",
   fn -> SwitchAB.owners(atom_keys, ring, calls) end, calls, "ns"},
  {:batch_check, "owner_batch, ring of 100 binaries, 100 keys", batch.(ring, keys.(100)), 1,
   "us"},
  {:batch_check, "owner_batch, skeleton of 1k binaries, 5000 keys",
   batch.(HRW.build(binaries.(1_000)), keys.(5_000)), 1, "us"},
  {:batch_check, "owner_batch, skeleton of 100k binaries, 100 keys",
   batch.(HRW.build(binaries.(100_000)), keys.(100)), 1, "us"},
  {:batch_check, "owner_batch, skeleton of 10k binaries, 10000 keys",
   batch.(HRW.build(binaries.(10_000)), keys.(10_000)), 1, "us"},
  {:batch_check, "owner_batch, skeleton of 10k binaries, 1M keys",
   batch.(HRW.build(binaries.(10_000)), keys.(1_000_000)), 1, "us"},
  {:batch_check, "owner_batch, ring of 100 atoms, 100 keys",
   batch.(HRW.Ring.new(atoms.(100)), keys.(100)), 1, "us"},
  {:batch_check, "owner_batch, skeleton of 1k atoms, 5000 keys",
   batch.(HRW.build(atoms.(1_000)), keys.(5_000)), 1, "us"}
]

# Per call of `fun` in `unit`, over enough runs for about 50 ms.
time = fn fun, per_run, unit ->
  reps = max(1, round(50_000 / max(elem(:timer.tc(fun), 0), 1)))
  {us, _} = :timer.tc(fn -> for _ <- 1..reps, do: fun.() end)
  us / reps / per_run * if(unit == "ns", do: 1000, else: 1)
end

med = fn l -> Enum.at(Enum.sort(l), div(length(l), 2)) end

for {name, label, fun, per_run, unit} <- cases do
  switch = &apply(HRW.Native, name, [&1])
  # Both settings answer the same.
  true = switch.(true) and not switch.(false)
  off_answer = fun.()
  true = switch.(true)
  true = fun.() == off_answer

  rounds =
    for _ <- 1..15 do
      true = switch.(true)
      on = time.(fun, per_run, unit)
      false = switch.(false)
      off = time.(fun, per_run, unit)
      {on, off}
    end

  true = switch.(true)
  {on, off} = {med.(Enum.map(rounds, &elem(&1, 0))), med.(Enum.map(rounds, &elem(&1, 1)))}
  ratio = med.(Enum.map(rounds, fn {a, b} -> a / b end))

  IO.puts(
    "#{name}, #{label}: on #{Float.round(on, 1)} #{unit}, off #{Float.round(off, 1)} #{unit}, " <>
      "on/off #{Float.round(on / off, 3)} (pairwise #{Float.round(ratio, 3)})"
  )
end
