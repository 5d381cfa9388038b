defmodule Mix.Tasks.Hrw.Latency do
  @shortdoc "Checks that a huge batch does not stall normal schedulers"
  @moduledoc """
  A benchmark with an assertion: while `HRW.owner_batch/3` maps `--keys` keys
  (default 10,000,000) on a 10,000-node skeleton, a process on a normal scheduler
  sleeps 1 ms at a time and records how late each wake-up is. Fails (exit status 1)
  if the worst lateness exceeds `--max-ms` (default 5).

      mix hrw.latency [--keys 10000000] [--max-ms 5] [--rounds 3]

  The batch runs in a worker process whose heap is sized up front for the key and
  result lists: collecting a heap that large is not preemptible and would block that
  process's scheduler whatever produced the data, which is not what this measures.
  Timing depends on the machine: run it on a quiet one.
  """
  use Mix.Task

  @switches [keys: :integer, max_ms: :integer, rounds: :integer]

  @impl Mix.Task
  def run(args) do
    {opts, _, _} = OptionParser.parse(args, strict: @switches)
    Mix.Task.run("app.start")
    keys = Keyword.get(opts, :keys, 10_000_000)
    max_us = Keyword.get(opts, :max_ms, 5) * 1000
    skeleton = HRW.build(Enum.map(1..10_000, &"node-#{&1}"))

    worst =
      for round <- 1..Keyword.get(opts, :rounds, 3) do
        {batch_us, late_us} = measure(skeleton, keys)

        Mix.shell().info(
          "round #{round}: #{keys} keys in #{div(batch_us, 1000)} ms " <>
            "(#{Float.round(batch_us * 1000 / keys, 1)} ns/key), worst timer lateness #{late_us} µs"
        )

        late_us
      end
      |> Enum.max()

    if worst > max_us do
      Mix.raise("a 1 ms timer was #{worst} µs late (limit #{max_us} µs)")
    end
  end

  defp measure(skeleton, count) do
    parent = self()

    worker =
      :erlang.spawn_opt(
        fn ->
          keys = Enum.to_list(1..count)
          send(parent, :ready)

          receive do
            :go -> :ok
          end

          {us, result} = :timer.tc(fn -> HRW.owner_batch(keys, skeleton) end)
          send(parent, {:done, us, length(result)})
        end,
        min_heap_size: 6 * count + 1_000_000
      )

    ref = Process.monitor(worker)

    receive do
      :ready -> :ok
    end

    watcher = spawn(fn -> send(parent, {:late, watch(0)}) end)
    send(worker, :go)

    receive do
      {:done, us, ^count} ->
        send(watcher, :stop)

        receive do
          {:late, late} ->
            Process.demonitor(ref, [:flush])
            {us, late}
        end

      {:DOWN, ^ref, _, _, reason} ->
        Mix.raise("the batch worker died: #{inspect(reason)}")
    end
  end

  # Sleeps 1 ms at a time until told to stop; returns the worst lateness in µs.
  defp watch(worst) do
    receive do
      :stop -> worst
    after
      0 ->
        before = System.monotonic_time(:microsecond)

        receive do
        after
          1 -> :ok
        end

        watch(max(worst, System.monotonic_time(:microsecond) - before - 1000))
    end
  end
end
