# One side of the A/B of HRW.Cluster.owner/2 (bench/cluster_owner_ab.sh runs it in
# two trees, interleaved): a cluster of this node alone, 1,000 binary keys looked
# up 1,000 times per round; prints one line of ns per lookup per round.
{:ok, _} = HRW.Cluster.start_link(name: :ab)
keys = Enum.map(1..1_000, &"user:#{&1}")
rounds = String.to_integer(System.get_env("AB_ROUNDS", "7"))

loop = fn ->
  for _ <- 1..1_000, key <- keys, do: HRW.Cluster.owner(:ab, key)
  :ok
end

loop.()

times =
  for _ <- 1..rounds do
    {us, :ok} = :timer.tc(loop)
    us * 1000 / 1_000_000
  end

IO.puts(Enum.map_join(times, " ", &:erlang.float_to_binary(&1, decimals: 1)))
