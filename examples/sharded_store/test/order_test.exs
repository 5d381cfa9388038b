defmodule ShardedStore.OrderTest do
  use ExUnit.Case, async: true

  alias ShardedStore.Order

  doctest ShardedStore.Order
  doctest ShardedStore
  doctest ShardedStore.Machine

  # Pairs equal in term order, not identical: the float side sorts first.
  @pairs [
    {1.0, 1},
    {{5, 1.0}, {5, 1}},
    {[1, 2.0, 3], [1, 2, 3]},
    {[1 | 2.0], [1 | 2]},
    {%{a: 1.0, b: 1}, %{a: 1, b: 1.0}},
    {%{1 => 2, 1.0 => 2.0}, %{1 => 2.0, 1.0 => 2}},
    {Enum.reduce(1..400, 0.0, &{&1, &2}), Enum.reduce(1..400, 0, &{&1, &2})}
  ]

  test "terms equal in term order but not identical are ordered, the same both ways" do
    for {low, high} <- @pairs do
      assert low == high
      assert Order.compare(low, high) == :lt
      assert Order.compare(high, low) == :gt
      assert Order.max([low, high]) === high
      assert Order.max([high, low]) === high
    end
  end

  test "identical terms are :eq and other terms keep their term order" do
    terms = [1, 2.5, :a, {1, 2}, [1 | 2], "b", %{a: 1}, self(), make_ref()]

    for a <- terms, b <- terms do
      expected = if a < b, do: :lt, else: if(a > b, do: :gt, else: :eq)
      assert Order.compare(a, b) == expected
    end
  end

  test "a sort by compare/2 ends the same whatever the order it starts from" do
    terms = [1, 1.0, {1}, {1.0}, [1.0 | 1], [1 | 1.0], %{k: 1}, %{k: 1.0}]
    sorted = Enum.sort(terms, &(Order.compare(&1, &2) != :gt))

    for _ <- 1..20 do
      assert Enum.sort(Enum.shuffle(terms), &(Order.compare(&1, &2) != :gt)) === sorted
    end
  end

  # Random nested terms mixing integers and floats of equal value, in tuples,
  # proper and improper lists and maps (ExUnit seeds :rand per test).
  defp term(0), do: Enum.random([0, 0.0, 1, 1.0, 2, 2.0, :a, "b", []])

  defp term(depth) do
    case :rand.uniform(5) do
      1 -> term(0)
      2 -> List.to_tuple(for _ <- 1..:rand.uniform(3), do: term(depth - 1))
      3 -> for _ <- 1..:rand.uniform(3), do: term(depth - 1)
      4 -> [term(depth - 1) | term(0)]
      5 -> Map.new(for _ <- 1..:rand.uniform(3), do: {term(0), term(depth - 1)})
    end
  end

  test "compare/2 is a total order: antisymmetric, transitive, :eq only for identical terms, " <>
         "and it refines term order" do
    terms = for _ <- 1..200, do: term(3)

    for a <- terms, b <- terms do
      order = Order.compare(a, b)
      assert order == :eq == (a === b)
      assert Order.compare(b, a) == %{lt: :gt, eq: :eq, gt: :lt}[order]
      if a < b, do: assert(order == :lt)
      if a > b, do: assert(order == :gt)
    end

    sample = Enum.take_random(terms, 40)

    for a <- sample,
        b <- sample,
        c <- sample,
        Order.compare(a, b) == :lt and Order.compare(b, c) == :lt do
      assert Order.compare(a, c) == :lt
    end
  end
end
