# What a structure from another node costs on this one: a 1M-node skeleton whose
# resource is not usable here (as when it arrives from another BEAM node) is looked
# up by P processes at once. Prints the wall time until every process has its
# answers and the growth of the OS process's resident memory (the NIF's resources
# live outside the BEAM's allocators, so `:erlang.memory/0` does not see them).
#
#   MIX_ENV=prod mix run bench/stale_rebuild.exs            # P=100, N=1_000_000
#   P=10 N=1000000 MIX_ENV=prod mix run bench/stale_rebuild.exs
p = String.to_integer(System.get_env("P", "100"))
n = String.to_integer(System.get_env("N", "1000000"))

rss_mb = fn ->
  {:ok, status} = File.read("/proc/self/status")
  [_, kb] = Regex.run(~r/VmRSS:\s+(\d+) kB/, status)
  String.to_integer(kb) / 1024
end

skeleton = HRW.build(Enum.map(1..n, &"node-#{&1}"))
keys = Enum.map(1..10, &"user:#{&1}")
expected = Enum.map(keys, &HRW.owner(&1, skeleton))
# What arrives from another node: the same fields, a reference that is no resource here.
# Read through :persistent_term, as a shared structure is: no process copies it.
:persistent_term.put({:stale_rebuild_bench, :foreign}, %{skeleton | resource: make_ref()})
:erlang.garbage_collect()
before = rss_mb.()
me = self()

{us, _} =
  :timer.tc(fn ->
    pids =
      for _ <- 1..p do
        spawn(fn ->
          receive do
            :go ->
              foreign = :persistent_term.get({:stale_rebuild_bench, :foreign})
              send(me, {self(), Enum.map(keys, &HRW.owner(&1, foreign))})
          end

          # Stay alive (holding what the lookups left) until every process is done.
          receive do
            :stop -> :ok
          end
        end)
      end

    Enum.each(pids, &send(&1, :go))
    for pid <- pids, do: receive(do: ({^pid, ^expected} -> :ok))
    Process.put(:pids, pids)
  end)

grown = rss_mb.() - before
Enum.each(Process.get(:pids), &send(&1, :stop))

IO.puts(
  "N=#{n} P=#{p}: all answered in #{Float.round(us / 1000, 1)} ms " <>
    "(#{Float.round(us / 1000 / p, 1)} ms per process); " <>
    "resident memory grew #{Float.round(grown, 1)} MB (#{Float.round(grown / p, 2)} MB per process)"
)
