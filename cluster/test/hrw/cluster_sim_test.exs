defmodule HRW.ClusterSimTest do
  # HRW.Cluster.Machine driven by HRW.ClusterSim over virtual time: seeded
  # schedules, and named ones for the orders of events written down by hand (a
  # departure behind a pending evaluation, a polled :pg leave, a scope restart,
  # ...). A failure names
  # its seed and a shortened schedule; HRW_SIM_SEED=<seed> replays one seed,
  # HRW_SIM_SCHEDULES=<n> runs more.
  use ExUnit.Case, async: true

  alias HRW.ClusterSim

  @base %{
    nodes: [:n1, :n2, :n3],
    lease: 300,
    quorum: 2,
    debounce: 100,
    poll: 50,
    loss: 0.0,
    dup: 0.0,
    delay: 5,
    rates: %{n1: 1010, n2: 990, n3: 1000},
    seed: 0
  }

  defp named(source, actions), do: Map.merge(@base, %{source: source, actions: actions})

  defp assert_holds(schedule) do
    assert ClusterSim.run(schedule) == :ok, "schedule #{inspect(schedule, limit: :infinity)}"
  end

  # A departure while an evaluation is queued (the debounce's timer
  # message waiting behind a busy server) or running (its read taken after the
  # departure, its held members before).
  test "a departure while an evaluation is queued or running keeps the member's keys for its hold" do
    for source <- [:nodes, :pg_monitored],
        busy <- [0, 100, 200, 400],
        at <- [1_000, 1_040, 1_090] do
      schedule =
        named(source, [
          # n1 loses n2 for 10 ms: a join to debounce.
          {900, {:cut, :n2, :n1, 10}},
          {950, {:freeze, :n1, busy}},
          {at, {:partition, [:n3], 2_000}}
        ])

      assert_holds(Map.put(schedule, :detect, 5))
    end
  end

  # A polled :pg source waits as a monitored one does.
  test "a polled :pg source holds a leaving, cut or frozen member for its hold" do
    for source <- [:pg_polled, :pg_monitored],
        action <- [{:leave, :n3, 1_500}, {:partition, [:n3], 1_500}, {:freeze, :n3, 600}] do
      assert_holds(named(source, [{1_000, action}]))
    end
  end

  # A :pg scope that restarts is followed again: n3 leaves (n1 sees
  # it), n1's scope restarts, n3 joins again, which only a new monitor shows.
  test "a restarted :pg scope is followed again, with and without a lease" do
    for source <- [:pg_monitored, :pg_polled],
        lease <- [nil, 300],
        at <- [950, 1_000, 1_300],
        ms <- [50, 400] do
      schedule = named(source, [{900, {:leave, :n3, 1_500}}, {at, {:scope_restart, :n1, ms}}])
      assert_holds(%{schedule | lease: lease})
    end
  end

  test "members leaving, freezing and restarting faster and slower than the lease" do
    for source <- [:nodes, :pg_monitored, :pg_polled], ms <- [100, 250, 900] do
      assert_holds(
        named(source, [
          {800, {:kill, :n3, ms}},
          {900, {:freeze, :n2, ms}},
          {1_500, {:server_restart, :n1}}
        ])
      )
    end
  end

  @tag timeout: :infinity
  test "seeded schedules keep every promise" do
    seeds =
      case System.get_env("HRW_SIM_SEED") do
        nil -> 1..String.to_integer(System.get_env("HRW_SIM_SCHEDULES", "1000"))
        seed -> [String.to_integer(seed)]
      end

    for seed <- seeds do
      schedule = ClusterSim.schedule(seed)

      case ClusterSim.run(schedule) do
        :ok ->
          :ok

        {:error, _} ->
          {short, failure} = ClusterSim.shrink(schedule)

          flunk(
            "seed #{seed} (replay: HRW_SIM_SEED=#{seed}): #{inspect(failure)}\n" <>
              "shortened schedule: #{inspect(short, limit: :infinity)}"
          )
      end
    end
  end
end
