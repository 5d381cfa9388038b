defmodule HRW.StaleRebuildTest do
  # Structures whose resource is gone (a binary round trip after the original was
  # collected, or a struct from another node) are rebuilt once per process and
  # fingerprint, however many of them a process uses in turn. Counted with call
  # tracing, so not async: the counts must be this module's alone.
  use ExUnit.Case, async: false

  import HRW.TestStats, only: [node_names: 1]

  # Structures built in a binary whose resources are then collected.
  defp orphans(builders) do
    bin = :erlang.term_to_binary(Enum.map(builders, & &1.()))
    :erlang.garbage_collect()
    :erlang.binary_to_term(bin)
  end

  defp count_calls(mfa, fun) do
    :erlang.trace_pattern(mfa, true, [:call_count])

    try do
      fun.()
      {:call_count, n} = :erlang.trace_info(mfa, :call_count)
      n
    after
      :erlang.trace_pattern(mfa, false, [:call_count])
    end
  end

  test "any number of stale structures used alternately each rebuild once" do
    structures =
      orphans(
        for(n <- 3..8, do: fn -> HRW.Ring.new(node_names(n)) end) ++
          for(n <- 3..8, do: fn -> HRW.build(node_names(n), cluster_size: 2) end)
      )

    keys = Enum.map(1..400, &"key-#{&1}")

    rings =
      count_calls({HRW.Native, :ring_new, 2}, fn ->
        skeletons =
          count_calls({HRW.Native, :skeleton_new, 3}, fn ->
            for key <- keys, s <- structures do
              expected = HRW.owner(key, Tuple.to_list(s.nodes))
              if is_struct(s, HRW.Ring), do: assert(HRW.owner(key, s) == expected)
              assert [_, _] = HRW.owners(key, s, 2)
            end
          end)

        assert skeletons == 6
      end)

    assert rings == 6
  end

  test "the cache is bounded: a process keeps at most 32 rebuilt resources" do
    structures = orphans(for n <- 1..40, do: fn -> HRW.Ring.new(node_names(n + 2)) end)
    for s <- structures, do: HRW.owner("k", s)
    assert length(Process.get({HRW.Prepared, :rebuilt})) == 32
  end
end
