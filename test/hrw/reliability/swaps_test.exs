defmodule HRW.Reliability.SwapsTest do
  @moduledoc """
  1000 concurrent readers always get the right owners while a writer swaps the
  structure in `:persistent_term` and ETS: each answer equals the one a reference
  built apart from the swapped structures gives for the same members. 8 swaps in
  `mix test`, 30 in `./scripts/test`, 1000 with `HRW_TEST_SIZE=long` (`HRW.TestSize`).
  """
  # Swaps :persistent_term (a global GC pass) many times: alone.
  use ExUnit.Case, async: false

  @long HRW.TestSize.level() == :long
  # Swaps the writer makes while the readers run: a count, not a duration, so the
  # test checks the same thing on a fast machine and on a loaded one.
  @swaps HRW.TestSize.pick(quick: 8, ci: 30, long: 1_000)

  @moduletag timeout: HRW.TestTimeouts.ms(if(@long, do: 1_800_000, else: 600_000))

  test "1000 readers keep getting the right owners while structures are swapped #{@swaps} times" do
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

    # The right answers: for each structure the writer can publish (by kind and
    # fingerprint), a reference built here, before any swap. A ring's is its node
    # list (the list's owners are exactly a ring's); a skeleton's is a skeleton
    # built apart from the published one.
    refs =
      Map.new(0..@swaps, fn g ->
        structure = generation.(g)
        {{structure.__struct__, structure.fingerprint}, reference(generation.(g))}
      end)

    # Set when the writer is done: readers then stop (after at least one lookup each).
    stop = :atomics.new(1, [])
    parent = self()

    readers =
      for r <- 1..1000 do
        spawn_monitor(fn -> exit({:done, read_loop(r, pt_key, table, stop, refs, 0)}) end)
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

  # What a structure's answers are checked against: `{target, options}`.
  defp reference(%HRW.Ring{weights: nil} = ring), do: {HRW.Ring.nodes(ring), []}

  defp reference(%HRW.Ring{} = ring),
    do: {HRW.Ring.nodes(ring), [scorer: %HRW.Weighted{}]}

  defp reference(%HRW.Skeleton{} = skeleton), do: {skeleton, []}

  # Reads the current structure (alternately from :persistent_term and ETS), looks
  # keys up in it and checks each answer against the structure's reference; returns
  # the number of lookups.
  defp read_loop(r, pt_key, table, stop, refs, done) do
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

      {ref, opts} = Map.fetch!(refs, {structure.__struct__, structure.fingerprint})
      key = {r, done}
      owner = HRW.owner(key, structure)
      owners = HRW.owners(key, structure, 3)

      unless owner == HRW.owner(key, ref, opts) and owners == HRW.owners(key, ref, 3, opts) do
        exit({:wrong_answer, key, owner, owners, structure})
      end

      # Now and then a batch (through the dirty scheduler for larger ones).
      if rem(r, 10) == 0 and rem(done, 50) == 0 do
        keys = Enum.map(1..(1 + rem(r, 3) * 5_000), &{r, &1})

        unless HRW.owner_batch(keys, structure) == HRW.owner_batch(keys, ref, opts) do
          exit({:wrong_batch, structure})
        end
      end

      Process.sleep(rem(r, 3))
      read_loop(r, pt_key, table, stop, refs, done + 1)
    end
  end
end
