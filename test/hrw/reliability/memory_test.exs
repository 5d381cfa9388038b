defmodule HRW.Reliability.MemoryTest do
  @moduledoc """
  Building and dropping structures returns memory to its baseline: resources are
  freed by the garbage collector. 20k structures in `mix test`, 100k in
  `./scripts/test`, 1M with `HRW_TEST_SIZE=long` (`HRW.TestSize`).
  """
  # Measures the VM's total memory: nothing else may run meanwhile.
  use ExUnit.Case, async: false

  @long HRW.TestSize.level() == :long
  @structures HRW.TestSize.pick(quick: 20_000, ci: 100_000, long: 1_000_000)

  @moduletag timeout: HRW.TestTimeouts.ms(if(@long, do: 1_800_000, else: 600_000))

  test "building and dropping #{@structures} rings and skeletons returns memory to its baseline" do
    base_nodes = Enum.map(1..48, &"node-#{&1}")
    weighted = Enum.map(base_nodes, &{&1, :erlang.phash2(&1, 4) + 1})

    churn = fn count ->
      task =
        Task.async(fn ->
          Enum.reduce(1..count, 0, fn i, acc ->
            nodes = [i | base_nodes]

            structure =
              case rem(i, 4) do
                0 -> HRW.Ring.new(nodes)
                1 -> HRW.build(nodes)
                2 -> HRW.Ring.new([{i, 2} | weighted], scorer: %HRW.Weighted{})
                3 -> HRW.build([{i, 3} | weighted], scorer: %HRW.Weighted{}, cluster_size: 4)
              end

            owner = HRW.owner(i, structure)
            # Collect now and then, as a long-lived process's heap would be.
            if rem(i, 5_000) == 0, do: :erlang.garbage_collect()
            if owner == :never, do: acc + 1, else: acc
          end)
        end)

      Task.await(task, :infinity)
      settle()
    end

    # A first round warms up allocators and caches; the rounds after it must not grow.
    churn.(div(@structures, 10))
    baseline = memory()
    churn.(@structures)
    after_churn = memory()

    growth = after_churn.total - baseline.total
    # Resources are counted as binaries: a leak of one resource (more than 20 bytes)
    # per structure would pass 2 MB at 100,000 structures.
    assert after_churn.binary - baseline.binary < 2_000_000,
           "binary memory grew: #{inspect(baseline)} -> #{inspect(after_churn)}"

    rss_growth = after_churn.rss - baseline.rss

    assert growth < 16_000_000,
           "VM memory grew by #{growth} bytes over #{@structures} structures: " <>
             "#{inspect(baseline)} -> #{inspect(after_churn)}"

    # Rust-side allocations are invisible to :erlang.memory; the process RSS sees
    # them (a leak of one skeleton each would be hundreds of MB).
    if baseline.rss > 0 do
      assert rss_growth < 64_000_000,
             "RSS grew by #{rss_growth} bytes: #{inspect(baseline)} -> #{inspect(after_churn)}"
    end
  end

  defp settle do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    Process.sleep(50)
  end

  defp memory do
    %{total: :erlang.memory(:total), binary: :erlang.memory(:binary), rss: rss()}
  end

  defp rss do
    case File.read("/proc/self/statm") do
      {:ok, statm} ->
        [_size, resident | _] = String.split(statm)
        String.to_integer(resident) * 4096

      _ ->
        0
    end
  end
end
