# What the atom cache is worth: HRW.term_id/1 of atoms, and HRW.owner/2 of atom
# keys on a 100-node ring, with the cache on and off in turn in one VM (ns per
# call, loop included; the median of 15 rounds of 1M calls each, and the median
# of the pairwise off/on ratios). Needs a test build (the `atom_cache/1` switch):
#   MIX_ENV=test mix run bench/atom_cache_ab.exs
Code.compile_string("""
defmodule AtomCacheAB do
  def ids(_keys, 0), do: :ok
  def ids(keys, n), do: (HRW.term_id(elem(keys, rem(n, 1000))); ids(keys, n - 1))
  def owners(_keys, _ring, 0), do: :ok
  def owners(keys, ring, n), do: (HRW.owner(elem(keys, rem(n, 1000)), ring); owners(keys, ring, n - 1))
end
""")

switch = &apply(HRW.Native, :atom_cache, [&1])
keys = 1..1000 |> Enum.map(&:"user-#{&1}") |> List.to_tuple()
ring = HRW.Ring.new(Enum.map(1..100, &"node-#{&1}"))
calls = 1_000_000

time = fn fun ->
  {us, _} = :timer.tc(fun)
  us * 1000 / calls
end

cases = [
  {"term_id atom", fn -> AtomCacheAB.ids(keys, calls) end},
  {"owner ring 100, atom keys", fn -> AtomCacheAB.owners(keys, ring, calls) end}
]

med = fn l -> Enum.at(Enum.sort(l), div(length(l), 2)) end

for {label, fun} <- cases do
  rounds =
    for _ <- 1..15 do
      true = switch.(true)
      on = time.(fun)
      false = switch.(false)
      off = time.(fun)
      {on, off}
    end

  switch.(true)
  {on, off} = {med.(Enum.map(rounds, &elem(&1, 0))), med.(Enum.map(rounds, &elem(&1, 1)))}
  ratio = med.(Enum.map(rounds, fn {a, b} -> b / a end))

  IO.puts(
    "#{label}: on #{Float.round(on, 1)} ns, off #{Float.round(off, 1)} ns, off/on #{Float.round(off / on, 3)} (pairwise #{Float.round(ratio, 3)})"
  )
end
