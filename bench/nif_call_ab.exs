# The cost of a NIF call's wrapper: HRW.term_id/1 of an integer, a binary, an
# atom and a tuple, and HRW.owner/2
# on a 100-node ring and a 1000-node skeleton, each in a compiled loop (no
# evaluated closure per call): ns per call, loop included, the median of 7
# rounds of 1M calls. An A/B runs it in two checkouts in turn
# (bench/native_ab.sh takes the script as its fourth argument).
#   MIX_ENV=prod mix run bench/nif_call_ab.exs
# BENCH_CLOCK=cpu times the VM's CPU time instead of the wall clock (rounds of 3M
# calls; the clock counts milliseconds): on a busy machine, with one scheduler
# and no busy waiting, ELIXIR_ERL_OPTIONS="+S 1:1 +sbwt none +sbwtdcpu none
# +sbwtdio none", it leaves out the time the VM waits for a CPU.
Code.compile_string("""
defmodule NifCallAB do
  def ids(_keys, 0), do: :ok
  def ids(keys, n), do: (HRW.term_id(elem(keys, rem(n, 1000))); ids(keys, n - 1))
  def owners(_keys, _t, 0), do: :ok
  def owners(keys, t, n), do: (HRW.owner(elem(keys, rem(n, 1000)), t); owners(keys, t, n - 1))
end
""")

integers = 1..1000 |> Enum.map(&(&1 * 104_729)) |> List.to_tuple()
binaries = 1..1000 |> Enum.map(&"key-#{&1}") |> List.to_tuple()
atoms = 1..1000 |> Enum.map(&:"atom-#{rem(&1, 100)}") |> List.to_tuple()
tuples = 1..1000 |> Enum.map(&{:user, &1}) |> List.to_tuple()
ring = HRW.Ring.new(Enum.map(1..100, &"node-#{&1}"))
skeleton = HRW.build(Enum.map(1..1000, &"node-#{&1}"))
cpu? = System.get_env("BENCH_CLOCK") == "cpu"
calls = if cpu?, do: 3_000_000, else: 1_000_000

# ns per call of one round.
time = fn fun ->
  if cpu? do
    {before, _} = :erlang.statistics(:runtime)
    fun.()
    {later, _} = :erlang.statistics(:runtime)
    (later - before) * 1_000_000 / calls
  else
    {us, _} = :timer.tc(fun)
    us * 1000 / calls
  end
end

cases = [
  {"term_id integer (compiled loop)", fn -> NifCallAB.ids(integers, calls) end},
  {"term_id binary (compiled loop)", fn -> NifCallAB.ids(binaries, calls) end},
  {"term_id atom (compiled loop)", fn -> NifCallAB.ids(atoms, calls) end},
  {"term_id tuple (compiled loop)", fn -> NifCallAB.ids(tuples, calls) end},
  {"owner ring 100 (compiled loop)", fn -> NifCallAB.owners(binaries, ring, calls) end},
  {"owner skeleton 1k (compiled loop)", fn -> NifCallAB.owners(binaries, skeleton, calls) end}
]

for {label, fun} <- cases do
  fun.()

  rounds = for _ <- 1..7, do: time.(fun)

  IO.puts("#{label}\t#{Float.round(Enum.at(Enum.sort(rounds), 3), 1)} ns/call")
end
