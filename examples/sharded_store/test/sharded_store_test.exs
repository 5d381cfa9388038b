defmodule ShardedStoreTest do
  # :peer nodes on loopback, 5 at a time, writes and reads while they join, leave,
  # are killed (one at a time, then two within a few ms) and a partition heals.
  # Nothing here assumes a speed: every wait is a poll with a deadline far above
  # its usual time, and no figure is asserted (SHARDED_STORE_REPORT=1 prints them).
  use ExUnit.Case, async: false

  alias HRW.Cluster.Fingerprint

  @keys 2_000
  @writers 4
  @readers 2
  @writes 20_000
  @settle 120_000
  # ShardedStore's default forget: (how long a key whose two owners left refuses).
  @forget 5_000

  defp start_peer,
    do: ShardedStore.TestPeer.start(:"ss_#{System.pid()}_#{System.unique_integer([:positive])}")

  defp rpc(node, m, f, a, timeout \\ 60_000), do: :erpc.call(node, m, f, a, timeout)

  defp join(live, expected, opts \\ []) do
    {peer, node} = start_peer()
    for other <- live, do: true = rpc(node, :net_kernel, :connect_node, [other])
    # opts first: their forget: wins.
    {:ok, _} = rpc(node, ShardedStore, :start, [opts ++ [expected: expected, forget: @forget]])
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

    agreed =
      until(fn -> agreed?(groups, false) or ShardedStore.TestPeer.mend(groups) end, what, t0)

    handed =
      until(fn -> agreed?(groups, true) or ShardedStore.TestPeer.mend(groups) end, what, t0)

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

      if :ets.member(table, {:frozen, key}) do
        loop_writer(keys, versions, table, live, stop)
      else
        version = Map.get(versions, key, 0) + 1
        :ets.insert(table, {{:attempted, key}, version})
        write(key, version, table, live, 0)
        loop_writer(keys, Map.put(versions, key, version), table, live, stop)
      end
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
        :ets.insert(table, {{:acked, key}, version, now()})
        :ets.insert(table, {{:ack, System.unique_integer([:monotonic])}, coordinator, now()})
        :ets.update_counter(table, :acks, 1, {:acks, 0})

      # A writer owns its keys and raises their versions one at a time: a stale
      # or conflicting write would mean the store lost or invented one.
      {:error, {kind, _}} = error when kind in [:stale, :conflict] ->
        :ets.insert(table, {{:refusal, key, version}, error})
        :ets.update_counter(table, :refused, 1, {:refused, 0})

      {:error, _} ->
        :ets.update_counter(table, :refused, 1, {:refused, 0})

        # A key frozen meanwhile (its two owners cut off or killed: refused for
        # forget:) is left alone, as a new write to it would be.
        if :ets.member(table, {:frozen, key}) do
          :ets.update_counter(table, :given_up, 1, {:given_up, 0})
        else
          Process.sleep(5)
          write(key, version, table, live, tries + 1)
        end
    end
  end

  defp write(_key, _version, table, _live, _tries),
    do: :ets.update_counter(table, :given_up, 1, {:given_up, 0})

  # A reader: random keys through random nodes. A read is stale when it answers
  # (`{:ok, _}` or `:not_found`) with a version below the last acknowledgement
  # that completed before the read began.
  defp reader(table, live, stop) do
    if :atomics.get(stop, 1) == 1 do
      :ok
    else
      key = "key-#{:rand.uniform(@keys) - 1}"

      before =
        case :ets.lookup(table, {:acked, key}) do
          [{_, version, at}] -> {version, at}
          [] -> nil
        end

      started = now()

      result =
        try do
          rpc(Enum.random(Agent.get(live, & &1)), ShardedStore, :get, [key], 15_000)
        catch
          _, reason -> {:error, reason}
        end

      case {result, before} do
        {{:error, _}, _} ->
          :ets.update_counter(table, :reads_refused, 1, {:reads_refused, 0})

        {_, {acked, acked_at}} when not is_tuple(result) or elem(elem(result, 1), 0) < acked ->
          :ets.update_counter(table, :reads, 1, {:reads, 0})
          stale = {key, acked, acked_at, started, result, now()}
          :ets.insert(table, {{:stale, System.unique_integer([:monotonic])}, stale})

        _ ->
          :ets.update_counter(table, :reads, 1, {:reads, 0})
      end

      reader(table, live, stop)
    end
  end

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
    readers = for _ <- 1..@readers, do: Task.async(fn -> reader(table, live, stop) end)

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
      partitions: [],
      double_kills: [],
      table: table
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
    Enum.each(writers ++ readers, &Task.await(&1, @settle))
    settle([nodes], :end, times)

    # Every acknowledged write is readable with its value: the last acknowledged
    # version, or a later one this writer attempted (a retry that was not
    # acknowledged may still have reached both replicas).
    acked = :ets.match_object(table, {{:acked, :_}, :_, :_})
    keys = Enum.map(acked, fn {{:acked, key}, _, _} -> key end)
    read = read_back(Enum.random(nodes), keys)

    lost =
      for {{:acked, key}, version, at} <- acked,
          attempted = :ets.lookup_element(table, {:attempted, key}, 2),
          not match?({:ok, {v, {^key, v}}} when v >= version and v <= attempted, read[key]),
          do: {key, version, at, read[key]}

    # The envelope: a key owned by both nodes of a double kill may lose the writes
    # acknowledged before the survivors' views settled, and reads of it that
    # began after the kill may be stale. Nothing else may be lost or stale.
    double_kills = context.double_kills

    {lost_in_double_kill, lost} =
      Enum.split_with(lost, fn {key, _, at, _} ->
        Enum.any?(double_kills, &(key in &1.keys and at <= &1.settled))
      end)

    {stale_in_double_kill, stale} =
      table
      |> :ets.match_object({{:stale, :_}, :_})
      |> Enum.map(&elem(&1, 1))
      |> Enum.split_with(fn {key, _, acked_at, started, _, _} ->
        Enum.any?(double_kills, &(key in &1.keys and acked_at <= &1.settled and started >= &1.at))
      end)

    # Reads of keys whose two owners a partition cut off, while it lasted: the
    # majority side must refuse them (it cannot know what they hold) for forget:
    # after its views dropped them (at or after the cut), so every read that
    # completed within forget of the cut; counted apart to show where a stale
    # read would come from. Those that completed later are the envelope's
    # "partition longer than forget:" (the departure may have been recorded up
    # to the settle after the cut), printed, not asserted.
    {stale_cut_off, stale} =
      Enum.split_with(stale, fn {key, _, _, started, _, _} ->
        Enum.any?(
          context.partitions,
          &(key in &1.keys and started >= &1.cut and started <= &1.healed)
        )
      end)

    {stale_forgotten, stale_cut_off} =
      Enum.split_with(stale_cut_off, fn {key, _, _, _, _, finished} ->
        Enum.any?(context.partitions, &(key in &1.keys and finished >= &1.cut + @forget * 1000))
      end)

    refusals = :ets.match_object(table, {{:refusal, :_, :_}, :_})

    newer =
      Enum.count(acked, fn {{:acked, key}, version, _} ->
        match?({:ok, {v, _}} when v != version, read[key])
      end)

    ack_log = :ets.match_object(table, {{:ack, :_}, :_, :_})

    partitions =
      for %{minority: minority, cut: cut, seen: seen, heal: heal} <- context.partitions do
        acks = Enum.filter(ack_log, fn {_, c, at} -> c in minority and at > cut and at < heal end)

        %{
          before_seen: Enum.count(acks, fn {_, _, at} -> at <= seen end),
          after_seen: Enum.count(acks, fn {_, _, at} -> at > seen end),
          lasted: div(heal - cut, 1000)
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
    #{count.(:refused)} attempts refused and retried (#{length(refusals)} of them stale or conflict), \
    #{count.(:given_up)} writes given up; \
    #{newer} keys read at a later attempted version than the last acknowledged
    #{count.(:reads)} reads answered, #{length(stale)} stale (besides #{length(stale_cut_off)} of keys whose two owners \
    a partition cut off, within forget: of the cut, and #{length(stale_forgotten)} after it), \
    #{count.(:reads_refused)} refused (no quorum, unavailable)
    double kills: #{Enum.map_join(double_kills, ", ", &double_kill_line/1)}; \
    at the end #{length(lost_in_double_kill)} of those keys still lost, #{length(stale_in_double_kill)} stale reads of them
    partitions [2 | 3]: writes acknowledged by a minority-side coordinator between the cut and the heal: \
    #{Enum.map_join(partitions, ", ", &"#{&1.before_seen} before every view showed the cut, #{&1.after_seen} after (cut to heal #{&1.lasted} ms)")}
    a node still named after its nodedown, on the other nodes (us): until snapshot/1 drops it: \
    median #{inspect(median(visible))}, max #{inspect(Enum.max(visible, fn -> nil end))}, n=#{length(visible)}; \
    until the snapshot message: median #{inspect(median(notified))}, max #{inspect(Enum.max(notified, fn -> nil end))}; \
    until the :pg group drops it (the source): median #{inspect(median(pg))}, max #{inspect(Enum.max(pg, fn -> nil end))}
    time to agreement (same fingerprint everywhere) and to handoff done, after each kind of event, \
    polled every 10 ms from the test node (ms, sorted):
    #{Enum.map_join(by_kind, "\n", &kind_line/1)}
    total #{Float.round((now() - started) / 1_000_000, 1)} s
    """

    ShardedStore.TestReport.print(report)

    %{
      lost: lost,
      lost_in_double_kill: lost_in_double_kill,
      stale: stale,
      stale_cut_off: stale_cut_off,
      refusals: refusals,
      partitions: partitions,
      acks: count.(:acks),
      reads: count.(:reads)
    }
  end

  # Every key, read again while a read is refused (a key whose two owners left
  # refuses for a while, see ShardedStore.Replica).
  defp read_back(node, keys, read \\ %{}) do
    read = Map.merge(read, rpc(node, ShardedStore, :get_many, [keys], 120_000))
    refused = for {key, {:error, _}} <- read, do: key

    if refused == [] do
      read
    else
      Process.sleep(100)
      read_back(node, refused, read)
    end
  end

  defp double_kill_line(kill) do
    "#{kill.gap} ms apart, #{MapSet.size(kill.keys)} keys owned by both, #{kill.acked} of them " <>
      "acknowledged, #{kill.lost} of those lost (read back once the survivors answer)"
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

  # Two nodes halted 0-10 ms apart, within the handoff window of the first: the
  # keys owned by both (in the view before) have no copy left. Writers leave those
  # keys alone until they have been read back, so that a later write does not
  # hide the loss.
  defp event(:double_kill, %{nodes: [a, b | nodes]} = c, _count) do
    both = owned_by_both(hd(nodes), [a, b])
    :ets.insert(c.table, Enum.map(both, &{{:frozen, &1}}))
    Agent.update(c.live, fn _ -> nodes end)
    gap = :rand.uniform(11) - 1
    at = now()
    :erpc.cast(a, :erlang, :halt, [])
    Process.sleep(gap)
    :erpc.cast(b, :erlang, :halt, [])
    settle([nodes], :double_kill, c.times)
    settled = now()

    acked =
      for key <- both,
          [{_, version, _}] <- [:ets.lookup(c.table, {:acked, key})],
          into: %{},
          do: {key, version}

    read = read_back(hd(nodes), Map.keys(acked))

    lost =
      Enum.count(acked, fn {key, version} ->
        not match?({:ok, {v, _}} when v >= version, read[key])
      end)

    Enum.each(both, &:ets.delete(c.table, {:frozen, &1}))
    kill = %{keys: both, gap: gap, at: at, settled: settled, acked: map_size(acked), lost: lost}
    %{c | nodes: nodes, double_kills: c.double_kills ++ [kill]}
  end

  # A partition [2 | rest]; writes go on from both sides; then it heals. The keys
  # whose two owners are cut off refuse reads and writes on the majority side
  # for forget:, and the minority side has no quorum: writers leave them alone
  # until the heal.
  defp event(:partition, %{nodes: nodes} = c, count) do
    {minority, majority} = Enum.split(nodes, 2)
    both = owned_by_both(hd(majority), minority)
    :ets.insert(c.table, Enum.map(both, &{{:frozen, &1}}))
    cut = now()
    for a <- minority, b <- majority, do: rpc(a, :erlang, :disconnect_node, [b])
    settle([minority, majority], :partition, c.times)
    seen = now()
    before = count.(:acks)
    until(fn -> count.(:acks) >= before + 1_000 end, fn -> "writes in the partition" end)
    heal = now()
    for a <- nodes, b <- nodes, a < b, do: true = rpc(a, :net_kernel, :connect_node, [b])
    settle([nodes], :heal, c.times)
    Enum.each(both, &:ets.delete(c.table, {:frozen, &1}))
    partition = %{minority: minority, cut: cut, seen: seen, heal: heal, healed: now(), keys: both}
    %{c | partitions: c.partitions ++ [partition]}
  end

  # The keys whose two owners, in `node`'s view, are `pair`.
  defp owned_by_both(node, pair) do
    for i <- 0..(@keys - 1),
        key = "key-#{i}",
        owners = rpc(node, HRW.Cluster, :owners, [ShardedStore.cluster(), key, 2]),
        Enum.sort(owners) == Enum.sort(pair),
        into: MapSet.new(),
        do: key
  end

  @tag timeout: 900_000
  test "with quorum, single faults lose no acknowledged write and give no stale read; a double kill loses only keys owned by both" do
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
      :partition,
      :double_kill,
      :join,
      :join
    ]

    result = scenario("churn", 5, events)
    assert result.lost == [], "lost: #{inspect(Enum.take(result.lost, 10))}"
    assert result.stale == [], "stale reads: #{inspect(Enum.take(result.stale, 10))}"
    assert result.stale_cut_off == [], "stale: #{inspect(Enum.take(result.stale_cut_off, 10))}"
    assert result.refusals == [], "refused: #{inspect(Enum.take(result.refusals, 10))}"
    assert result.acks >= @writes
    assert result.reads > 0
    # Once every view shows the cut, the minority side owns no key.
    assert Enum.all?(result.partitions, &(&1.after_seen == 0))
  end

  @tag timeout: 900_000
  test "without quorum, both sides of a partition acknowledge writes" do
    result = scenario("partition without quorum", 1, [:partition])
    assert result.lost == []
    [partition] = result.partitions

    ShardedStore.TestReport.print(
      "without quorum: #{partition.after_seen} writes acknowledged on the minority side"
    )
  end

  # A key the library refuses (nested deeper than 256 levels), built at run time.
  defp deep_key, do: Enum.reduce(1..300, :k, fn _, term -> [term] end)

  # What a call on `node` raised, as the exception struct (erpc wraps it).
  defp raised(node, m, f, a) do
    rpc(node, m, f, a)
  catch
    :error, {:exception, exception, _stack} -> exception
  end

  defp replica(node), do: rpc(node, Process, :whereis, [ShardedStore.Replica])

  @tag timeout: 300_000
  test "put/3 and get/1 say what happened: stored, stale, conflict (exact values), not found, " <>
         "not acknowledged, no quorum; bad keys and versions are the caller's ArgumentError" do
    {:ok, times} = Agent.start_link(fn -> [] end)

    {peers, nodes} =
      Enum.reduce(1..3, {[], []}, fn _, {peers, nodes} ->
        {peer, node} = join(nodes, 3)
        {peers ++ [peer], nodes ++ [node]}
      end)

    settle([nodes], :start, times)
    [a, b, _] = nodes
    put = &rpc(a, ShardedStore, :put, [&1, &2, &3])
    get = &rpc(b, ShardedStore, :get, [&1])

    assert get.("k") == :not_found
    # Checked before any cluster is read: this node runs none.
    assert_raise ArgumentError, ~r/version must be an integer/, fn ->
      ShardedStore.put("k", 1.5, :v)
    end

    assert_raise ArgumentError, ~r/invalid key: term nested deeper than 256/, fn ->
      ShardedStore.put(deep_key(), 1, :v)
    end

    assert_raise ArgumentError, ~r/invalid key/, fn -> ShardedStore.get(deep_key()) end

    assert_raise ArgumentError, ~r/invalid key/, fn ->
      ShardedStore.get_many(["k", deep_key()])
    end

    assert put.("k", 5, :first) == :ok
    assert put.("k", 5, :first) == :ok
    assert put.("k", 4, :older) == {:error, {:stale, 5}}
    # One version, two values: the larger by term order wins on every replica.
    assert put.("k", 5, :second) == :ok
    assert put.("k", 5, :first) == {:error, {:conflict, :second}}
    assert get.("k") == {:ok, {5, :second}}
    assert put.("k", 6, :first) == :ok
    assert get.("k") == {:ok, {6, :first}}

    # Values are compared exactly: 1 and 1.0 are two values (the integer wins the
    # tie-break), and so are {1} and {1.0} nested anywhere.
    assert put.("int first", 1, 1) == :ok
    assert put.("int first", 1, 1.0) === {:error, {:conflict, 1}}
    assert get.("int first") === {:ok, {1, 1}}
    assert put.("float first", 1, x: 1.0) == :ok
    assert put.("float first", 1, x: 1) == :ok
    assert put.("float first", 1, x: 1.0) === {:error, {:conflict, [x: 1]}}
    assert get.("float first") === {:ok, {1, [x: 1]}}

    # Keys follow the library's rules: an improper list is a key like any other.
    assert put.([1 | 2], 1, :improper) == :ok
    assert get.([1 | 2]) == {:ok, {1, :improper}}

    # An owner that does not answer: not acknowledged (put/3 waits 5 s for it).
    [owner | _] = rpc(a, HRW.Cluster, :owners, [ShardedStore.cluster(), "k", 2])
    :ok = rpc(owner, :sys, :suspend, [ShardedStore.Replica])
    assert {:error, {:not_acknowledged, replies}} = put.("k", 7, :late)
    assert {:error, :timeout} in replies
    :ok = rpc(owner, :sys, :resume, [ShardedStore.Replica])

    # A departure (the case where a read computes owners of departed members).
    :peer.stop(Enum.at(peers, 2))
    settle([[a, b]], :stop, times)
    assert get.("k") in [{:ok, {6, :first}}, {:ok, {7, :late}}]
    replicas = Enum.map([a, b], &replica/1)

    # Bad keys from every node are the caller's ArgumentError; requests sent to
    # a replica directly, of any shape, are answered and change nothing.
    for node <- [a, b] do
      assert %ArgumentError{} = raised(node, ShardedStore, :get, [deep_key()])
      assert %ArgumentError{} = raised(node, ShardedStore, :put, [deep_key(), 1, :v])
      fingerprint = rpc(node, HRW.Cluster, :fingerprint, [ShardedStore.cluster()])
      replica = {ShardedStore.Replica, node}

      for {request, reply} <- [
            {{:read, deep_key()}, {:error, :bad_key}},
            {{:write, deep_key(), 1, :v, fingerprint}, {:error, :bad_key}},
            {{:write, "k", 1.0, :v, fingerprint}, {:error, :bad_request}},
            {{:write, "k", :high, :v, fingerprint}, {:error, :bad_request}},
            {{:leave, :soon}, {:error, :bad_request}},
            {:nonsense, {:error, :bad_request}}
          ] do
        assert GenServer.call(replica, request) == reply
      end

      GenServer.cast(replica, {:handoff, self(), make_ref(), %{deep_key() => {99, :v}}})
      GenServer.cast(replica, {:handoff, self(), make_ref(), %{"k" => {:x, :y}, "j" => :v}})
      GenServer.cast(replica, {:handoff, :nobody, make_ref(), %{"k" => {99, :v}}})
      GenServer.cast(replica, {:handoff, self(), make_ref(), [{"k", {99, :v}}]})
      GenServer.cast(replica, :nonsense)
    end

    assert Enum.map([a, b], &replica/1) == replicas
    assert get.("k") in [{:ok, {6, :first}}, {:ok, {7, :late}}]
    assert get.("int first") === {:ok, {1, 1}}

    # Two of three is a majority of 3: it still answers (above). One of three is not.
    :peer.stop(Enum.at(peers, 1))
    no_quorum = fn -> not rpc(a, HRW.Cluster, :snapshot, [ShardedStore.cluster()]).quorum? end
    until(no_quorum, fn -> "no quorum on a" end)
    assert rpc(a, ShardedStore, :get, ["k"]) == {:error, :no_quorum}
    assert rpc(a, ShardedStore, :get, ["never written"]) == {:error, :no_quorum}
    assert put.("k", 8, :third) == {:error, :no_quorum}
    :peer.stop(hd(peers))
  end

  @tag timeout: 300_000
  test "put/3 with a single member (quorum of 1) answers :too_few_replicas; get/1 still answers" do
    {peer, node} = join([], 1)
    {:ok, times} = Agent.start_link(fn -> [] end)
    settle([[node]], :start, times)
    assert rpc(node, ShardedStore, :put, ["k", 1, :v]) == {:error, :too_few_replicas}
    assert rpc(node, ShardedStore, :get, ["k"]) == :not_found
    :peer.stop(peer)
  end

  @tag timeout: 300_000
  test "get/1 and put/3 refuse a key whose two owners both left, and answer the others" do
    {:ok, times} = Agent.start_link(fn -> [] end)

    # A majority of 3 is 2: the two nodes left after two stops keep the quorum.
    # `forget:` far above any settle time, so the refusal is still in force.
    {peers, nodes} =
      Enum.reduce(1..4, {%{}, []}, fn _, {peers, nodes} ->
        {peer, node} = join(nodes, 3, forget: 600_000)
        {Map.put(peers, node, peer), nodes ++ [node]}
      end)

    settle([nodes], :start, times)

    owners = fn key ->
      Enum.sort(rpc(hd(nodes), HRW.Cluster, :owners, [ShardedStore.cluster(), key, 2]))
    end

    [gone_a, gone_b] = victims = nodes |> Enum.take(2) |> Enum.sort()
    keys = for i <- 1..200, do: "k#{i}"
    both = Enum.find(keys, &(owners.(&1) == victims))
    one = Enum.find(keys, &(length(owners.(&1) -- victims) == 1))
    neither = Enum.find(keys, &(owners.(&1) -- victims == owners.(&1)))
    assert both && one && neither

    for key <- [both, one, neither], do: :ok = rpc(gone_a, ShardedStore, :put, [key, 1, key])
    [c, d] = survivors = nodes -- victims
    :peer.stop(peers[gone_a])
    :peer.stop(peers[gone_b])
    settle([survivors], :stop, times)

    for node <- [c, d] do
      assert rpc(node, ShardedStore, :get, [both]) == {:error, :unavailable}
      assert rpc(node, ShardedStore, :get, [one]) == {:ok, {1, one}}
      assert rpc(node, ShardedStore, :get, [neither]) == {:ok, {1, neither}}
    end

    # The survivors hold nothing of `both`: a write below the version its
    # departed owners hold (or any other) is refused, not acknowledged.
    for node <- [c, d], version <- [0, 1, 2] do
      assert rpc(node, ShardedStore, :put, [both, version, :after]) == {:error, :unavailable}
    end

    for node <- [c, d] do
      assert rpc(node, ShardedStore, :put, [one, 2, :after]) == :ok
      assert rpc(node, ShardedStore, :put, [neither, 2, :after]) == :ok
    end

    assert rpc(c, ShardedStore, :get, [both]) == {:error, :unavailable}
    assert rpc(d, ShardedStore, :get, [one]) == {:ok, {2, :after}}

    Enum.each(survivors, &:peer.stop(peers[&1]))
  end
end
