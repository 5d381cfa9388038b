defmodule HRW.Utf8MessagesTest do
  # Error messages and log lines cut users' values short; a cut never falls inside a
  # character, so every message stays valid UTF-8 whatever the value.
  use ExUnit.Case, async: true

  # Loose: brief/1 shows 5 × 5 leaves of at most 64 bytes and a size (the tight bounds are
  # error_message_test.exs's); here what matters is UTF-8.
  @max_message 2_500

  # Multi-byte text of every UTF-8 width, cut at every offset modulo the width, with
  # combining marks and a single grapheme longer than any cut.
  defp texts do
    for base <- ["é", "€", "😀", "e\u0301", "🇫🇷", "a\u0301\u0302"],
        lead <- ["", "a", "ab", "abc"],
        do: lead <> String.duplicate(base, 100)
  end

  defp hostile do
    long_texts = texts() ++ ["e" <> String.duplicate("\u0301", 300)]

    atoms =
      [
        String.duplicate("é", 100),
        String.duplicate("e\u0301", 127),
        String.duplicate("😀", 255),
        "a b " <> String.duplicate("€", 200)
      ]
      |> Enum.map(&String.to_atom/1)

    values = long_texts ++ atoms

    values ++
      [
        Enum.take(values, 7),
        List.to_tuple(atoms),
        Map.new(atoms, &{&1, &1}),
        %{__struct__: hd(atoms), field: List.last(long_texts)}
      ]
  end

  defp assert_valid(text, what) do
    assert String.valid?(text), "#{what}: not UTF-8: #{inspect(text, binaries: :as_binaries)}"
    assert byte_size(text) <= @max_message, "#{what}: #{byte_size(text)} bytes"
  end

  test "HRW.Brief.brief/1 of multi-byte text is valid UTF-8 and shows whole characters" do
    for {value, v} <- Enum.with_index(hostile()),
        do: assert_valid(HRW.Brief.brief(value), "value #{v}")

    # What is shown is the start of the text, cut between characters.
    for text <- texts() do
      [_, shown] = Regex.run(~r/^"(.*)"\.\.\. \(\d+ bytes\)$/us, HRW.Brief.brief(text))
      assert String.starts_with?(text, shown)
      assert byte_size(shown) >= 64 - 12
      # Between graphemes: the rest of the text starts a new one.
      rest = binary_part(text, byte_size(shown), byte_size(text) - byte_size(shown))
      assert String.graphemes(text) == String.graphemes(shown) ++ String.graphemes(rest)
    end

    atom = String.to_atom(String.duplicate("é", 100))
    assert HRW.Brief.brief(atom) == ":" <> String.duplicate("é", 31) <> "..."

    # A grapheme longer than the cut is cut between its code points.
    assert HRW.Brief.brief("e" <> String.duplicate("\u0301", 300)) ==
             ~s["e] <> String.duplicate("\u0301", 31) <> ~s["... (601 bytes)]

    # Bytes that are not UTF-8 are still shown as bytes.
    assert HRW.Brief.brief(:binary.copy(<<0xC3>>, 100)) =~ ~r/^<<195, 195, /
  end

  # The (call, value) pairs, by index, that answer instead of raising: a list of
  # texts (value 29) is a node list or a key list for calls 7 to 12, and a map of
  # atoms (value 31) is a valid map of overrides (call 19). Every other
  # pair must raise.
  @answered [{7, 29}, {8, 29}, {9, 29}, {10, 29}, {11, 29}, {12, 29}, {19, 31}]

  test "every error path that shows a value is valid UTF-8" do
    # (Failure texts name values by their index: a label must not itself be the
    # invalid text being tested for.)
    for {value, v} <- Enum.with_index(hostile()) do
      calls = [
        fn -> HRW.build(["a"], cluster_size: value) end,
        fn -> HRW.build(["a"], fanout: value) end,
        fn -> HRW.owner("k", ["a"], scorer: value) end,
        fn -> HRW.owner("k", ["a"], scorer: %HRW{hash_fn: value}) end,
        fn -> HRW.owner("k", ["a"], [{value, 1}]) end,
        fn -> HRW.owner("k", ["a"], value) end,
        fn -> HRW.owners("k", ["a"], value) end,
        fn -> HRW.owner("k", value) end,
        fn -> HRW.owners("k", value, 1) end,
        fn -> HRW.owner_batch(value, ["a"]) end,
        fn -> HRW.owner_batch(["k"], value) end,
        fn -> HRW.group_by_owner(value, ["a"]) end,
        fn -> HRW.moves(["k"], ["a"], value) end,
        fn -> HRW.Bounded.assignments(["k"], ["a"], epsilon: value) end,
        fn -> HRW.owner("k", [{"a", value}], scorer: %HRW.Weighted{}) end,
        fn -> HRW.owner("k", [value], scorer: %HRW.Weighted{}) end,
        fn ->
          HRW.owner("k", [{"a", value}], scorer: %HRW.Weighted{hash_fn: &:erlang.phash2/1})
        end,
        fn -> HRW.Weighted.score(%HRW.Weighted{}, "k", {"a", value}) end,
        fn -> HRW.Ring.new([{"a", value}], scorer: %HRW.Weighted{}) end,
        fn -> HRW.Ring.new(["a"], overrides: value) end,
        fn -> HRW.Ring.new(["a"], overrides: %{value => []}) end,
        fn -> HRW.build(["a"], overrides: %{{value, nested(300)} => "p"}) end
      ]

      for {call, i} <- Enum.with_index(calls) do
        case HRW.TestValues.outcome(call) do
          {:raised, text} ->
            assert_valid(text, "call #{i} with value #{v}")
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

  defp nested(n), do: Enum.reduce(1..n, :leaf, fn _, acc -> [acc] end)
end
