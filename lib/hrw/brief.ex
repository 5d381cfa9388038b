defmodule HRW.Brief do
  @moduledoc false
  # A short rendering of a user's value for an error message, in bounded time and
  # size whatever the value: at most 3 levels and 5 elements per level are shown,
  # binaries and atoms are cut to 64 bytes, integers beyond 64 bits are described
  # by their size (converting a bignum to decimal is quadratic), and long or
  # improper lists are never walked to their end. Text is only ever cut between
  # characters (between graphemes where the cut allows it), so the result is valid
  # UTF-8 whatever the value. Every message that shows a user's value goes through
  # here.

  @doc "A bounded rendering of `value` for an error message."
  @spec brief(term()) :: String.t()
  def brief(value), do: value |> brief(3) |> IO.iodata_to_binary()

  @shown 5
  @shown_bytes 64

  defp brief(i, _depth) when is_integer(i) and abs(i) > 0xFFFF_FFFF_FFFF_FFFF do
    "an integer of #{byte_size(:binary.encode_unsigned(abs(i)))} bytes"
  end

  defp brief(v, _depth) when is_integer(v) or is_float(v), do: inspect(v)

  defp brief(a, _depth) when is_atom(a), do: cut(inspect(a))

  defp brief(b, _depth) when is_binary(b) and byte_size(b) > @shown_bytes do
    [inspect(prefix(b, @shown_bytes)), "... (#{byte_size(b)} bytes)"]
  end

  defp brief(b, _depth) when is_bitstring(b) and bit_size(b) > 8 * @shown_bytes do
    "a bitstring of #{bit_size(b)} bits"
  end

  defp brief(b, _depth) when is_bitstring(b), do: inspect(b)
  defp brief(_value, 0), do: "..."
  defp brief(%module{} = struct, depth) when is_atom(module), do: map(struct, depth)
  defp brief(m, depth) when is_map(m), do: map(m, depth)

  defp brief(t, depth) when is_tuple(t) do
    shown = for i <- 1..min(tuple_size(t), @shown)//1, do: brief(elem(t, i - 1), depth - 1)
    more = if tuple_size(t) > @shown, do: [", ..."], else: []
    ["{", Enum.intersperse(shown, ", "), more, "}"]
  end

  defp brief(l, depth) when is_list(l), do: ["[", list(l, @shown, depth), "]"]
  defp brief(other, _depth), do: inspect(other)

  defp list([], _left, _depth), do: []
  defp list([_ | _], 0, _depth), do: ["..."]
  defp list([h], _left, depth), do: [brief(h, depth - 1)]

  defp list([h | [_ | _] = t], left, depth),
    do: [brief(h, depth - 1), ", " | list(t, left - 1, depth)]

  defp list([h | t], _left, depth), do: [brief(h, depth - 1), " | ", brief(t, depth - 1)]

  # Maps are read with an iterator: only the entries shown are ever visited.
  defp map(m, depth) do
    {entries, more} = take(:maps.next(:maps.iterator(m)), @shown, [])
    shown = for {k, v} <- entries, do: [brief(k, depth - 1), " => ", brief(v, depth - 1)]
    prefix = if is_struct(m), do: ["%", cut(inspect(m.__struct__)), "{"], else: "%{"
    [prefix, Enum.intersperse(shown, ", "), if(more, do: ", ...", else: ""), "}"]
  end

  # Text (valid UTF-8, as `inspect` returns it) of at most @shown_bytes bytes, or its
  # first characters and "...".
  defp cut(text) when byte_size(text) <= @shown_bytes, do: text
  defp cut(text), do: [prefix(text, @shown_bytes), "..."]

  # The longest prefix of `bytes` of at most `max` bytes (`max < byte_size(bytes)`)
  # that does not end inside a UTF-8 character, nor, unless that leaves nothing,
  # inside a grapheme: a UTF-8 binary stays UTF-8. Other binaries are cut at `max`,
  # or just before bytes that look like the start of a character. Bounded work: at
  # most `max` + 4 bytes are read.
  defp prefix(bytes, max) do
    at = char_start(bytes, max, max)
    head = binary_part(bytes, 0, at)
    next = binary_part(bytes, at, min(4, byte_size(bytes) - at))

    with true <- String.valid?(head),
         {char, _} <- String.next_codepoint(next),
         [_, _ | _] = graphemes <- String.graphemes(head),
         # `char` continues the last grapheme (a combining mark, say): drop that one.
         true <- length(String.graphemes(head <> char)) == length(graphemes) do
      graphemes |> Enum.drop(-1) |> IO.iodata_to_binary()
    else
      _ -> head
    end
  end

  # `at` moved back over continuation bytes (0b10xxxxxx) to the start of the
  # character the byte at `at` belongs to; `max` when no start is within 3 bytes
  # (not UTF-8 there anyway).
  defp char_start(bytes, at, max) do
    cond do
      max - at > 3 or at == 0 -> max
      Bitwise.band(:binary.at(bytes, at), 0xC0) == 0x80 -> char_start(bytes, at - 1, max)
      true -> at
    end
  end

  defp take(:none, _left, acc), do: {Enum.reverse(acc), false}
  defp take(_iter, 0, acc), do: {Enum.reverse(acc), true}
  defp take({k, v, iter}, left, acc), do: take(:maps.next(iter), left - 1, [{k, v} | acc])
end
