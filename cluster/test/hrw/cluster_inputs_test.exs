defmodule HRW.ClusterInputsTest do
  # One mistake, one message: HRW.Cluster's entry points refuse a bad target, option
  # list, count, key list or key with the words the hashing package's entry points
  # use for the same mistake (each expected message is taken from an `HRW` call).
  # Sets global trace patterns.
  use ExUnit.Case, async: false

  alias HRW.Cluster.Fingerprint

  @nodes ["n1", "n2", "n3"]

  defp message(fun) do
    fun.()
    flunk("expected ArgumentError")
  rescue
    e in ArgumentError -> e.message
  end

  defp assert_one_message(calls, value, expected) do
    wrong =
      for {label, call} <- calls,
          said = message(fn -> call.(value) end),
          said != expected,
          do: {label, said}

    assert wrong == [],
           "for #{HRW.Cluster.Describe.value(value)}, expected #{inspect(expected)} everywhere"
  end

  test "a wrong target gets HRW's message" do
    ring = HRW.Ring.new(@nodes)
    forged = ring |> Map.put(:resource, make_ref()) |> Map.delete(:fingerprint)

    calls = [
      {"HRW.Cluster.replica_moves/4 old", &HRW.Cluster.replica_moves(["k"], &1, ring)},
      {"HRW.Cluster.replica_moves/4 new", &HRW.Cluster.replica_moves(["k"], ring, &1, 2)},
      {"HRW.Cluster.replica_moves/4 without keys", &HRW.Cluster.replica_moves([], ring, &1)}
    ]

    for target <- [:x, %{}, "nodes", 42, %URI{}, {:a, :b}, forged, [], [{"a", 1} | :tail]] do
      assert_one_message(calls, target, message(fn -> HRW.owner("k", target) end))
    end
  end

  test "a wrong option list gets one message, naming its caller, from every entry point" do
    cluster = :hrw_inputs_options
    start_supervised!({HRW.Cluster, name: cluster})

    option_calls = [
      {"HRW.Cluster", &HRW.Cluster.child_spec/1, [name: :x, depth: 1, depth: 1]},
      {"HRW.Cluster", &HRW.Cluster.start_link/1, [name: :x, depth: 1, depth: 1]},
      {"HRW.Cluster", &HRW.Cluster.start/1, [name: :x, depth: 1, depth: 1]},
      {"HRW.Cluster lookup", &HRW.Cluster.owner(cluster, "k", &1), [back: 0, back: 0]},
      {"HRW.Cluster lookup", &HRW.Cluster.owners(cluster, "k", 2, &1), [back: 0, back: 0]},
      {"HRW.Cluster lookup", &HRW.Cluster.members(cluster, &1), [back: 0, back: 0]},
      {"HRW.Cluster lookup", &HRW.Cluster.structure(cluster, &1), [back: 0, back: 0]},
      {"HRW.Cluster.Fingerprint.of/2", &HRW.Cluster.Fingerprint.of(@nodes, &1),
       [weighted: false, weighted: false]}
    ]

    for {caller, call, twice} <- option_calls do
      calls = [{caller, call}]

      for opts <- [:x, [:x], %{}, [{"scorer", %HRW{}}], [{:a, 1} | :tail]] do
        # HRW.owner/3's words for the same list, with this caller's name.
        expected =
          message(fn -> HRW.owner("k", @nodes, opts) end)
          |> String.replace_prefix("HRW.owner/3", caller)

        assert_one_message(calls, opts, expected)
      end

      assert_one_message(calls, [bogus: 1], "#{caller} got unknown options: [:bogus]")

      [{key, _} | _] = Enum.reject(twice, &match?({:name, _}, &1))

      assert_one_message(
        calls,
        twice,
        "#{caller} got duplicated options: [#{inspect(key)}] (give each option once)"
      )
    end
  end

  test "a wrong count gets HRW's message from every function that takes one" do
    cluster = :hrw_inputs_count
    start_supervised!({HRW.Cluster, name: cluster, depth: 2})
    ring = HRW.Ring.new(@nodes)

    calls = [
      {"HRW.Cluster.owners/4", &HRW.Cluster.owners(cluster, "k", &1)},
      {"HRW.Cluster.owners/4 back", &HRW.Cluster.owners(cluster, "k", &1, back: 1)},
      {"HRW.Cluster.stable_owners/3", &HRW.Cluster.stable_owners(cluster, "k", &1)},
      {"HRW.Cluster.replica_moves/4", &HRW.Cluster.replica_moves(["k"], ring, nil, &1)},
      {"HRW.Cluster.replica_moves/4 without keys", &HRW.Cluster.replica_moves([], ring, ring, &1)}
    ]

    for count <- [-1, 1.0, :all, nil, "2", [2]] do
      assert_one_message(calls, count, message(fn -> HRW.owners("k", @nodes, count) end))
    end

    # The same words for the one other non-negative integer, `back:`.
    for back <- [-1, 1.0, :all] do
      assert_one_message(
        [{"HRW.Cluster.owner/3", &HRW.Cluster.owner(cluster, "k", back: &1)}],
        back,
        "HRW.Cluster lookup :back must be a non-negative integer, got: #{HRW.Cluster.Describe.value(back)}"
      )
    end
  end

  test "a wrong key list gets HRW's message" do
    ring = HRW.Ring.new(@nodes)
    calls = [{"HRW.Cluster.replica_moves/4", &HRW.Cluster.replica_moves(&1, ring, nil)}]

    for keys <- [:keys, "keys", %{}, {"a", "b"}, ["a", "b" | :tail]] do
      assert_one_message(calls, keys, message(fn -> HRW.owner_batch(keys, ring) end))
    end
  end

  test ":cluster_size has HRW.build/2's range and words" do
    for bad <- [0, 4097, :big, 2 ** 64] do
      expected =
        message(fn -> HRW.build(["a"], cluster_size: bad) end)
        |> String.replace_prefix("HRW.build/2", "HRW.Cluster")

      assert message(fn -> HRW.Cluster.child_spec(name: :x, cluster_size: bad) end) == expected
    end

    assert %{id: {HRW.Cluster, :x}} = HRW.Cluster.child_spec(name: :x, cluster_size: 4096)
  end

  test "checking a cluster's options builds no structure" do
    # The hashing package's builders (HRW.build/2 calls HRW.Skeleton.build/2).
    patterns = [{HRW.Skeleton, :build, 2}, {HRW.Ring, :new, 2}]

    for {module, _, _} = mfa <- patterns do
      Code.ensure_loaded!(module)
      assert :erlang.trace_pattern(mfa, true, [:global]) == 1
    end

    try do
      # A build is traced: the tracing works before anything is refuted.
      assert [{HRW.Skeleton, :build, _} | _] = traced_calls(fn -> HRW.build(["a"]) end)

      assert traced_calls(fn ->
               for opts <- [[name: :x, cluster_size: 8], [name: :x, structure: :ring], [name: :x]],
                   do: HRW.Cluster.child_spec(opts)
             end) == []
    after
      for mfa <- patterns, do: :erlang.trace_pattern(mfa, false, [:global])
    end
  end

  # The traced calls `fun` makes, run in a process traced by this one.
  defp traced_calls(fun) do
    parent = self()

    pid =
      spawn_link(fn ->
        receive do: (:go -> :ok)
        fun.()
        send(parent, {:done, self()})
      end)

    :erlang.trace(pid, true, [:call])
    send(pid, :go)
    assert_receive {:done, ^pid}, 60_000
    # Every trace message of the process is in this mailbox after this barrier.
    ref = :erlang.trace_delivered(pid)
    assert_receive {:trace_delivered, ^pid, ^ref}, 60_000
    collect(pid, [])
  end

  defp collect(pid, acc) do
    receive do
      {:trace, ^pid, :call, mfa} -> collect(pid, [mfa | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  test "a cluster's :structure is one of two" do
    assert message(fn -> HRW.Cluster.child_spec(name: :x, structure: :tree) end) ==
             "HRW.Cluster :structure must be :skeleton or :ring, got: :tree"
  end

  test "HRW.Cluster.replica_moves/4 takes a proper list of keys and lists the keys that move" do
    ring = HRW.Ring.new(@nodes)
    bigger = HRW.Ring.new(["n4" | @nodes])

    for keys <- [[1 | 2], ["a", "b" | :tail], :keys, "keys", %{}] do
      error = assert_raise ArgumentError, fn -> HRW.Cluster.replica_moves(keys, ring, bigger) end
      assert Exception.message(error) =~ "keys must be a"
    end

    # A proper list is taken, and answered with exactly the keys whose owner moved.
    keys = Enum.map(1..40, &"key-#{&1}")

    moved =
      for key <- keys,
          [from] = HRW.owners(key, ring, 1),
          [to] = HRW.owners(key, bigger, 1),
          from != to,
          do: {key, [from], [to]}

    assert moved != []
    assert HRW.Cluster.replica_moves(keys, ring, bigger) == moved
  end

  test "HRW.Cluster.Fingerprint refuses what it cannot fingerprint, by name" do
    for {call, said} <- [
          {fn -> Fingerprint.of([:a | :b]) end, "a proper list of members"},
          {fn -> Fingerprint.of([:a], untyped(:weighted)) end, "a keyword list of options"},
          {fn -> Fingerprint.of([:a], bogus: 1) end, "got unknown options: [:bogus]"},
          {fn -> Fingerprint.of([:a], weighted: :yes) end, ":weighted must be true or false"},
          {fn -> Fingerprint.of([{:a, Integer.pow(2, 1100)}]) end, "0 < weight <= 2^53"},
          {fn -> Fingerprint.of(:a) end, "a list of members"},
          {fn -> Fingerprint.hex(-1) end, "an integer in 0..2^64-1"},
          {fn -> Fingerprint.hex(:a) end, "an integer in 0..2^64-1"},
          {fn -> Fingerprint.hex(Integer.pow(2, 64)) end, "an integer in 0..2^64-1"},
          {fn -> Fingerprint.hex(Integer.pow(2, 1_000_000)) end, "an integer in 0..2^64-1"}
        ] do
      error = assert_raise ArgumentError, call
      assert Exception.message(error) =~ said
    end

    assert Fingerprint.hex(0) == "0000000000000000"
    assert Fingerprint.hex(0xFFFF_FFFF_FFFF_FFFF) == "ffffffffffffffff"
  end

  # -- keys: the hashing package's rule -------------------------------------------

  # A term nested `n` levels deep: the innermost atom is at depth n.
  defp nested(n), do: Enum.reduce(1..n, :leaf, fn _, acc -> [acc] end)
  defp nested_tuple(n), do: Enum.reduce(1..n, :leaf, fn i, acc -> {i, acc} end)

  # Keys no native path can hash, and keys right at the limit.
  defp too_deep, do: [nested(257), nested(300), nested_tuple(257), %{deep: nested(256)}]
  defp at_limit, do: [nested(256), nested_tuple(256), %{deep: nested(255)}]
  defp ordinary, do: ["user:1", {:user, 42}, 1.0, nil, [], %{a: 1}, <<1::3>>]

  defp hashable_overrides do
    %{
      "hot" => "node-3",
      "pair" => ["node-7", "node-2"],
      1 => :stranger,
      nested(256) => "pinned-at-limit"
    }
  end

  defp keys, do: ordinary() ++ Map.keys(hashable_overrides()) ++ at_limit() ++ too_deep()

  defp attempt(fun) do
    {:ok, fun.()}
  rescue
    e -> {:error, e.__struct__}
  end

  defp map_ok({:ok, value}, fun), do: {:ok, fun.(value)}
  defp map_ok(error, _fun), do: error

  test "HRW.Cluster lookups follow the same rule, and refuse such overrides" do
    name = :hrw_key_rules_cluster
    deep = nested(300)

    for opts <- [[overrides: %{deep => "p"}], [structure: :ring, overrides: %{deep => "p"}]] do
      error = assert_raise ArgumentError, fn -> HRW.Cluster.start_link([name: name] ++ opts) end
      assert error.message =~ "HRW.Cluster option :overrides: key "
    end

    pid = start_supervised!({HRW.Cluster, name: name, overrides: hashable_overrides()})
    structure = HRW.Cluster.structure(name)

    for key <- keys() do
      expected = attempt(fn -> HRW.owner(key, structure) end)
      assert attempt(fn -> HRW.Cluster.owner(name, key) end) == expected
      assert attempt(fn -> HRW.Cluster.owners(name, key, 2) end) |> map_ok(&hd/1) == expected

      assert attempt(fn -> HRW.Cluster.stable_owners(name, key, 2) end) |> map_ok(&hd/1) ==
               expected

      if key in too_deep(), do: assert(expected == {:error, ArgumentError})
    end

    error = assert_raise ArgumentError, fn -> HRW.Cluster.put_overrides(name, %{deep => "p"}) end

    assert error.message =~ "HRW.Cluster.put_overrides/2 option :overrides: key "
    assert HRW.Cluster.structure(name) == structure
    assert Process.alive?(pid)
  end

  # Hides a value's type from Elixir 1.20's type checker, which would otherwise
  # reject, at compile time, a call the test makes on purpose with a bad argument.
  defp untyped(value), do: Process.get(:hrw_inputs_test_unset, value)
end
