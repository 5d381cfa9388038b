defmodule ShardedStore.Order do
  @moduledoc """
  The order the store decides by: Erlang's term order, made exact. Term order
  calls `1` and `1.0` equal (`1 == 1.0`), and so `{5, 1}` and `{5, 1.0}`; two
  replicas that kept whichever arrived first would then disagree for good. Here
  two terms are equal only when they are identical (`===`); terms that term order
  calls equal without being identical differ somewhere in a number written once
  as an integer and once as a float, and at the first such place (depth first, in
  term order) the float sorts below the integer, `-0.0` below `0.0`.

  Defined for every term (any nesting, improper lists, maps); never raises.
  """

  @doc """
  Compares two terms: `:lt`, `:eq` (only when `a === b`) or `:gt`.

  ## Examples

      iex> ShardedStore.Order.compare(1, 2)
      :lt
      iex> ShardedStore.Order.compare(1.0, 1)
      :lt
      iex> ShardedStore.Order.compare({5, [1, 2]}, {5, [1, 2.0]})
      :gt
      iex> ShardedStore.Order.compare(%{a: 1}, %{a: 1})
      :eq
  """
  @spec compare(term(), term()) :: :lt | :eq | :gt
  def compare(a, b) when a === b, do: :eq
  def compare(a, b) when a < b, do: :lt
  def compare(a, b) when a > b, do: :gt
  # From here on a == b and a !== b.
  def compare(a, b) when is_float(a) and is_float(b), do: if(negative?(a), do: :lt, else: :gt)
  def compare(a, _b) when is_float(a), do: :lt
  def compare(a, _b) when is_integer(a), do: :gt
  def compare(a, b) when is_tuple(a), do: elements(a, b, 1, tuple_size(a))
  def compare([x | xs], [y | ys]), do: then_compare(compare(x, y), xs, ys)
  # Equal maps have the same keys, identical ones: their values decide, in the
  # keys' exact order.
  def compare(a, b) when is_map(a) do
    a
    |> Map.keys()
    |> Enum.sort(&(compare(&1, &2) != :gt))
    |> Enum.reduce_while(:eq, fn key, :eq ->
      case compare(Map.fetch!(a, key), Map.fetch!(b, key)) do
        :eq -> {:cont, :eq}
        order -> {:halt, order}
      end
    end)
  end

  @doc """
  The greatest of a non-empty list of terms by `compare/2`.

  ## Examples

      iex> ShardedStore.Order.max([{5, 1.0}, {5, 1}, {4, 9}])
      {5, 1}
      iex> ShardedStore.Order.max([{5, 1}, {5, 1.0}])
      {5, 1}
  """
  @spec max([term(), ...]) :: term()
  def max([first | rest]) do
    Enum.reduce(rest, first, fn term, best ->
      if compare(term, best) == :gt, do: term, else: best
    end)
  end

  defp then_compare(:eq, xs, ys), do: compare(xs, ys)
  defp then_compare(order, _xs, _ys), do: order

  defp elements(_a, _b, i, size) when i > size, do: :eq

  defp elements(a, b, i, size) do
    case compare(:erlang.element(i, a), :erlang.element(i, b)) do
      :eq -> elements(a, b, i + 1, size)
      order -> order
    end
  end

  defp negative?(float) do
    <<sign::1, _::63>> = <<float::float>>
    sign == 1
  end
end
