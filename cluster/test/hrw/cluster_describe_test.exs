defmodule HRW.ClusterDescribeTest do
  # HRW.Cluster.Describe, how every HRW.Cluster message shows a user's value:
  # bounded in size and time whatever the value, valid UTF-8, and integers outside
  # the signed 64-bit range as words (docs/HASHING.md §3).
  use ExUnit.Case, async: true

  alias HRW.Cluster.Describe

  # 3 levels of 5 elements (and a "..." each) of at most 64 bytes and their quotes.
  @max 6 * 6 * 6 * 80

  defp deep(0), do: :leaf
  defp deep(n), do: [deep(n - 1)]

  test "scalars as inspect shows them, within the signed 64-bit range" do
    assert Describe.value(42) == "42"
    assert Describe.value(-0x8000_0000_0000_0000) == "-9223372036854775808"
    assert Describe.value(0x7FFF_FFFF_FFFF_FFFF) == "9223372036854775807"
    assert Describe.value(1.5) == "1.5"
    assert Describe.value(:a) == ":a"
    assert Describe.value("text") == ~s("text")
    assert Describe.value({:a, [1, 2], %{b: 3}}) == "{:a, [1, 2], %{:b => 3}}"
  end

  test "an integer outside the signed 64-bit range is described, never written out" do
    for i <- [0x8000_0000_0000_0000, 2 ** 64, -0x8000_0000_0000_0001, Integer.pow(10, 100_000)] do
      assert Describe.value(i) == "an integer outside the 64-bit range"
    end

    assert Describe.value([2 ** 64]) == "[an integer outside the 64-bit range]"
  end

  test "long, deep, improper and huge values stay short and valid UTF-8" do
    long = Enum.to_list(1..1_000_000)
    huge = String.duplicate("é", 1_000_000)

    values = [
      long,
      deep(100_000),
      [1, 2 | :tail],
      Enum.reduce(1..100_000, :end, &[&1 | &2]),
      List.to_tuple(long),
      Map.new(1..100_000, &{&1, &1}),
      huge,
      :binary.copy(<<255>>, 1_000_000),
      <<1::size(100_001)>>,
      String.to_atom(String.duplicate("😀", 255)),
      %{__struct__: :"Elixir.Not.A.Module", field: huge}
    ]

    for value <- values do
      text = Describe.value(value)
      assert String.valid?(text)
      assert byte_size(text) <= @max, "#{byte_size(text)} bytes"
    end

    assert Describe.value(long) == "[1, 2, 3, 4, 5, ...]"
    assert Describe.value([1, 2 | :tail]) == "[1, 2 | :tail]"
    assert Describe.value(deep(10)) == "[[[...]]]"
    assert Describe.value(huge) =~ ~r/^"é{32}"\.\.\. \(2000000 bytes\)$/u
  end
end
