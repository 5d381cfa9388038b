# One side of the A/B of HRW.Cluster.owner/2 (bench/cluster_owner_ab.sh runs it in
# two trees, interleaved): 1,000 binary keys looked up 1,000 times per round;
# prints one line of ns per lookup per round. Without AB_LEASE the cluster is this
# node alone; with AB_LEASE=ms this node is distributed and a :peer on 127.0.0.1
# runs the cluster too, both with quorum 2 and that lease, so every lookup reads a
# quorum the lease holds (the lookups that found no owner are counted on stderr).
lease = System.get_env("AB_LEASE")
opts = if lease, do: [name: :ab, quorum: 2, lease: String.to_integer(lease)], else: [name: :ab]

if lease do
  {:ok, _} = Node.start(:"ab_#{System.pid()}@127.0.0.1", :longnames)
  args = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

  {:ok, _peer, peer} =
    :peer.start(%{
      name: :"ab_peer_#{System.pid()}",
      host: ~c"127.0.0.1",
      longnames: true,
      args: args
    })

  {:ok, _} = :erpc.call(peer, Application, :ensure_all_started, [:hrw])
  {:ok, _} = :erpc.call(peer, HRW.Cluster, :start, [opts])
end

{:ok, _} = HRW.Cluster.start_link(opts)

wait = fn wait ->
  unless HRW.Cluster.snapshot(:ab).quorum?, do: Process.sleep(10) && wait.(wait)
end

wait.(wait)
keys = Enum.map(1..1_000, &"user:#{&1}")
rounds = String.to_integer(System.get_env("AB_ROUNDS", "7"))

loop = fn ->
  for _ <- 1..1_000, key <- keys, reduce: 0 do
    misses -> if HRW.Cluster.owner(:ab, key) == nil, do: misses + 1, else: misses
  end
end

_ = loop.()

{times, misses} =
  Enum.map_reduce(1..rounds, 0, fn _, misses ->
    {us, more} = :timer.tc(loop)
    {us * 1000 / 1_000_000, misses + more}
  end)

if misses > 0, do: IO.puts(:stderr, "#{misses} lookups found no owner")
IO.puts(Enum.map_join(times, " ", &:erlang.float_to_binary(&1, decimals: 1)))
