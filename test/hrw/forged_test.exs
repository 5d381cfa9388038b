defmodule HRW.ForgedTest do
  @moduledoc """
  A scorer that is not one, and a ring, skeleton or `%HRW.Weighted{}` whose fields
  were changed by hand, get an `ArgumentError` naming what is wrong, from every
  entry point that takes them: never a `FunctionClauseError`, `BadFunctionError`,
  `BadArityError` or `UndefinedFunctionError` from inside the library.
  """
  use ExUnit.Case, async: true

  import HRW.TestValues, only: [untyped: 1]

  defmodule NotAScorer do
    @moduledoc false
    defstruct []
  end

  # The bad scorers, each with the message every entry point gives for it when it
  # is passed as the `:scorer` option.
  defp bad_scorers do
    [
      {untyped(:garbage), "scorer must be a scorer struct, got: :garbage"},
      {untyped(%{hash_fn: nil}), "scorer must be a scorer struct, got: %{:hash_fn => nil}"},
      {%HRW{hash_fn: untyped(5)}, "hash_fn must be a function of arity 1, got: 5"},
      {%HRW{hash_fn: untyped(fn a, b -> {a, b} end)}, "hash_fn must be a function of arity 1"},
      {%HRW.Weighted{hash_fn: untyped("phash2")},
       ~s(hash_fn must be a function of arity 1, got: "phash2")},
      {%HRW.Weighted{hash_fn: untyped(&:erlang.phash2/2)},
       "hash_fn must be a function of arity 1, got: &:erlang.phash2/2"},
      {untyped(%NotAScorer{}), "scorer HRW.ForgedTest.NotAScorer does not implement"}
    ]
  end

  defp message(fun) do
    try do
      fun.()
      flunk("no ArgumentError")
    rescue
      e in ArgumentError -> Exception.message(e)
    end
  end

  defp assert_names(fun, expected, label) do
    got = message(fun)
    assert got =~ expected, "#{label}: #{inspect(got)}"
  end

  test "a bad :scorer option: the same ArgumentError from every entry point" do
    ring = HRW.Ring.new(["a", "b"])
    skeleton = HRW.build(["a", "b"])

    for {scorer, expected} <- bad_scorers(),
        target <- [["a", "b"], ring, skeleton],
        {name, call} <- [
          {"owner/3", fn o -> HRW.owner("k", target, o) end},
          {"owners/4", fn o -> HRW.owners("k", target, 2, o) end},
          {"owner_batch/3", fn o -> HRW.owner_batch(["k"], target, o) end},
          {"group_by_owner/3", fn o -> HRW.group_by_owner(["k"], target, o) end},
          {"moves/4", fn o -> HRW.moves(["k"], target, ["a"], o) end},
          {"moved_fraction/4", fn o -> HRW.moved_fraction(["k"], ["a"], target, o) end},
          {"build/2", fn o -> HRW.build(["a", "b"], o) end},
          {"Ring.new/2", fn o -> HRW.Ring.new(["a", "b"], o) end}
        ] do
      assert_names(fn -> call.(scorer: scorer) end, expected, "#{name} #{inspect(target)}")
    end
  end

  test "HRW.score/3 and HRW.Weighted.score/3 refuse what is not their scorer, naming it" do
    for {scorer, option_message} <- bad_scorers() do
      expected =
        case scorer do
          %HRW{} -> option_message
          _ -> "HRW.score/3 expects an %HRW{} scorer, got: "
        end

      assert_names(
        fn -> HRW.score(scorer, "k", "n") end,
        expected,
        "HRW.score #{inspect(scorer)}"
      )

      expected =
        case scorer do
          %HRW.Weighted{} -> option_message
          _ -> "HRW.Weighted.score/3 expects an %HRW.Weighted{} scorer, got: "
        end

      assert_names(
        fn -> HRW.Weighted.score(scorer, "k", {"n", 1}) end,
        expected,
        "HRW.Weighted.score #{inspect(scorer)}"
      )
    end

    # A good scorer with a bad entry names the entry.
    assert message(fn ->
             HRW.Weighted.score(%HRW.Weighted{hash_fn: &:erlang.phash2/1}, "k", :n)
           end) ==
             "weighted nodes must be {node, weight} tuples, got: :n"

    # And the good ones answer.
    assert HRW.score(%HRW{hash_fn: &:erlang.phash2/1}, "k", "n") == :erlang.phash2({"k", "n"})
    assert is_integer(HRW.score(%HRW{}, "k", "n"))
  end

  # Every lookup of a prepared target, single and batched.
  defp lookups(target) do
    [
      {"owner/3", fn -> HRW.owner("k", target) end},
      {"owner/3 with options", fn -> HRW.owner("k", target, scorer: %HRW{}) end},
      {"owners/4", fn -> HRW.owners("k", target, 2) end},
      {"owner_batch/3", fn -> HRW.owner_batch(["k", "j"], target) end},
      {"group_by_owner/3", fn -> HRW.group_by_owner(["k", "j"], target) end},
      {"moves/4", fn -> HRW.moves(["k", "j"], target, ["a"]) end},
      {"moves/4, as later", fn -> HRW.moves(["k", "j"], ["a"], target) end}
    ]
  end

  test "a skeleton scored in Elixir whose :scorer was changed by hand is named on every lookup" do
    # Built with an Elixir scorer, so it has no resource: its :scorer is what scores.
    skeleton = HRW.build(["a", "b", "c"], scorer: %HRW{hash_fn: &:erlang.phash2/1})
    assert skeleton.resource == nil

    forged =
      [
        # A native scorer on a skeleton without a resource: HRW.build/2 never makes one.
        %HRW{},
        %HRW.Weighted{}
      ] ++ Enum.map(bad_scorers(), &elem(&1, 0))

    for scorer <- forged, {name, call} <- lookups(%{skeleton | scorer: scorer}) do
      assert_names(
        call,
        "an HRW.Skeleton without a resource is scored in Elixir, but its :scorer field holds " <>
          HRW.Brief.brief(scorer),
        "#{name} with scorer #{inspect(scorer)}"
      )
    end

    # The untouched skeleton answers as the list with its scorer.
    list = HRW.owner("k", ["a", "b", "c"], scorer: %HRW{hash_fn: &:erlang.phash2/1})
    assert HRW.owner("k", skeleton) == list
  end

  test "a ring or skeleton rebuilt from fields changed by hand names the field, on every lookup" do
    ring = HRW.Ring.new([{"a", 1}, {"b", 2}], scorer: %HRW.Weighted{})
    skeleton = HRW.build(["a", "b", "c"])

    # A reference that is no live resource makes every lookup rebuild from the fields.
    stale = fn struct -> %{struct | resource: make_ref()} end

    forged = [
      {%{stale.(ring) | weights: untyped(:garbage)}, ":weights", ":garbage"},
      {%{stale.(ring) | weights: {1}}, ":weights", "{1}"},
      {%{stale.(skeleton) | nodes: untyped(["a", "b", "c"])}, ":nodes", ~s(["a", "b", "c"])},
      {%{stale.(skeleton) | cluster_size: untyped(0)}, ":cluster_size", "0"},
      {%{stale.(skeleton) | cluster_size: untyped("16")}, ":cluster_size", ~s("16")}
    ]

    for {struct, field, value} <- forged, {name, call} <- lookups(struct) do
      assert_names(
        call,
        "the #{inspect(struct.__struct__)} struct's #{field} field was changed by hand " <>
          "(build it with its constructor), got: #{value}",
        "#{name} on #{field}"
      )
    end

    # Nodes that do not give the fingerprint are refused the same way everywhere.
    for {name, call} <- lookups(%{stale.(skeleton) | nodes: {"a", "b", "z"}}) do
      assert_names(call, "the HRW.Skeleton struct's nodes do not match its fingerprint", name)
    end
  end

  test "accessors and Inspect of a struct changed by hand name the field or show it corrupt" do
    ring = HRW.Ring.new([{"a", 1}, {"b", 2}], scorer: %HRW.Weighted{})
    skeleton = HRW.build(["a", "b"])

    for {struct, module} <- [{ring, HRW.Ring}, {skeleton, HRW.Skeleton}] do
      no_tuple = %{struct | nodes: untyped([:a])}
      expected = "the #{inspect(module)} struct's :nodes field was changed by hand"
      assert_names(fn -> module.size(no_tuple) end, expected, "size")
      assert_names(fn -> module.nodes(no_tuple) end, expected, "nodes")
      assert inspect(no_tuple) =~ "##{inspect(module)}<nodes: corrupt"

      short_weights = %{struct | weights: {1}}
      expected = "the #{inspect(module)} struct's :weights field was changed by hand"
      assert_names(fn -> module.nodes(short_weights) end, expected, "nodes")
    end

    assert inspect(%{skeleton | cluster_size: untyped(:x), fanout: untyped(:y)}) ==
             "#HRW.Skeleton<2 nodes, cluster_size: :x, fanout: :y (ignored), " <>
               "scorer: %HRW{hash_fn: nil}>"
  end

  test "overrides changed by hand are named on every lookup" do
    for target <- [HRW.Ring.new(["a", "b"]), HRW.build(["a", "b"])],
        overrides <- [untyped(:garbage), untyped(%{"k" => "x"})],
        {name, call} <- lookups(%{target | overrides: overrides}) do
      assert_names(call, "the struct's :overrides field was changed by hand", name)
    end
  end
end
