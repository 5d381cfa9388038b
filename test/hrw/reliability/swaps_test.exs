defmodule HRW.Reliability.SwapsTest do
  @moduledoc """
  1000 concurrent readers never see a broken structure while a writer swaps the
  structure in `:persistent_term` and ETS. `HRW_LONG=1` makes 1000 swaps instead
  of 30.
  """
  # Swaps :persistent_term (a global GC pass) many times: alone.
  use ExUnit.Case, async: false

  @long System.get_env("HRW_LONG") in ["1", "true"]
  # Swaps the writer makes while the readers run: a count, not a duration, so the
  # test checks the same thing on a fast machine and on a loaded one.
  @swaps if @long, do: 1_000, else: 30

  @moduletag timeout: HRW.TestTimeouts.ms(if(@long, do: 1_800_000, else: 600_000))

  test "1000 readers keep answering while structures are swapped #{@swaps} times" do
    pt_key = {__MODULE__, :swapped}
    table = :ets.new(:hrw_swapped, [:public, read_concurrency: true])

    generation = fn g ->
      nodes = Enum.map(1..(3 + rem(g, 40)), &"g#{rem(g, 7)}-n#{&1}")

      case rem(g, 4) do
        0 ->
          HRW.Ring.new(nodes)

        1 ->
          HRW.build(nodes, cluster_size: 4)

        2 ->
          HRW.Ring.new(Enum.map(nodes, &{&1, :erlang.phash2(&1, 5) + 1}), scorer: %HRW.Weighted{})

        3 ->
          HRW.build(Enum.map(nodes, &{&1, :erlang.phash2(&1, 5) + 1}), scorer: %HRW.Weighted{})
      end
    end

    publish = fn structure ->
      :persistent_term.put(pt_key, structure)
      :ets.insert(table, {:structure, structure})
    end

    publish.(generation.(0))
    # Every node any generation can hold: answers must come from these.
    all_nodes = MapSet.new(for g <- 0..6, i <- 1..42, do: "g#{g}-n#{i}")
    # Set when the writer is done: readers then stop (after at least one lookup each).
    stop = :atomics.new(1, [])
    parent = self()

    readers =
      for r <- 1..1000 do
        spawn_monitor(fn -> exit({:done, read_loop(r, pt_key, table, stop, all_nodes, 0)}) end)
      end

    _writer =
      spawn_link(fn ->
        for g <- 1..@swaps do
          publish.(generation.(g))
          Process.sleep(1)
        end

        :atomics.put(stop, 1, 1)
        send(parent, {:swaps, @swaps})
      end)

    results =
      for {pid, ref} <- readers do
        receive do
          {:DOWN, ^ref, :process, ^pid, reason} -> reason
        after
          600_000 -> flunk("a reader did not finish")
        end
      end

    assert_receive {:swaps, @swaps}, 60_000

    bad = Enum.reject(results, &match?({:done, n} when is_integer(n), &1))
    assert bad == [], "readers failed: #{inspect(Enum.take(bad, 5), limit: 10)}"
    # Every reader looked up at least once, whatever the machine's speed.
    assert Enum.all?(results, fn {:done, n} -> n >= 1 end)
    :persistent_term.erase(pt_key)
  end

  # Reads the current structure (alternately from :persistent_term and ETS), looks
  # keys up in it and checks each answer; returns the number of lookups.
  defp read_loop(r, pt_key, table, stop, all_nodes, done) do
    if done > 0 and :atomics.get(stop, 1) == 1 do
      done
    else
      structure =
        if rem(done, 2) == 0 do
          :persistent_term.get(pt_key)
        else
          [{:structure, s}] = :ets.lookup(table, :structure)
          s
        end

      members = structure |> nodes_of() |> MapSet.new()
      key = {r, done}
      owner = HRW.owner(key, structure)
      [first | _] = owners = HRW.owners(key, structure, 3)

      unless MapSet.member?(members, owner) and MapSet.member?(all_nodes, owner) and
               first == owner and Enum.all?(owners, &MapSet.member?(members, &1)) do
        exit({:bad_answer, owner, owners, structure})
      end

      # Now and then a batch (through the dirty scheduler for larger ones).
      if rem(r, 10) == 0 and rem(done, 50) == 0 do
        keys = Enum.map(1..(1 + rem(r, 3) * 5_000), &{r, &1})

        unless Enum.all?(HRW.owner_batch(keys, structure), &MapSet.member?(members, &1)) do
          exit({:bad_batch, structure})
        end
      end

      Process.sleep(rem(r, 3))
      read_loop(r, pt_key, table, stop, all_nodes, done + 1)
    end
  end

  defp nodes_of(%HRW.Ring{} = ring), do: ring.nodes |> Tuple.to_list()
  defp nodes_of(%HRW.Skeleton{} = skeleton), do: skeleton.nodes |> Tuple.to_list()
end
