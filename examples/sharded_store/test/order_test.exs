defmodule ShardedStore.OrderTest do
  use ExUnit.Case, async: true

  alias ShardedStore.Order

  doctest ShardedStore.Order
  doctest ShardedStore

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
end
