defmodule HRW.InputsTest do
  # Inputs outside the option checker: each gets an ArgumentError naming the option
  # or argument and what it accepts, and one mistake gets one message whatever the
  # entry point.
  use ExUnit.Case, async: false

  @nodes ["n1", "n2", "n3"]

  # -- one mistake, one message, from every entry point -------------------------------
  #
  # Each table below lists every public entry point that can make a mistake of one
  # kind (a bad target, node list, option list, count, key list or struct), and
  # each mistake must get the one message `HRW.Options` words for it, the caller's
  # name included where the message names one.

  @phash2 %HRW{hash_fn: &:erlang.phash2/1}

  # The messages that differ from `expected` for each call, as {label, message}.
  defp mismatches(calls, value, expected) do
    for {label, call} <- calls,
        message = assert_raise(ArgumentError, fn -> call.(value) end) |> Exception.message(),
        message != expected,
        do: {label, message}
  end

  defp assert_one_message(calls, value, expected) do
    assert mismatches(calls, value, expected) == [],
           "for #{HRW.Brief.brief(value)}, expected #{inspect(expected)} everywhere"
  end

  # Every function that takes a lookup target (a node list, a ring or a skeleton),
  # with each kind of scorer it takes.
  defp target_calls do
    ring = HRW.Ring.new(@nodes)

    [
      {"HRW.owner/3", &HRW.owner("k", &1)},
      {"HRW.owner/3 with %HRW{}", &HRW.owner("k", &1, scorer: %HRW{})},
      {"HRW.owner/3 weighted", &HRW.owner("k", &1, scorer: %HRW.Weighted{})},
      {"HRW.owner/3 in Elixir", &HRW.owner("k", &1, scorer: @phash2)},
      {"HRW.owners/4", &HRW.owners("k", &1, 2)},
      {"HRW.owners/4 weighted", &HRW.owners("k", &1, 2, scorer: %HRW.Weighted{})},
      {"HRW.owners/4 in Elixir", &HRW.owners("k", &1, 2, scorer: @phash2)},
      {"HRW.owner_batch/3", &HRW.owner_batch(["k"], &1)},
      {"HRW.owner_batch/3 weighted", &HRW.owner_batch(["k"], &1, scorer: %HRW.Weighted{})},
      {"HRW.owner_batch/3 in Elixir", &HRW.owner_batch(["k"], &1, scorer: @phash2)},
      {"HRW.group_by_owner/3", &HRW.group_by_owner(["k"], &1)},
      {"HRW.group_by_owner/3 in Elixir", &HRW.group_by_owner(["k"], &1, scorer: @phash2)},
      {"HRW.moves/4 before", &HRW.moves(["k"], &1, ring)},
      {"HRW.moves/4 later", &HRW.moves(["k"], ring, &1)},
      {"HRW.moves/4 without keys", &HRW.moves([], ring, &1)},
      {"HRW.moves/4 in Elixir", &HRW.moves(["k"], &1, @nodes, scorer: @phash2)},
      {"HRW.moved_fraction/4", &HRW.moved_fraction(["k"], &1, ring)}
    ]
  end

  # Every function that builds from a node list.
  defp builder_calls do
    [
      {"HRW.Ring.new/2", &HRW.Ring.new(&1)},
      {"HRW.Ring.new/2 weighted", &HRW.Ring.new(&1, scorer: %HRW.Weighted{})},
      {"HRW.build/2", &HRW.build(&1)},
      {"HRW.build/2 weighted", &HRW.build(&1, scorer: %HRW.Weighted{})},
      {"HRW.build/2 in Elixir", &HRW.build(&1, scorer: @phash2)},
      {"HRW.Bounded.assignments/3", &HRW.Bounded.assignments(["k"], &1)},
      {"HRW.Bounded.assignments/3 in Elixir",
       fn nodes -> HRW.Bounded.assignments(["k"], nodes, hash_fn: &:erlang.phash2/1) end}
    ]
  end

  test "a wrong target, node list or struct gets one message wherever it is passed" do
    ring = HRW.Ring.new(@nodes)
    skeleton = HRW.build(@nodes)
    forged = ring |> Map.put(:resource, make_ref()) |> Map.delete(:fingerprint)

    for target <- [:x, %{}, "nodes", 42, %URI{}, {:a, :b}, forged] do
      assert_one_message(
        target_calls(),
        target,
        "nodes must be a non-empty list, an HRW.Ring or an HRW.Skeleton, got: " <>
          HRW.Brief.brief(target)
      )
    end

    for nodes <- [:x, %{}, "nodes", 42, ring] do
      assert_one_message(
        builder_calls(),
        nodes,
        "nodes must be a non-empty list, got: #{HRW.Brief.brief(nodes)}"
      )
    end

    # A list is a node list wherever it is passed, weighted or not.
    calls = target_calls() ++ builder_calls()
    assert_one_message(calls, [], "nodes must be a non-empty list")
    improper = [{"a", 1}, {"b", 2} | :tail]
    assert_one_message(calls, improper, "nodes must be a proper list, got an improper list")

    # The accessors of each struct take that struct only.
    for {module, other} <- [{HRW.Ring, skeleton}, {HRW.Skeleton, ring}],
        value <- [:x, other, @nodes] do
      calls = for fun <- [:nodes, :size, :overrides], do: {"#{fun}", &apply(module, fun, [&1])}

      assert_one_message(
        calls,
        value,
        "expected an #{inspect(module)}, got: #{HRW.Brief.brief(value)}"
      )
    end
  end

  # Every function that takes options: {caller as messages name it, call, a valid
  # option list that gives one option twice, that option}.
  defp option_calls do
    ring = HRW.Ring.new(@nodes)
    skeleton = HRW.build(@nodes)
    scorer = [scorer: %HRW{}, scorer: %HRW{}]

    [
      {"HRW.owner/3", &HRW.owner("k", @nodes, &1), scorer},
      {"HRW.owner/3", &HRW.owner("k", ring, &1), scorer},
      {"HRW.owner/3", &HRW.owner("k", skeleton, &1), scorer},
      {"HRW.owners/4", &HRW.owners("k", @nodes, 2, &1), scorer},
      {"HRW.owners/4", &HRW.owners("k", skeleton, 2, &1), scorer},
      {"HRW.owner_batch/3", &HRW.owner_batch(["k"], ring, &1), scorer},
      {"HRW.group_by_owner/3", &HRW.group_by_owner(["k"], @nodes, &1), scorer},
      {"HRW.moves/4", &HRW.moves(["k"], ring, skeleton, &1), scorer},
      {"HRW.moved_fraction/4", &HRW.moved_fraction(["k"], @nodes, ring, &1), scorer},
      {"HRW.build/2", &HRW.build(@nodes, &1), [fanout: 2, fanout: 2]},
      {"HRW.Ring.new/2", &HRW.Ring.new(@nodes, &1), [overrides: %{}, overrides: %{}]},
      {"HRW.Bounded.assignments/3", &HRW.Bounded.assignments(["k"], @nodes, &1),
       [epsilon: 1, epsilon: 1]}
    ]
  end

  test "a wrong option list gets one message, naming its caller, from every entry point" do
    for {caller, call, twice} <- option_calls() do
      calls = [{caller, call}]

      for opts <- [:x, [:x], %{}, [{"scorer", %HRW{}}], [{:a, 1} | :tail]] do
        expected = "#{caller} expects a keyword list of options, got: #{HRW.Brief.brief(opts)}"
        assert_one_message(calls, opts, expected)
      end

      assert_one_message(calls, [bogus: 1], "#{caller} got unknown options: [:bogus]")

      [{key, _} | _] = twice

      assert_one_message(
        calls,
        twice,
        "#{caller} got duplicated options: [#{inspect(key)}] (give each option once)"
      )
    end

    # A bad :scorer, wherever one is taken.
    for {caller, call, [{:scorer, _} | _]} <- option_calls(),
        scorer <- [:x, "HRW", %{hash_fn: nil}] do
      assert_one_message(
        [{caller, call}],
        [scorer: scorer],
        "scorer must be a scorer struct, got: #{HRW.Brief.brief(scorer)}"
      )
    end
  end

  test "a wrong count gets one message from every function that takes one" do
    ring = HRW.Ring.new(@nodes)

    calls = [
      {"HRW.owners/4", &HRW.owners("k", @nodes, &1)},
      {"HRW.owners/4 on a ring", &HRW.owners("k", ring, &1)},
      {"HRW.owners/4 on a skeleton", &HRW.owners("k", HRW.build(@nodes), &1)},
      {"HRW.owners/4 weighted", &HRW.owners("k", [{"a", 1}], &1, scorer: %HRW.Weighted{})},
      {"HRW.owners/4 in Elixir", &HRW.owners("k", @nodes, &1, scorer: @phash2)}
    ]

    for count <- [-1, 1.0, :all, nil, "2", [2]] do
      assert_one_message(
        calls,
        count,
        "count must be a non-negative integer, got: #{HRW.Brief.brief(count)}"
      )
    end
  end

  test "a wrong key list gets one message from every function that takes one" do
    ring = HRW.Ring.new(@nodes)

    calls = [
      {"HRW.owner_batch/3", &HRW.owner_batch(&1, ring)},
      {"HRW.owner_batch/3 on a list", &HRW.owner_batch(&1, @nodes)},
      {"HRW.owner_batch/3 in Elixir", &HRW.owner_batch(&1, @nodes, scorer: @phash2)},
      {"HRW.group_by_owner/3", &HRW.group_by_owner(&1, ring)},
      {"HRW.group_by_owner/3 in Elixir", &HRW.group_by_owner(&1, @nodes, scorer: @phash2)},
      {"HRW.moves/4", &HRW.moves(&1, ring, @nodes)},
      {"HRW.moved_fraction/4", &HRW.moved_fraction(&1, ring, @nodes)},
      {"HRW.Bounded.assignments/3", &HRW.Bounded.assignments(&1, @nodes)}
    ]

    for keys <- [:keys, "keys", %{}, {"a", "b"}] do
      assert_one_message(calls, keys, "keys must be a list, got: #{HRW.Brief.brief(keys)}")
    end

    assert_one_message(calls, ["a", "b" | :tail], "keys must be a proper list")
  end

  test "a map that names a structure's struct but lacks a field is no target" do
    ring = HRW.Ring.new(@nodes)
    skeleton = HRW.build(@nodes)

    # A stale resource too (an atom, or a reference that names no resource, which
    # takes HRW.owner/3's fast path to the rebuild): neither may be rebuilt from.
    for structure <- [ring, skeleton],
        stale <- [:stale, make_ref()],
        field <- [:fingerprint, :overrides, :resource, :nodes, :weights] do
      forged = structure |> Map.put(:resource, stale) |> Map.delete(field)

      for call <- [
            fn -> HRW.owner("k", forged) end,
            fn -> HRW.owners("k", forged, 2) end,
            fn -> HRW.owner_batch(["k"], forged) end,
            fn -> HRW.group_by_owner(["k"], forged) end
          ] do
        error = assert_raise ArgumentError, call

        assert Exception.message(error) =~ "nodes must be a non-empty list, an HRW.Ring",
               inspect(field)
      end
    end

    # A whole struct whose resource is stale is rebuilt, as before.
    assert HRW.owner("k", %{ring | resource: :stale}) == HRW.owner("k", ring)
  end

  test ":batch_threads is a whole number from 1 to 4 times the schedulers online" do
    on_exit(fn -> Application.delete_env(:hrw, :batch_threads) end)
    max = 4 * :erlang.system_info(:schedulers_online)
    ring = HRW.Ring.new(@nodes)

    for bad <- [0, -1, max + 1, Integer.pow(2, 40), Integer.pow(2, 64), :auto, "4", 4.0] do
      Application.put_env(:hrw, :batch_threads, bad)
      error = assert_raise ArgumentError, fn -> HRW.owner_batch(["a", "b"], ring) end
      assert Exception.message(error) =~ "batch_threads must be a whole number from 1 to #{max}"
    end

    for good <- [1, max] do
      Application.put_env(:hrw, :batch_threads, good)
      assert HRW.owner_batch(["a", "b"], ring) == Enum.map(["a", "b"], &HRW.owner(&1, ring))
    end
  end

  defmodule NotLoadedYet do
    @moduledoc false
    # Compiled to a .beam of its own in the test, then unloaded: the state of a
    # module in a release or iex before anything has called it.
    def source do
      """
      defmodule HRW.InputsTest.LazyScorer do
        defstruct []
        def score(_scorer, key, node), do: :erlang.phash2({key, node})
      end
      """
    end
  end

  test "a custom scorer whose module is not loaded yet is loaded, then accepted" do
    dir = Path.join(System.tmp_dir!(), "hrw-lazy-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    [{module, beam}] = Code.compile_string(NotLoadedYet.source())
    File.write!(Path.join(dir, "#{module}.beam"), beam)
    :code.purge(module)
    :code.delete(module)
    :code.purge(module)
    refute :code.is_loaded(module)
    true = Code.prepend_path(dir)
    on_exit(fn -> Code.delete_path(dir) end)

    # Built by hand: struct/2 would load the module first.
    scorer = %{__struct__: module}
    owner = HRW.owner("k", @nodes, scorer: scorer)
    assert owner in @nodes
    assert owner == Enum.max_by(@nodes, &:erlang.phash2({"k", &1}))
  end
end
