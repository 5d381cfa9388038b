defmodule ShardedStoreSilentTest do
  # A silent partition [2 | 3] under writes from both sides: 5 :peer nodes whose
  # links run through the relay of HRW.SilentPartition (the library's
  # test/support, loaded by test_helper.exs), so a cut drops every byte between
  # the sides and closes nothing, and no :nodedown fires before net_ticktime. The
  # store runs with a lease; the one bound asserted is the lease's, with a
  # generous margin. Every other wait is a poll with a deadline far above its
  # usual time.
  use ExUnit.Case, async: false

  alias HRW.Cluster.Fingerprint
  alias HRW.SilentPartition, as: SP

  @keys 1_000
  # Per side: writers keep to the coordinators of their side.
  @writers 4
  @readers 2

  defp lease, do: HRW.TestTimeouts.ms(1_000)
  defp margin, do: HRW.TestTimeouts.ms(1_000)
  # Far above lease + margin: without the lease the minority keeps its quorum
  # until the :nodedown, 0.75 to 1.25 times this after the cut.
  defp ticktime, do: div(HRW.TestTimeouts.ms(10_000), 1_000)
  defp deadline, do: HRW.TestTimeouts.ms(120_000)

  defp now, do: System.os_time(:microsecond)

  # Over :peer's control connection, never through the relay; a failure is an error.
  defp call(harness, node, m, f, a, timeout \\ 60_000) do
    SP.call(harness, node, m, f, a, timeout)
  catch
    kind, reason -> {:error, {kind, reason}}
  end

  defp until(check, what), do: SP.await(check, deadline(), what)

  defp quorum?(harness, node),
    do: call(harness, node, HRW.Cluster, :snapshot, [ShardedStore.cluster()]).quorum?

  # Every node of each group has processed exactly its group; with `handoff`, and
  # has no push pending.
  defp agreed?(harness, groups, handoff) do
    Enum.all?(groups, fn group ->
      expected = Fingerprint.of(group)

      Enum.all?(group, fn node ->
        case call(harness, node, ShardedStore, :status, [], 10_000) do
          {^expected, pending, _held} -> not handoff or pending == 0
          _ -> false
        end
      end)
    end)
  end

  # Links within a group that global cut (prevent_overlapping_partitions, as a
  # :nodedown is handled) are made again, as dist_auto_connect would. Returns false.
  defp mend(harness, groups) do
    for group <- groups, a <- group, b <- group, a < b do
      call(harness, a, :net_kernel, :connect_node, [b], 10_000)
    end

    false
  end

  defp settle(harness, groups, what) do
    until(fn -> agreed?(harness, groups, false) or mend(harness, groups) end, what)
    until(fn -> agreed?(harness, groups, true) or mend(harness, groups) end, what)
  end

  # A writer: random keys of its own (so it alone versions them), each write
  # retried with the same version through its side's coordinators until one
  # acknowledges it.
  defp writer(keys, side, ctx), do: write_loop(keys, %{}, side, ctx)

  defp write_loop(keys, versions, side, ctx) do
    if :atomics.get(ctx.stop, 1) == 0 do
      key = Enum.random(keys)
      version = Map.get(versions, key, 0) + 1
      :ets.insert(ctx.table, {{:attempted, key}, version})
      write(key, version, side, ctx, 0)
      write_loop(keys, Map.put(versions, key, version), side, ctx)
    end
  end

  defp write(key, version, side, %{table: table} = ctx, tries) when tries < 300 do
    coordinator = Enum.random(side)
    started = now()
    put = [key, version, {key, version}]

    case call(ctx.harness, coordinator, ShardedStore, :put, put, 15_000) do
      :ok ->
        acked = now()
        :ets.insert(table, {{:acked, key}, version, acked})
        :ets.insert(table, {{:ack, System.unique_integer()}, coordinator, started, acked})

      # One writer per key, versions raised one at a time: a stale or conflicting
      # answer would mean the store lost or invented a write.
      {:error, {kind, _}} = error when kind in [:stale, :conflict] ->
        :ets.insert(table, {{:refusal, key, version}, error})

      {:error, _} ->
        Process.sleep(5)
        write(key, version, side, ctx, tries + 1)
    end
  end

  defp write(_key, _version, _side, ctx, _tries),
    do: :ets.update_counter(ctx.table, :given_up, 1, {:given_up, 0})

  # A reader: random keys through random nodes. A read is stale when it answers
  # with a version below the last acknowledgement completed before it began.
  defp reader(ctx) do
    if :atomics.get(ctx.stop, 1) == 0 do
      key = Enum.random(ctx.keys)
      before = :ets.lookup(ctx.table, {:acked, key})
      started = now()
      result = call(ctx.harness, Enum.random(ctx.nodes), ShardedStore, :get, [key], 15_000)

      case {result, before} do
        {{:error, _}, _} ->
          :ets.update_counter(ctx.table, :reads_refused, 1, {:reads_refused, 0})

        {_, [{_, acked, acked_at}]}
        when not is_tuple(result) or elem(elem(result, 1), 0) < acked ->
          :ets.update_counter(ctx.table, :reads, 1, {:reads, 0})
          stale = {key, acked, acked_at, started, result}
          :ets.insert(ctx.table, {{:stale, System.unique_integer()}, stale})

        _ ->
          :ets.update_counter(ctx.table, :reads, 1, {:reads, 0})
      end

      reader(ctx)
    end
  end

  defp keys, do: for(i <- 0..(@keys - 1), do: "key-#{i}")

  defp acks(table, filter) do
    for {_, coordinator, started, acked} <- :ets.match_object(table, {{:ack, :_}, :_, :_, :_}),
        filter.(coordinator, started, acked),
        do: {coordinator, started, acked}
  end

  defp count(table, key),
    do: if(:ets.member(table, key), do: :ets.lookup_element(table, key, 2), else: 0)

  # Every key, read again while a read is refused.
  defp read_back(harness, node, keys, read \\ %{}) do
    read = Map.merge(read, SP.call(harness, node, ShardedStore, :get_many, [keys], 120_000))
    refused = for {key, {:error, _}} <- read, do: key

    if refused == [] do
      read
    else
      Process.sleep(100)
      read_back(harness, node, refused, read)
    end
  end

  @tag timeout: 600_000
  test "with a lease, a silent [2 | 3] cut: the minority stops acknowledging within the " <>
         "lease, the majority goes on once its views settle, and after the heal no " <>
         "acknowledged write is lost and no read was stale" do
    # :critical: the :nodedowns log "not responding" reports, which this test provokes.
    harness = SP.start(5, prefix: :ss_silent, net_ticktime: ticktime(), logger_level: :critical)
    on_exit(fn -> SP.stop(harness) end)
    nodes = harness.nodes
    {minority, majority} = Enum.split(nodes, 2)

    # `forget:` above the partition's length: a key whose two owners are cut off
    # stays refused on the majority until the heal (the envelope's "partition
    # longer than 5 s" is not what this test is about).
    opts = [expected: 5, lease: lease(), forget: 600_000]
    for node <- nodes, do: {:ok, _} = SP.call(harness, node, ShardedStore, :start, [opts])
    settle(harness, [nodes], "the start")
    until(fn -> Enum.all?(nodes, &quorum?(harness, &1)) end, "a quorum everywhere")

    table = :ets.new(:writes, [:public, :set, write_concurrency: true])
    stop = :atomics.new(1, [])
    ctx = %{harness: harness, nodes: nodes, keys: keys(), table: table, stop: stop}

    # The minority's writers take the keys whose two owners are both on the
    # minority: the only writes it can acknowledge during the cut (any other
    # waits on a silent link until put/3's 5 s timeout). The majority's take
    # the rest.
    {minority_keys, majority_keys} =
      Enum.split_with(keys(), fn key ->
        owners =
          SP.call(harness, hd(nodes), HRW.Cluster, :owners, [ShardedStore.cluster(), key, 2])

        Enum.sort(owners) == Enum.sort(minority)
      end)

    writers =
      for {keys, side} <- [{minority_keys, minority}, {majority_keys, majority}],
          w <- 0..(@writers - 1) do
        mine = keys |> Enum.with_index() |> Enum.filter(&(rem(elem(&1, 1), @writers) == w))
        Task.async(fn -> writer(Enum.map(mine, &elem(&1, 0)), side, ctx) end)
      end

    tasks = writers ++ for _ <- 1..@readers, do: Task.async(fn -> reader(ctx) end)

    on_side = fn side -> fn coordinator, _, _ -> coordinator in side end end
    until(fn -> length(acks(table, on_side.(minority))) >= 200 end, "minority writes")
    until(fn -> length(acks(table, on_side.(majority))) >= 200 end, "majority writes")

    cut = SP.cut(harness, minority, majority)

    # The lapse: the minority's quorum goes while its view still holds every
    # member (no :nodedown yet), so the lease took it.
    until(fn -> not Enum.any?(minority, &quorum?(harness, &1)) end, "the minority's lapse")
    lapsed = now()

    lapse_views =
      for node <- minority do
        Enum.sort(call(harness, node, HRW.Cluster, :snapshot, [ShardedStore.cluster()]).members)
      end

    lapse_links = for node <- minority, do: Enum.sort(call(harness, node, Node, :list, []))

    # The :nodedowns (net_ticktime): each side's view is its own side.
    settle(harness, [minority, majority], "the views after the :nodedowns")
    settled = now()

    until(
      fn -> length(acks(table, fn c, s, _ -> c in majority and s > settled end)) >= 200 end,
      "majority writes after its views settled"
    )

    healed = SP.heal(harness, minority, majority)
    settle(harness, [nodes], "the heal")
    joined = length(acks(table, fn _, _, _ -> true end))
    until(fn -> length(acks(table, fn _, _, _ -> true end)) >= joined + 500 end, "writes after")

    :atomics.put(ctx.stop, 1, 1)
    Enum.each(tasks, &Task.await(&1, deadline()))
    settle(harness, [nodes], "the end")

    # Every acknowledged write is readable: the last acknowledged version, or a
    # later one its writer attempted (a retry may have reached both replicas).
    acked = :ets.match_object(table, {{:acked, :_}, :_, :_})
    read = read_back(harness, hd(nodes), Enum.map(acked, fn {{:acked, key}, _, _} -> key end))

    lost =
      for {{:acked, key}, version, _} <- acked,
          attempted = :ets.lookup_element(table, {:attempted, key}, 2),
          not match?({:ok, {v, {^key, v}}} when v >= version and v <= attempted, read[key]),
          do: {key, version, read[key]}

    stale = for {_, stale} <- :ets.match_object(table, {{:stale, :_}, :_}), do: stale
    refusals = :ets.match_object(table, {{:refusal, :_, :_}, :_})

    cut_off_acks = acks(table, fn c, _, a -> c in minority and a > cut and a < healed end)
    last = cut_off_acks |> Enum.map(&elem(&1, 2)) |> Enum.max(fn -> cut end)

    during = length(acks(table, fn c, _, a -> c in majority and a > cut and a < healed end))

    report = """
    == silent partition [2 | 3] (quorum {:majority, 5}, lease #{lease()} ms, net_ticktime #{ticktime()} s)
    minority: #{length(cut_off_acks)} writes acknowledged after the cut, the last \
    #{div(last - cut, 1000)} ms after it (bound asserted: lease + #{margin()} ms); \
    its lapse seen by the test (polling) #{div(lapsed - cut, 1000)} ms after the cut
    majority: #{during} writes acknowledged between the cut and the heal; views settled \
    #{div(settled - cut, 1000)} ms after the cut, healed #{div(healed - cut, 1000)} ms after it
    #{length(acks(table, fn _, _, _ -> true end))} writes acknowledged in all, over \
    #{length(acked)} keys, #{length(lost)} lost; #{count(table, :reads)} reads \
    answered, #{length(stale)} stale, #{count(table, :reads_refused)} refused; \
    #{length(refusals)} writes answered stale or conflict, #{count(table, :given_up)} given up
    """

    ShardedStore.TestReport.print(report)

    assert last < cut + (lease() + margin()) * 1000,
           "the minority acknowledged a write #{div(last - cut, 1000)} ms after the cut"

    assert lapse_views == [Enum.sort(nodes), Enum.sort(nodes)],
           "views at the lapse: #{inspect(lapse_views)}"

    assert lapse_links == Enum.map(minority, &Enum.sort(nodes -- [&1]))
    assert lost == [], "lost: #{inspect(Enum.take(lost, 10))}"
    assert stale == [], "stale reads: #{inspect(Enum.take(stale, 10))}"
    assert refusals == [], "refused: #{inspect(Enum.take(refusals, 10))}"
    assert count(table, :reads) > 0
  end
end
