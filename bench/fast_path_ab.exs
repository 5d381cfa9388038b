# HRW.owner/3 with no options on a ring and a skeleton: ns per call, the median of 7
# rounds of 1M calls (an A/B of the fast path: run it in two checkouts, in turn).
# MIX_ENV=prod mix run bench/fast_path_ab.exs
nodes = Enum.map(1..100, &"node-#{&1}")
ring = HRW.Ring.new(nodes)
skel = HRW.build(Enum.map(1..1000, &"node-#{&1}"))
keys = Enum.map(1..1000, &"key-#{&1}") |> List.to_tuple()

run = fn t ->
  {us, _} =
    :timer.tc(fn ->
      for _ <- 1..1000, i <- 0..999, do: HRW.owner(elem(keys, i), t)
    end)

  us * 1000 / 1_000_000
end

_ = run.(ring)
_ = run.(skel)
med = fn l -> Enum.at(Enum.sort(l), div(length(l), 2)) end
r = for _ <- 1..7, do: run.(ring)
s = for _ <- 1..7, do: run.(skel)
IO.puts("ring #{Float.round(med.(r), 1)} ns/call  skeleton #{Float.round(med.(s), 1)} ns/call")
