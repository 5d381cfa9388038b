defmodule Mix.Tasks.Hrw.Stalls do
  @shortdoc "Worst normal-scheduler stall of every public function at its largest normal input"
  @moduledoc """
  A benchmark, not a test: drives every public function of hrw at the largest input
  that still runs on a normal scheduler (found by asking the normal-scheduler NIF,
  which refuses larger input), while a separate process collects
  `:erlang.system_monitor/2` `long_schedule` events (the VM does not report a
  process's long schedules to that process itself). Prints, per function, the input
  the median time of one call and the worst `long_schedule` seen, in ms (events
  start at 1 ms).

      MIX_ENV=test mix hrw.stalls            # ~200 calls per function
      MIX_ENV=test mix hrw.stalls --calls 50

  It asks the NIFs' `_probe` twins, which only a test build of the library has.

  Read the figures as orders of magnitude on a loaded machine: a long schedule
  also counts time the OS gave to other processes, which the first row (no NIF at
  all) shows.
  """
  use Mix.Task

  @impl Mix.Task
  def run(args) do
    {opts, _, _} = OptionParser.parse(args, strict: [calls: :integer])
    calls = Keyword.get(opts, :calls, 200)
    Mix.Task.run("app.start")

    unless function_exported?(HRW.Native, :term_id_probe, 1) do
      Mix.raise(
        "mix hrw.stalls needs the NIFs' probes, which only a test build has: MIX_ENV=test"
      )
    end

    monitor = start_monitor()

    IO.puts("function | input | calls | median call (ms) | worst long_schedule (ms)")
    IO.puts("---|---|--:|--:|--:")

    for {label, input, fun} <- cases() do
      {median_us, worst} = measure(monitor, fun, calls)
      shown = if worst == 0, do: "< 1", else: Integer.to_string(worst)
      median = :erlang.float_to_binary(median_us / 1000, decimals: 2)
      IO.puts("#{label} | #{input} | #{calls} | #{median} | #{shown}")
    end
  end

  # -- the cases ---------------------------------------------------------------------

  defp names(n), do: Enum.map(1..n, &"node-#{&1}")
  defp keys(n), do: Enum.map(1..n, &"key-#{&1}")
  defp weighted(nodes), do: Enum.with_index(nodes, fn n, i -> {n, rem(i, 7) + 1} end)

  # Largest `size` in 1..limit for which `normal.(size)` does not ask for a dirty
  # scheduler (the budget decides, so the answer is the largest normal input).
  defp largest(limit, normal) do
    search(1, limit, normal)
  end

  # The normal-scheduler version of the NIF `name` on `args`: raises
  # `:hrw_needs_dirty` when the input exceeds its budget (its probe says so).
  defp normal(name, args) do
    case apply(HRW.Native, :"#{name}_probe", args) do
      {:needs_dirty, _, _} -> :erlang.error(:hrw_needs_dirty)
      _ -> :ok
    end
  end

  defp search(lo, hi, _normal) when lo >= hi, do: lo

  defp search(lo, hi, normal) do
    mid = div(lo + hi + 1, 2)

    fits? =
      try do
        normal.(mid)
        true
      catch
        :error, :hrw_needs_dirty -> false
      end

    if fits?, do: search(mid, hi, normal), else: search(lo, mid - 1, normal)
  end

  # Large structures live in :persistent_term, as in production: a worker that held
  # a million-node struct on its own heap would spend its long schedules in garbage
  # collection, not in hrw.
  defp shared(name, build) do
    key = {__MODULE__, name}
    :persistent_term.put(key, build.())
    fn -> :persistent_term.get(key) end
  end

  defp cases do
    skeleton_1m = shared(:skeleton_1m, fn -> HRW.build(names(1_000_000)) end)

    wide =
      shared(:wide, fn ->
        HRW.build(weighted(names(100_000)), cluster_size: 4096, scorer: %HRW.Weighted{})
      end)

    ring_1k = HRW.Ring.new(names(1_000))

    n_map = largest(200_000, &normal(:term_id, [Map.new(1..&1, fn i -> {i, i} end)]))
    map = Map.new(1..n_map, &{&1, &1})
    n_bin = largest(100_000_000, &normal(:term_id, [:binary.copy("x", &1)]))
    bin = :binary.copy("x", n_bin)
    n_list = largest(200_000, &normal(:list_owner, ["k", names(&1), false]))
    list = names(n_list)
    n_wlist = largest(200_000, &normal(:list_owners, ["k", weighted(names(&1)), 2, true]))
    wlist = weighted(names(n_wlist))
    n_ring = largest(200_000, &normal(:ring_new, [names(&1), false]))
    n_skel = largest(200_000, &normal(:skeleton_new, [names(&1), false, 16]))
    ring_big = HRW.Ring.new(names(n_ring))

    n_ring_owners =
      largest(200_000, &normal(:ring_owners, [HRW.Ring.new(names(&1)).resource, "k", 2]))

    ring_owners = HRW.Ring.new(names(n_ring_owners))
    n_ranks = largest(100_000, &normal(:skeleton_owners, [wide.().resource, "k", &1]))
    target = HRW.Prepared.nif_target(skeleton_1m.())
    n_batch = largest(8_192, &normal(:batch_owners, [keys(&1), target, 1]))

    n_groups =
      largest(8_192, &normal(:batch_groups, [keys(&1), HRW.Prepared.nif_target(ring_1k), 1]))

    n_moves = largest(8_192, &normal(:batch_moves, [keys(&1), target, target, 1]))
    n_bounded = largest(8_192, &normal(:bounded_assignments, [keys(&1), names(100), 0.1]))
    {batch_keys, group_keys, move_keys} = {keys(n_batch), keys(n_groups), keys(n_moves)}

    # Node size: 1 MB nodes, the moved structures' nodes copied separately.
    mb = Enum.map(1..3, &:binary.copy(<<&1>>, 1_000_000))
    mb_a = shared(:mb_a, fn -> HRW.Ring.new(mb) end)
    mb_b = shared(:mb_b, fn -> HRW.Ring.new(Enum.map(mb, &:binary.copy/1)) end)
    {mb_ta, mb_tb} = {HRW.Prepared.nif_target(mb_a.()), HRW.Prepared.nif_target(mb_b.())}
    n_mb_moves = largest(8_192, &normal(:batch_moves, [keys(&1), mb_ta, mb_tb, 1]))
    mb_move_keys = keys(n_mb_moves)

    mb40 =
      shared(:mb40, fn -> HRW.Ring.new(Enum.map(1..40, &:binary.copy(<<&1>>, 1_000_000))) end)

    n_mb_groups =
      largest(8_192, &normal(:batch_groups, [keys(&1), HRW.Prepared.nif_target(mb40.()), 1]))

    # Largest nodes that a 2,000-key group_by_owner over 40 of them keeps normal.
    n_node =
      largest(1_000_000, fn size ->
        nodes = Enum.map(1..40, &:binary.copy(<<&1>>, size))
        normal(:batch_groups, [keys(2_000), HRW.Prepared.nif_target(HRW.Ring.new(nodes)), 1])
      end)

    sized40 = HRW.Ring.new(Enum.map(1..40, &:binary.copy(<<&1>>, n_node)))
    mb_group_keys = keys(n_mb_groups)
    keys_2k = keys(2_000)

    # Unaligned binaries (inspecting one copies it) and ETF-built ids.
    n_unaligned = largest(10_000_000, &normal(:term_id, [unaligned(&1)]))
    unaligned_bin = unaligned(n_unaligned)
    n_bigs = largest(10_000, &normal(:term_id, [Enum.map(1..&1, fn i -> 2 ** 2039 + i end)]))
    bigs = Enum.map(1..n_bigs, &(2 ** 2039 + &1))
    n_refs = largest(10_000, &normal(:term_id, [Enum.map(1..&1, fn _ -> make_ref() end)]))
    refs = Enum.map(1..n_refs, fn _ -> make_ref() end)
    # Atom cache misses: 255-character atoms, a fresh slice of a large pool each call
    # (a slice was last seen many calls ago: evicted from the 8,192-slot cache).
    pool = List.to_tuple(long_atoms(100_000))
    n_atoms = largest(10_000, &normal(:term_id, [fresh_atoms(pool, &1)]))
    bounded_keys = keys(n_bounded)
    bounded_nodes = names(100)

    [
      # No NIF at all: what the machine itself adds (OS preemption of a scheduler
      # thread also shows up as a long schedule).
      {"control: :erlang.phash2/1", "1,000 calls",
       fn -> for i <- 1..1000, do: :erlang.phash2(i) end},
      {"HRW.term_id/1", "map of #{n_map} entries", fn -> HRW.term_id(map) end},
      {"HRW.term_id/1", "binary of #{n_bin} bytes", fn -> HRW.term_id(bin) end},
      {"HRW.owner/2", "list of #{n_list} nodes", fn -> HRW.owner("k", list) end},
      {"HRW.owners/4 weighted", "list of #{n_wlist} nodes, 2",
       fn -> HRW.owners("k", wlist, 2, scorer: %HRW.Weighted{}) end},
      {"HRW.Ring.new/1", "#{n_ring} nodes", fn -> HRW.Ring.new(list_of(n_ring)) end},
      {"HRW.build/1", "#{n_skel} nodes", fn -> HRW.build(list_of(n_skel)) end},
      {"HRW.owner/2", "ring of #{n_ring} nodes", fn -> HRW.owner("k", ring_big) end},
      {"HRW.owners/3", "ring of #{n_ring_owners} nodes, 2",
       fn -> HRW.owners("k", ring_owners, 2) end},
      {"HRW.owner/2", "skeleton of 1M nodes", fn -> HRW.owner("k", skeleton_1m.()) end},
      {"HRW.owners/3", "weighted 100k skeleton, leaves 4096, #{n_ranks} ranks",
       fn -> HRW.owners("k", wide.(), n_ranks) end},
      {"HRW.owner_batch/2", "#{n_batch} keys, 1M-node skeleton",
       fn -> HRW.owner_batch(batch_keys, skeleton_1m.()) end},
      {"HRW.group_by_owner/2", "#{n_groups} keys, 1k-node ring",
       fn -> HRW.group_by_owner(group_keys, ring_1k) end},
      {"HRW.moves/3", "#{n_moves} keys, 1M-node skeletons",
       fn -> HRW.moves(move_keys, skeleton_1m.(), skeleton_1m.()) end},
      {"HRW.Bounded.assignments/3", "#{n_bounded} keys x 100 nodes",
       fn -> HRW.Bounded.assignments(bounded_keys, bounded_nodes, epsilon: 0.1) end},
      {"HRW.moves/3", "#{n_mb_moves} keys, rings of 3 x 1 MB nodes copied apart",
       fn -> HRW.moves(mb_move_keys, mb_a.(), mb_b.()) end},
      {"HRW.moves/3", "2,000 keys, rings of 3 x 1 MB nodes copied apart (dirty)",
       fn -> HRW.moves(keys_2k, mb_a.(), mb_b.()) end},
      {"HRW.group_by_owner/2", "#{n_mb_groups} keys, ring of 40 x 1 MB nodes",
       fn -> HRW.group_by_owner(mb_group_keys, mb40.()) end},
      {"HRW.group_by_owner/2", "2,000 keys, ring of 40 x #{n_node} B nodes",
       fn -> HRW.group_by_owner(keys_2k, sized40) end},
      {"HRW.term_id/1", "unaligned binary of #{n_unaligned} bytes",
       fn -> HRW.term_id(unaligned_bin) end},
      {"HRW.term_id/1", "list of #{n_bigs} 2040-bit bignums", fn -> HRW.term_id(bigs) end},
      {"HRW.term_id/1", "list of #{n_refs} refs", fn -> HRW.term_id(refs) end},
      {"HRW.term_id/1", "list of #{n_atoms} uncached 255-char atoms",
       fn -> HRW.term_id(fresh_atoms(pool, n_atoms)) end}
    ]
  end

  defp unaligned(n) do
    # The size is read by the same pattern that uses it: Elixir 1.20 warns on a
    # size variable bound outside the match, and 1.14 cannot pin one.
    <<size::64, _::1, k::binary-size(size), _::7>> = <<n::64, :binary.copy(<<0>>, n + 1)::binary>>
    k
  end

  defp long_atoms(n) do
    for i <- 1..n,
        do: String.to_atom(String.duplicate("a", 245) <> String.pad_leading("#{i}", 10, "0"))
  end

  # `n` atoms of `pool` after those the last call took (round robin): each was
  # last seen long ago, so it has been evicted from the 8,192-slot atom cache.
  defp fresh_atoms(pool, n) do
    at = Process.get({__MODULE__, :atoms}, 0)
    Process.put({__MODULE__, :atoms}, at + n)
    for i <- at..(at + n - 1)//1, do: elem(pool, rem(i, tuple_size(pool)))
  end

  # Node lists are built once per size and kept (building them is not what we measure).
  defp list_of(n) do
    case Process.get({__MODULE__, n}) do
      nil ->
        list = names(n)
        Process.put({__MODULE__, n}, list)
        list

      list ->
        list
    end
  end

  # -- measuring ---------------------------------------------------------------------

  defp start_monitor do
    parent = self()

    pid =
      spawn_link(fn ->
        :erlang.system_monitor(self(), [{:long_schedule, 1}])
        send(parent, :monitoring)
        monitor_loop(%{})
      end)

    receive do
      :monitoring -> pid
    end
  end

  defp monitor_loop(worst) do
    receive do
      {:monitor, pid, :long_schedule, info} when is_pid(pid) ->
        ms = Keyword.get(info, :timeout, 0)
        monitor_loop(Map.update(worst, pid, ms, &max(&1, ms)))

      {:monitor, _port, :long_schedule, _info} ->
        monitor_loop(worst)

      {:worst, pid, from} ->
        send(from, {:worst, Map.get(worst, pid, 0)})
        monitor_loop(Map.delete(worst, pid))
    end
  end

  defp measure(monitor, fun, calls) do
    parent = self()
    # Warm once outside the measured process (first calls build caches and lists).
    fun.()

    worker =
      spawn_link(fn ->
        times =
          for _ <- 1..calls do
            t = System.monotonic_time(:microsecond)
            fun.()
            System.monotonic_time(:microsecond) - t
          end

        send(parent, {:done, self(), Enum.at(Enum.sort(times), div(calls, 2))})
      end)

    median =
      receive do
        {:done, ^worker, median} -> median
      end

    # Events are sent asynchronously: let the monitor drain its queue.
    Process.sleep(50)
    send(monitor, {:worst, worker, self()})

    receive do
      {:worst, ms} -> {median, ms}
    end
  end
end
