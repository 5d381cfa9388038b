defmodule HRW.Cluster.Describe do
  @moduledoc false
  # How HRW.Cluster shows a user's value in a message: in bounded time and size,
  # whatever the value. Three levels deep and five elements a level at most;
  # binaries and atoms past 64 bytes are cut (at a character boundary when they
  # are text);
  # an integer outside the signed 64-bit range is described by that fact only, as
  # docs/HASHING.md §3 prints refused integers (its digits would take quadratic
  # time to write); improper and long lists are never walked to their end.

  @levels 3
  @items 5
  @bytes 64
  @min -0x8000_0000_0000_0000
  @max 0x7FFF_FFFF_FFFF_FFFF

  @doc "`value` as short, valid UTF-8 text for a message."
  @spec value(term()) :: String.t()
  def value(value), do: value |> text(@levels) |> IO.iodata_to_binary()

  defp text(i, _levels) when is_integer(i) and (i < @min or i > @max),
    do: "an integer outside the 64-bit range"

  defp text(b, _levels) when is_binary(b) and byte_size(b) > @bytes,
    do: [inspect(head(b, @bytes)), "... (#{byte_size(b)} bytes)"]

  defp text(b, _levels) when is_bitstring(b) and bit_size(b) > 8 * @bytes,
    do: "a bitstring of #{bit_size(b)} bits"

  defp text(a, _levels) when is_atom(a) do
    text = inspect(a)
    if byte_size(text) > @bytes, do: [head(text, @bytes), "..."], else: text
  end

  defp text(scalar, _levels)
       when not is_map(scalar) and not is_tuple(scalar) and not is_list(scalar),
       do: inspect(scalar)

  defp text(_container, 0), do: "..."

  # A tuple's first elements only, and one more to say it goes on.
  defp text(t, levels) when is_tuple(t) do
    shown = for i <- 1..min(tuple_size(t), @items + 1)//1, do: elem(t, i - 1)
    ["{", items(shown, levels - 1), "}"]
  end

  defp text(l, levels) when is_list(l), do: ["[", items(l, levels - 1), "]"]

  defp text(m, levels) do
    {pairs, more?} = first_pairs(:maps.next(:maps.iterator(m)), @items, [])
    shown = Enum.map(pairs, fn {k, v} -> [text(k, levels - 1), " => ", text(v, levels - 1)] end)
    label = if is_struct(m), do: ["%", inspect(m.__struct__), "{"], else: "%{"
    [label, Enum.intersperse(shown ++ if(more?, do: ["..."], else: []), ", "), "}"]
  end

  # The first elements of a (possibly improper or long) list, with ", ..." or
  # " | tail" where the list goes on.
  defp items(list, levels), do: list |> walk(@items, levels) |> Enum.intersperse(", ")

  defp walk([], _left, _levels), do: []
  defp walk([_ | _], 0, _levels), do: ["..."]

  defp walk([h | t], left, levels) when is_list(t),
    do: [text(h, levels) | walk(t, left - 1, levels)]

  defp walk([h | t], _left, levels), do: [[text(h, levels), " | ", text(t, levels)]]

  defp first_pairs(:none, _left, acc), do: {Enum.reverse(acc), false}
  defp first_pairs(_iterator, 0, acc), do: {Enum.reverse(acc), true}

  defp first_pairs({k, v, next}, left, acc),
    do: first_pairs(:maps.next(next), left - 1, [{k, v} | acc])

  # At most `max` bytes of `b`, not ending inside a UTF-8 character when `b` is
  # text (a character is at most 4 bytes: at most 3 are dropped).
  defp head(b, max) do
    cut = binary_part(b, 0, max)
    Enum.find([cut | for(n <- 1..3, do: binary_part(cut, 0, max - n))], cut, &String.valid?/1)
  end
end
