defmodule HRW.ErrorMessageTest do
  # Every error message that shows a user's value is bounded in size, whatever the
  # value (and so in time: nothing is rendered whole, no bignum is converted to
  # decimal). The bound is checked on the message itself, not on a clock.
  use ExUnit.Case, async: true

  @max_message 400

  defp hostile do
    big = 2 ** 1_000_000
    deep = Enum.reduce(1..100_000, :leaf, &{&1, &2})

    [
      big,
      -(2 ** 2_000_000),
      :binary.copy("x", 10_000_000),
      <<0::size(80_000_001)>>,
      [big, big, big],
      {big, [big], %{big => big}},
      Map.new(1..100_000, &{&1, &1}),
      List.duplicate(big, 1_000),
      deep,
      Enum.reduce(1..100_000, [], &[&2 | &1]),
      [1, 2, 3 | big],
      List.to_tuple(List.duplicate(big, 10_000)),
      %URI{host: :binary.copy("h", 1_000_000)},
      String.to_atom(String.duplicate("a", 255)),
      # The longest atom in bytes: 255 four-byte characters.
      String.to_atom(String.duplicate("😀", 255))
    ]
  end

  test "HRW.Brief.brief/1 stays short for any value" do
    for value <- hostile() do
      text = HRW.Brief.brief(value)
      assert byte_size(text) <= @max_message, "#{byte_size(text)} bytes"
    end

    assert HRW.Brief.brief([1, 2 | 3]) == "[1, 2 | 3]"
    assert HRW.Brief.brief(%{a: 1}) == "%{:a => 1}"
    assert HRW.Brief.brief(2 ** 70) =~ "an integer of 9 bytes"
  end

  defp message(fun) do
    assert {:raised, message} = HRW.TestValues.outcome(fun)
    message
  end

  # The (call, value) pairs, by index, that answer instead of raising: a huge
  # count is capped (3), a huge epsilon lifts every cap (6), and a list of bignums
  # is a list of nodes (4) or keys (5) like any other. Every other pair must raise.
  @answered [{3, 0}, {4, 4}, {4, 7}, {5, 4}, {5, 7}, {6, 0}]

  test "options and weights with huge values raise short messages on every path" do
    for {value, v} <- Enum.with_index(hostile()) do
      calls = [
        fn -> HRW.build(["a"], cluster_size: value) end,
        fn -> HRW.build(["a"], fanout: value) end,
        fn -> HRW.owner("k", ["a"], scorer: value) end,
        fn -> HRW.owners("k", ["a"], value) end,
        fn -> HRW.owner("k", value) end,
        fn -> HRW.owner_batch(value, ["a"]) end,
        fn -> HRW.Bounded.assignments(["k"], ["a"], epsilon: value) end,
        fn -> HRW.owner("k", [{"a", value}], scorer: %HRW.Weighted{}) end,
        fn ->
          HRW.owner("k", [{"a", value}], scorer: %HRW.Weighted{hash_fn: &:erlang.phash2/1})
        end,
        fn -> HRW.Weighted.score(%HRW.Weighted{}, "k", {"a", value}) end,
        fn -> HRW.Ring.new([{"a", value}], scorer: %HRW.Weighted{}) end
      ]

      for {call, i} <- Enum.with_index(calls) do
        case HRW.TestValues.outcome(call) do
          {:raised, text} ->
            assert byte_size(text) <= @max_message,
                   "#{byte_size(text)} bytes: #{HRW.Brief.brief(text)}"

            []

          {:returned, _} ->
            [{i, v}]
        end
      end
    end
    |> List.flatten()
    |> Enum.sort()
    |> then(&assert(&1 == @answered, "calls that answered: #{inspect(&1)}"))
  end

  test "huge integers as options and weights raise, naming what they are" do
    assert message(fn -> HRW.build(["a"], cluster_size: 2 ** 1_000_000) end) =~ "cluster_size"
    assert message(fn -> HRW.build(["a"], fanout: 2 ** 1_000_000) end) =~ "fanout"

    assert message(fn ->
             HRW.owner("k", [{"a", -(2 ** 2_000_000)}],
               scorer: %HRW.Weighted{hash_fn: &:erlang.phash2/1}
             )
           end) =~ "weight"
  end
end
