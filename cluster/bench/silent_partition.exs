# Silent partitions of 5 peers, [2|3], with and without HRW.Cluster's :lease.
#
#   MIX_ENV=test mix run bench/silent_partition.exs     (from cluster/)
#
# Settings (environment): LEASE (ms, default 1000), RUNS (per mode, default 3),
# NET_TICKTIME (the peers' net_ticktime in s, default 5), SETTLE (ms the writers
# run before the cut, default 1000), NOTE (a line for the header).
#
# Each run starts 5 fresh peers (test/support/silent_partition.ex: every link
# between two peers runs through a userland relay in this VM, which can drop
# every byte between two groups without closing anything), each running the
# cluster :bench with quorum {:majority, 5}, with the lease or without. One writer
# per peer looks keys up in a loop (a lookup that finds an owner is a write the
# store would acknowledge; `nil` a refusal), a watcher per peer records when its
# snapshot loses the quorum and when it sees its first :nodedown. Then the relay
# cuts the first two peers off the other three and the run waits until the
# minority has seen its nodedowns. Times are from the cut, in ms, on the wall
# clock every VM of this host shares.
alias HRW.SilentPartition, as: SP

env = fn name, default -> String.to_integer(System.get_env(name, default)) end
lease = env.("LEASE", "1000")
runs = env.("RUNS", "3")
ticktime = env.("NET_TICKTIME", "5")
settle = env.("SETTLE", "1000")

# Runs on the peers: loaded there from this binary (the peers have no copy of
# this script).
{:module, probe, probe_binary, _} =
  defmodule SilentBench.Probe do
    @moduledoc false

    def start(name) do
      parent = self()
      ready = make_ref()

      writer =
        spawn(fn ->
          Process.register(self(), :silent_bench_writer)
          send(parent, ready)
          write(name, 0, %{ok: 0, refused: 0, last_ok: nil})
        end)

      receive do: (^ready -> :ok)

      spawn(fn ->
        Process.register(self(), :silent_bench_watcher)
        :ok = :net_kernel.monitor_nodes(true)
        :ok = HRW.Cluster.subscribe(name, :snapshots)
        watch(name, %{lost: [], regained: [], nodedown: nil})
      end)

      writer
    end

    defp write(name, i, acc) do
      receive do
        {:report, from} -> send(from, {:writer, acc})
      after
        0 -> :ok
      end

      now = System.os_time(:microsecond)

      acc =
        case HRW.Cluster.owner(name, "key-#{rem(i, 1000)}") do
          nil -> %{acc | refused: acc.refused + 1}
          _owner -> %{acc | ok: acc.ok + 1, last_ok: now}
        end

      Process.sleep(1)
      write(name, i + 1, acc)
    end

    defp watch(name, acc) do
      receive do
        {:report, from} ->
          send(from, {:watcher, acc})
          watch(name, acc)

        {:nodedown, _node} ->
          watch(name, %{acc | nodedown: acc.nodedown || System.os_time(:microsecond)})

        {:hrw_cluster_snapshot, ^name, old, new} when old.quorum? and not new.quorum? ->
          watch(name, %{acc | lost: [System.os_time(:microsecond) | acc.lost]})

        {:hrw_cluster_snapshot, ^name, old, new} when new.quorum? and not old.quorum? ->
          watch(name, %{acc | regained: [System.os_time(:microsecond) | acc.regained]})

        _other ->
          watch(name, acc)
      end
    end

    def report do
      for {name, tag} <- [silent_bench_writer: :writer, silent_bench_watcher: :watcher] do
        send(name, {:report, self()})
        receive do: ({^tag, acc} -> {tag, acc})
      end
      |> Map.new()
    end

    def nodedown?, do: report().watcher.nodedown != nil
  end

sh = fn cmd, args ->
  case System.cmd(cmd, args, stderr_to_stdout: true) do
    {out, 0} -> String.trim(out)
    {out, _} -> "(#{cmd} failed: #{String.trim(out)})"
  end
end

note = if (n = System.get_env("NOTE")) not in [nil, ""], do: "\n# note: #{n}", else: ""

dirty =
  if sh.("git", ["status", "--porcelain", "--untracked-files=no"]) == "", do: "", else: " (dirty)"

IO.puts("""
# bench/silent_partition.exs
# command: MIX_ENV=test mix run bench/silent_partition.exs
#   LEASE=#{lease} RUNS=#{runs} NET_TICKTIME=#{ticktime} SETTLE=#{settle}
# commit: #{sh.("git", ["rev-parse", "HEAD"])}#{dirty}
# date: #{DateTime.utc_now() |> DateTime.truncate(:second) |> DateTime.to_iso8601()}
# machine: #{sh.("uname", ["-a"])}
# nproc: #{sh.("nproc", [])}
# otp: #{System.otp_release()}, elixir: #{System.version()}
# load average at start: #{File.read!("/proc/loadavg") |> String.trim()}#{note}
#
# 5 peers, quorum {:majority, 5}, cut [2|3] silently (no FIN/RST: the relay stops
# forwarding). Per run, for each minority peer, ms from the cut to: its last
# lookup that found an owner (an acknowledged write), its snapshot's loss of the
# quorum, its first :nodedown, and how many lookups found an owner after the cut
# (counted from a report taken over the control connection right after it). And
# the lookups the majority refused (no owner) from the writers' start to the end.
""")

ms = fn
  nil, _cut -> "-"
  t, cut -> :erlang.float_to_binary((t - cut) / 1000, decimals: 1)
end

results =
  for {mode, opts} <- [{"lease #{lease} ms", [lease: lease]}, {"no lease", []}],
      run <- 1..runs do
    harness = SP.start(5, prefix: :silent_bench, net_ticktime: ticktime, logger_level: :critical)

    nodes = harness.nodes
    call = fn node, m, f, a -> SP.call(harness, node, m, f, a) end

    for node <- nodes do
      {:module, ^probe} = call.(node, :code, :load_binary, [probe, ~c"nofile", probe_binary])
      options = [name: :bench, quorum: {:majority, 5}] ++ opts
      {:ok, _} = call.(node, HRW.Cluster, :start, [options])
    end

    SP.await(
      fn ->
        Enum.all?(nodes, fn node ->
          snapshot = call.(node, HRW.Cluster, :snapshot, [:bench])
          snapshot.quorum? and length(snapshot.members) == 5
        end)
      end,
      60_000,
      "a quorum on every peer"
    )

    for node <- nodes, do: call.(node, probe, :start, [:bench])
    Process.sleep(settle)
    {minority, majority} = Enum.split(nodes, 2)
    cut = SP.cut(harness, minority, majority)
    # Taken over the control connections, which the cut does not touch.
    at_cut = Map.new(minority, &{&1, call.(&1, probe, :report, []).writer.ok})

    SP.await(
      fn -> Enum.all?(minority, &call.(&1, probe, :nodedown?, [])) end,
      (ticktime * 2 + 30) * 1000,
      "the minority's nodedowns"
    )

    Process.sleep(500)
    reports = Map.new(nodes, &{&1, call.(&1, probe, :report, [])})
    SP.stop(harness)

    rows =
      for node <- minority do
        %{writer: w, watcher: watch} = reports[node]

        %{
          last_ok: w.last_ok && (w.last_ok - cut) / 1000,
          text:
            "last ack #{ms.(w.last_ok, cut)}, quorum lost #{ms.(List.last(watch.lost), cut)}, " <>
              "nodedown #{ms.(watch.nodedown, cut)}, acks after the cut #{w.ok - at_cut[node]}"
        }
      end

    refused = Enum.sum(for node <- majority, do: reports[node].writer.refused)

    IO.puts(
      "#{mode}, run #{run}: minority " <>
        Enum.map_join(rows, "; ", & &1.text) <>
        " | majority: #{refused} lookups refused"
    )

    {mode, Enum.map(rows, & &1.last_ok)}
  end

IO.puts("\nlast acknowledged lookup on the minority, ms after the cut (max over its 2 peers):")

for {mode, rows} <- Enum.group_by(results, &elem(&1, 0), &elem(&1, 1)) do
  per_run = Enum.map(rows, &Enum.max/1)

  IO.puts(
    "  #{mode}: " <>
      Enum.map_join(per_run, ", ", &:erlang.float_to_binary(&1, decimals: 1)) <>
      "  (max #{:erlang.float_to_binary(Enum.max(per_run), decimals: 1)})"
  )
end

IO.puts("  bound with the lease: lease + 100 ms = #{lease + 100} ms")
