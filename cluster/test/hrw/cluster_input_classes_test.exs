defmodule HRW.ClusterInputClassesTest do
  # The inputs of HRW.Cluster, as classes: names (every entry point), option values
  # (every option, forged structs included), a :pg scope that is not one, and a
  # name registered by a process that is not an HRW.Cluster server.
  use ExUnit.Case, async: false

  import HRW.TestValues, only: [untyped: 1]

  # Made at run time: a module attribute would be compiled into the module.
  defp huge_binary, do: :binary.copy("n", 100_000_000)

  # Every function of HRW.Cluster that takes a name, called with `name`.
  defp entry_points(name) do
    [
      owner2: fn -> HRW.Cluster.owner(name, "k") end,
      owner3: fn -> HRW.Cluster.owner(name, "k", back: 0) end,
      owners3: fn -> HRW.Cluster.owners(name, "k", 2) end,
      owners4: fn -> HRW.Cluster.owners(name, "k", 2, back: 0) end,
      stable_owners: fn -> HRW.Cluster.stable_owners(name, "k", 2) end,
      generation: fn -> HRW.Cluster.generation(name) end,
      snapshot: fn -> HRW.Cluster.snapshot(name) end,
      fingerprint: fn -> HRW.Cluster.fingerprint(name) end,
      await_agreement: fn -> HRW.Cluster.await_agreement(name, 10) end,
      members1: fn -> HRW.Cluster.members(name) end,
      members2: fn -> HRW.Cluster.members(name, back: 0) end,
      structure1: fn -> HRW.Cluster.structure(name) end,
      structure2: fn -> HRW.Cluster.structure(name, back: 0) end,
      put_overrides: fn -> HRW.Cluster.put_overrides(name, %{}) end,
      subscribe1: fn -> HRW.Cluster.subscribe(name) end,
      subscribe2: fn -> HRW.Cluster.subscribe(name, :snapshots) end,
      unsubscribe: fn -> HRW.Cluster.unsubscribe(name) end
    ]
  end

  test "a name that is not an atom is refused by every entry point, before any lookup" do
    for name <- [
          huge_binary(),
          "cluster",
          1,
          1.0,
          {:cluster},
          [:cluster],
          %{},
          self(),
          make_ref()
        ],
        {entry, call} <- entry_points(untyped(name)) do
      error = assert_raise ArgumentError, call
      assert error.message =~ ~r/^an HRW.Cluster name is an atom, got: /, "#{entry}"
      assert byte_size(error.message) < 300
    end

    assert HRW.Cluster.remote_fingerprint(untyped(huge_binary())) == :not_running
  end

  test "a name registered by a process that is not its server is refused, unasked" do
    impostor = spawn(fn -> receive do: (:never -> :ok) end)
    server = HRW.Cluster.Options.server_name(:hrw_impostor)
    true = Process.register(impostor, server)

    for {entry, call} <- entry_points(:hrw_impostor),
        entry in [:put_overrides, :subscribe1, :subscribe2, :unsubscribe] do
      assert_raise ArgumentError,
                   "the process registered as :\"HRW.Cluster:hrw_impostor\" is not the server " <>
                     "of HRW.Cluster :hrw_impostor",
                   call
    end

    # Nothing was sent to it.
    assert Process.info(impostor, :message_queue_len) == {:message_queue_len, 0}

    # The same with the entry of a server that was killed in place.
    Process.unregister(server)
    {:ok, pid} = HRW.Cluster.start(name: :hrw_impostor)
    ref = Process.monitor(pid)
    Process.exit(pid, :kill)
    assert_receive {:DOWN, ^ref, :process, ^pid, :killed}
    true = Process.register(impostor, server)

    assert_raise ArgumentError, ~r/is not the server/, fn ->
      HRW.Cluster.subscribe(:hrw_impostor)
    end

    assert Process.info(impostor, :message_queue_len) == {:message_queue_len, 0}

    # A server started now takes the entry over and answers again.
    Process.unregister(server)
    {:ok, pid} = HRW.Cluster.start(name: :hrw_impostor)
    assert HRW.Cluster.subscribe(:hrw_impostor) == :ok
    :ok = GenServer.stop(pid)
    Process.exit(impostor, :kill)
  end

  test "a :pg source whose scope is not a running :pg scope fails the start " <>
         "without a call into the process registered under it" do
    {:ok, agent} = Agent.start(fn -> :untouched end, name: :hrw_agent_scope)

    assert HRW.Cluster.start(name: :hrw_pg_agent, source: {:pg, :hrw_agent_scope, :g}) ==
             {:error, {:not_a_pg_scope, :hrw_agent_scope}}

    assert Process.alive?(agent)
    assert Process.info(agent, :message_queue_len) == {:message_queue_len, 0}
    assert Agent.get(agent, & &1) == :untouched

    for opts <- [[], [poll_interval: 10]] do
      # The init process, which :pg.monitor/2 would wait on for good.
      assert HRW.Cluster.start([name: :hrw_pg_init, source: {:pg, :init, :g}] ++ opts) ==
               {:error, {:not_a_pg_scope, :init}}
    end

    assert HRW.Cluster.start(name: :hrw_pg_none, source: {:pg, :hrw_no_such_scope, :g}) ==
             {:error, {:pg_scope_not_started, :hrw_no_such_scope}}

    Agent.stop(agent)
  end

  # Values that only look like others: structs forged as maps, improper and deep
  # lists, functions of other arities, huge numbers, pids and references.
  defp forged do
    [
      %{__struct__: Regex},
      %{__struct__: Regex, source: "a"},
      %{__struct__: Regex, source: "a", opts: :bogus, re_pattern: nil},
      %{__struct__: Regex, source: "a", opts: [:no_such_option], re_pattern: nil},
      %{__struct__: Regex, source: "(", opts: [], re_pattern: nil},
      %{__struct__: Regex, source: 1, opts: [], re_pattern: nil},
      %{__struct__: Regex, source: <<255>>, opts: [:unicode], re_pattern: nil},
      %{__struct__: MapSet, map: :bogus},
      %{__struct__: HRW.Weighted},
      [~r/a/ | :tail],
      [~r/a/, %{__struct__: Regex, source: "a"}],
      Enum.reduce(1..10_000, :leaf, &[&1, &2]),
      {:pg, :scope},
      {:pg, "scope", :group},
      {:majority, 0},
      {:majority, 2 ** 70},
      fn -> :arity_0 end,
      fn _a, _b -> :arity_2 end,
      2 ** 70,
      -1,
      self(),
      make_ref(),
      %{"k" => [:a | :b]},
      %{"k" => []}
    ]
  end

  test "every option given a forged value raises ArgumentError, never anything else" do
    for key <- [
          :structure,
          :source,
          :debounce,
          :depth,
          :allow,
          :deny,
          :weight_fn,
          :cluster_size,
          :poll_interval,
          :callback_timeout,
          :overrides,
          :quorum,
          :lease
        ],
        value <- forged() do
      opts = [name: :hrw_forged, structure: :skeleton] |> Keyword.put(key, untyped(value))

      for start <- [&HRW.Cluster.child_spec/1, &HRW.Cluster.start/1] do
        result =
          try do
            start.(opts)
          rescue
            error in ArgumentError -> {:refused, error.message}
          end

        case result do
          {:refused, message} ->
            assert byte_size(message) < 500, message

          {:ok, pid} ->
            GenServer.stop(pid)
            flunk("#{key}: #{inspect(value, limit: 5)} was taken")

          %{id: _} ->
            flunk("#{key}: #{inspect(value, limit: 5)} was taken")

          other ->
            flunk("#{key}: #{inspect(value, limit: 5)}: #{inspect(other, limit: 5)}")
        end
      end
    end
  end

  test "forged lookup options and arguments raise ArgumentError on every entry point" do
    {:ok, pid} = HRW.Cluster.start(name: :hrw_forged_lookups)
    name = :hrw_forged_lookups

    for opts <- [[{:back, 0} | :x], [back: %{}], [back: -1], :x, [{:back}], [back: 2 ** 70]],
        call <- [
          fn -> HRW.Cluster.owner(name, "k", untyped(opts)) end,
          fn -> HRW.Cluster.owners(name, "k", 1, untyped(opts)) end,
          fn -> HRW.Cluster.members(name, untyped(opts)) end,
          fn -> HRW.Cluster.structure(name, untyped(opts)) end
        ] do
      assert_raise ArgumentError, call
    end

    # (A count above the members is all of them, however large.)
    for bad <- [-1, :x, 1.0, [1]] do
      assert_raise ArgumentError, fn -> HRW.Cluster.owners(name, "k", untyped(bad)) end
      assert_raise ArgumentError, fn -> HRW.Cluster.stable_owners(name, "k", untyped(bad)) end
    end

    for bad <- [-1, 2 ** 70, :x, 1.0, :infinity] do
      assert_raise ArgumentError, fn -> HRW.Cluster.await_agreement(name, untyped(bad)) end
    end

    for bad <- [:x, "snapshots", 1] do
      assert_raise ArgumentError, fn -> HRW.Cluster.subscribe(name, untyped(bad)) end
    end

    for bad <- [:x, %{1 => []}, [1], %{"k" => [:a | :b]}] do
      assert_raise ArgumentError, fn -> HRW.Cluster.put_overrides(name, untyped(bad)) end
    end

    :ok = GenServer.stop(pid)
  end

  test "forged regexes in :allow and :deny name the option" do
    for key <- [:allow, :deny], value <- Enum.take(forged(), 7) do
      assert_raise ArgumentError,
                   ~r/^HRW.Cluster #{inspect(key)} must be a function of arity 1 or a list of regexes/,
                   fn ->
                     HRW.Cluster.child_spec([{:name, :hrw_forged}, {key, untyped([value])}])
                   end
    end
  end
end
