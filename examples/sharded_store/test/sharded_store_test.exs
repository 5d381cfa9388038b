defmodule ShardedStoreTest do
  # :peer nodes on loopback, 5 at a time, writes while they join, leave, are killed
  # and a partition heals. Nothing here assumes a speed: every wait is a poll with
  # a deadline far above its usual time, and no figure is asserted (they are
  # printed).
  use ExUnit.Case, async: false

  alias HRW.Cluster.Fingerprint

  @keys 2_000
  @writers 4
  @writes 20_000
  @settle 120_000

  defp start_peer do
    {:ok, peer, node} =
      :peer.start(%{
        name: :"ss_#{System.pid()}_#{System.unique_integer([:positive])}",
        host: ~c"127.0.0.1",
        longnames: true,
        connection: :standard_io,
        args: [
          # Links are made by the test only (so a cut stays cut), and global does
          # not cut further links when one drops.
          ~c"-kernel",
          ~c"dist_auto_connect",
          ~c"never",
          ~c"-kernel",
          ~c"prevent_overlapping_partitions",
          ~c"false",
          ~c"-kernel",
          ~c"logger_level",
          ~c"error" | Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
        ]
      })

    true = Node.connect(node)
    {peer, node}
  end

  defp rpc(node, m, f, a, timeout \\ 60_000), do: :erpc.call(node, m, f, a, timeout)

  defp join(live, expected) do
    {peer, node} = start_peer()
    for other <- live, do: true = rpc(node, :net_kernel, :connect_node, [other])
    {:ok, _} = rpc(node, ShardedStore, :start, [[expected: expected]])
    {peer, node}
  end

  defp fingerprints(nodes) do
    Map.new(nodes, fn node ->
      {node,
       try do
         {fp, pending, _held} = rpc(node, ShardedStore, :status, [], 10_000)
         {fp, pending}
       catch
         _, _ -> :no_answer
       end}
    end)
  end

  # Polls until `check` holds; the milliseconds it took. Flunks after @settle.
  defp until(check, what, started \\ System.monotonic_time(:microsecond)) do
    if check.() do
      (System.monotonic_time(:microsecond) - started) / 1000
    else
      if System.monotonic_time(:microsecond) - started > @settle * 1000,
        do: flunk("timed out waiting: #{what.()}")

      Process.sleep(10)
      until(check, what, started)
    end
  end

  # Every node of each group sees exactly its group (same fingerprint); with
  # `handoff: true`, also no push is pending.
  defp agreed?(groups, handoff) do
    Enum.all?(groups, fn group ->
      expected = Fingerprint.of(group)

      fingerprints(group)
      |> Enum.all?(fn
        {_node, {^expected, pending}} -> not handoff or pending == 0
        _ -> false
      end)
    end)
  end

  defp settle(groups, label, times) do
    t0 = System.monotonic_time(:microsecond)
    what = fn -> "#{label}: #{inspect(Enum.map(groups, &fingerprints/1))}" end
    agreed = until(fn -> agreed?(groups, false) end, what, t0)
    handed = until(fn -> agreed?(groups, true) end, what, t0)
    Agent.update(times, &[{label, agreed, handed} | &1])
  end

  # A writer: random keys of its own (so it alone versions them), each write
  # retried with the same version until some node acknowledges it.
  defp writer(w, table, live, stop) do
    keys = for i <- 0..(@keys - 1), rem(i, @writers) == w, do: "key-#{i}"
    loop_writer(keys, %{}, table, live, stop)
  end

  defp loop_writer(keys, versions, table, live, stop) do
    if :atomics.get(stop, 1) == 1 do
      :ok
    else
      key = Enum.random(keys)
      version = Map.get(versions, key, 0) + 1
      :ets.insert(table, {{:attempted, key}, version})
      write(key, version, table, live, 0)
      loop_writer(keys, Map.put(versions, key, version), table, live, stop)
    end
  end

  defp write(key, version, table, live, tries) when tries < 300 do
    coordinator = Enum.random(Agent.get(live, & &1))

    result =
      try do
        rpc(coordinator, ShardedStore, :put, [key, version, {key, version}], 15_000)
      catch
        _, reason -> {:error, reason}
      end

    case result do
      :ok ->
        :ets.insert(table, {{:acked, key}, version})
        :ets.insert(table, {{:ack, System.unique_integer([:monotonic])}, coordinator, now()})
        :ets.update_counter(table, :acks, 1, {:acks, 0})

      {:error, _} ->
        :ets.update_counter(table, :refused, 1, {:refused, 0})
        Process.sleep(5)
        write(key, version, table, live, tries + 1)
    end
  end

  defp write(_key, _version, table, _live, _tries),
    do: :ets.update_counter(table, :given_up, 1, {:given_up, 0})

  defp now, do: System.monotonic_time(:microsecond)

  defp median(xs) do
    xs = Enum.sort(xs)
    if xs == [], do: nil, else: Enum.at(xs, div(length(xs), 2))
  end

  defp halt(node) do
    rpc(node, :erlang, :halt, [], 5_000)
  catch
    _, _ -> :ok
  end

  # Runs `events` while writers write, then checks every acknowledged write.
  # Returns the figures.
  defp scenario(label, expected, events) do
    started = now()
    {:ok, live} = Agent.start_link(fn -> [] end)
    {:ok, times} = Agent.start_link(fn -> [] end)

    {peers, nodes} =
      Enum.reduce(1..5, {%{}, []}, fn _, {peers, nodes} ->
        {peer, node} = join(nodes, expected)
        {Map.put(peers, node, peer), nodes ++ [node]}
      end)

    settle([nodes], :start, times)
    Agent.update(live, fn _ -> nodes end)

    table = :ets.new(:writes, [:public, :set, write_concurrency: true])
    stop = :atomics.new(1, [])
    writers = for w <- 0..(@writers - 1), do: Task.async(fn -> writer(w, table, live, stop) end)

    count = fn key ->
      if :ets.member(table, key), do: :ets.lookup_element(table, key, 2), else: 0
    end

    until(fn -> count.(:acks) >= 1_000 end, fn -> "first writes" end)

    context = %{
      nodes: nodes,
      peers: peers,
      live: live,
      times: times,
      expected: expected,
      partitions: []
    }

    context =
      Enum.reduce(events, context, fn event, context ->
        context = event(event, context, count)
        Agent.update(live, fn _ -> context.nodes end)
        context
      end)

    %{nodes: nodes, peers: peers} = context
    until(fn -> count.(:acks) >= @writes end, fn -> "#{@writes} writes" end)
    :atomics.put(stop, 1, 1)
    Enum.each(writers, &Task.await(&1, @settle))
    settle([nodes], :end, times)

    # Every acknowledged write is readable with its value: the last acknowledged
    # version, or a later one this writer attempted (a retry that was not
    # acknowledged may still have reached both replicas).
    acked = :ets.match_object(table, {{:acked, :_}, :_})
    keys = Enum.map(acked, fn {{:acked, key}, _} -> key end)
    read = rpc(Enum.random(nodes), ShardedStore, :get_many, [keys], 120_000)

    lost =
      for {{:acked, key}, version} <- acked,
          attempted = :ets.lookup_element(table, {:attempted, key}, 2),
          not match?({:ok, {v, {^key, v}}} when v >= version and v <= attempted, read[key]),
          do: {key, version, read[key]}

    newer =
      Enum.count(acked, fn {{:acked, key}, version} ->
        match?({:ok, {v, _}} when v != version, read[key])
      end)

    ack_log = :ets.match_object(table, {{:ack, :_}, :_, :_})

    partitions =
      for %{minority: minority, cut: cut, seen: seen, heal: heal} <- context.partitions do
        acks = Enum.filter(ack_log, fn {_, c, at} -> c in minority and at > cut and at < heal end)

        %{
          before_seen: Enum.count(acks, fn {_, _, at} -> at <= seen end),
          after_seen: Enum.count(acks, fn {_, _, at} -> at > seen end)
        }
      end

    delays = Enum.flat_map(nodes, &rpc(&1, ShardedStore, :down_delays, []))
    visible = for {:visible, _, us} <- delays, do: us
    notified = for {:notified, _, us} <- delays, do: us
    pg = for {:pg, _, us} <- delays, do: us

    for node <- nodes, do: :peer.stop(peers[node])

    by_kind =
      times
      |> Agent.get(&Enum.reverse/1)
      |> Enum.group_by(fn {kind, _, _} -> kind end)

    report = """
    == #{label} (quorum {:majority, #{expected}})
    #{count.(:acks)} writes acknowledged, #{length(lost)} lost, over #{length(acked)} keys; \
    #{count.(:refused)} attempts refused and retried, #{count.(:given_up)} writes given up; \
    #{newer} keys read at a later attempted version than the last acknowledged
    partitions [2 | 3]: writes acknowledged by a minority-side coordinator between the cut and the heal: \
    #{Enum.map_join(partitions, ", ", &"#{&1.before_seen} before every view showed the cut, #{&1.after_seen} after")}
    a node still named after its nodedown, on the other nodes (us): until snapshot/1 drops it: \
    median #{inspect(median(visible))}, max #{inspect(Enum.max(visible, fn -> nil end))}, n=#{length(visible)}; \
    until the snapshot message: median #{inspect(median(notified))}, max #{inspect(Enum.max(notified, fn -> nil end))}; \
    until the :pg group drops it (the source): median #{inspect(median(pg))}, max #{inspect(Enum.max(pg, fn -> nil end))}
    time to agreement (same fingerprint everywhere) and to handoff done, after each kind of event, \
    polled every 10 ms from the test node (ms, sorted):
    #{Enum.map_join(by_kind, "\n", &kind_line/1)}
    total #{Float.round((now() - started) / 1_000_000, 1)} s
    """

    IO.puts(report)
    File.write!(Path.join(System.tmp_dir!(), "sharded_store_report.txt"), report, [:append])
    %{lost: lost, partitions: partitions, acks: count.(:acks)}
  end

  # All values of one kind of event, sorted (the median of two is the lower).
  defp kind_line({kind, xs}) do
    agreed = xs |> Enum.map(&elem(&1, 1)) |> Enum.sort()
    handed = xs |> Enum.map(&elem(&1, 2)) |> Enum.sort()

    "  #{kind}: n=#{length(xs)}, agreement #{Enum.map_join(agreed, " ", &fmt/1)}; " <>
      "handoff done #{Enum.map_join(handed, " ", &fmt/1)}"
  end

  defp fmt(ms), do: :erlang.float_to_binary(ms / 1, decimals: 1)

  defp event(:join, %{nodes: nodes} = c, _count) do
    {peer, node} = join(nodes, c.expected)
    nodes = nodes ++ [node]
    settle([nodes], :join, c.times)
    %{c | nodes: nodes, peers: Map.put(c.peers, node, peer)}
  end

  # The replica hands its keys over first, then the node stops.
  defp event(:leave, %{nodes: [node | nodes]} = c, _count) do
    Agent.update(c.live, fn _ -> nodes end)
    :ok = rpc(node, ShardedStore, :leave, [@settle], @settle + 10_000)
    settle([nodes], :leave, c.times)
    :peer.stop(c.peers[node])
    %{c | nodes: nodes}
  end

  defp event(:kill, %{nodes: [node | nodes]} = c, _count) do
    Agent.update(c.live, fn _ -> nodes end)
    halt(node)
    settle([nodes], :kill, c.times)
    %{c | nodes: nodes}
  end

  # A partition [2 | rest]; writes go on from both sides; then it heals.
  defp event(:partition, %{nodes: nodes} = c, count) do
    {minority, majority} = Enum.split(nodes, 2)
    cut = now()
    for a <- minority, b <- majority, do: rpc(a, :erlang, :disconnect_node, [b])
    settle([minority, majority], :partition, c.times)
    seen = now()
    before = count.(:acks)
    until(fn -> count.(:acks) >= before + 1_000 end, fn -> "writes in the partition" end)
    heal = now()
    for a <- minority, b <- majority, do: true = rpc(a, :net_kernel, :connect_node, [b])
    settle([nodes], :heal, c.times)
    partition = %{minority: minority, cut: cut, seen: seen, heal: heal}
    %{c | partitions: c.partitions ++ [partition]}
  end

  @tag timeout: 900_000
  test "with quorum, no acknowledged write is lost through joins, leaves, kills and healed partitions" do
    events = [
      :join,
      :leave,
      :kill,
      :join,
      :partition,
      :kill,
      :join,
      :join,
      :leave,
      :kill,
      :join,
      :partition
    ]

    result = scenario("churn", 5, events)
    assert result.lost == [], "lost: #{inspect(Enum.take(result.lost, 10))}"
    assert result.acks >= @writes
    # Once every view shows the cut, the minority side owns no key.
    assert Enum.all?(result.partitions, &(&1.after_seen == 0))
  end

  @tag timeout: 900_000
  test "without quorum, both sides of a partition acknowledge writes" do
    result = scenario("partition without quorum", 1, [:partition])
    assert result.lost == []
    [partition] = result.partitions
    IO.puts("without quorum: #{partition.after_seen} writes acknowledged on the minority side")
  end
end
