defmodule Mix.HrwNative.JSON do
  @moduledoc """
  A JSON decoder just large enough for cargo's `--message-format=json` lines: the
  compile task runs before any dependency is compiled, OTP 25 has no `:json`, and
  no Hex package may be used.
  """

  @doc """
  Decodes one JSON document: objects become maps with string keys, arrays lists,
  `null` `nil`; a number too large for a float stays text. `:error` when `text`
  is not exactly one JSON value.

      iex> Mix.HrwNative.JSON.decode(~s({"reason": "compiler-artifact", "n": [1, 2.5, null]}))
      {:ok, %{"n" => [1, 2.5, nil], "reason" => "compiler-artifact"}}

      iex> Mix.HrwNative.JSON.decode(~s({"a": 1,}))
      :error
  """
  @spec decode(binary()) :: {:ok, term()} | :error
  def decode(text) do
    case json_value(skip(text)) do
      {value, rest} -> if skip(rest) == "", do: {:ok, value}, else: :error
    end
  catch
    :invalid_json -> :error
  end

  defp json_value("{" <> rest), do: json_object(skip(rest), %{})
  defp json_value("[" <> rest), do: json_array(skip(rest), [])
  defp json_value("\"" <> rest), do: json_string(rest, [])
  defp json_value("true" <> rest), do: {true, rest}
  defp json_value("false" <> rest), do: {false, rest}
  defp json_value("null" <> rest), do: {nil, rest}
  defp json_value(text), do: json_number(text)

  defp json_object("}" <> rest, acc) when acc == %{}, do: {acc, rest}

  defp json_object("\"" <> rest, acc) do
    {key, rest} = json_string(rest, [])

    {value, rest} =
      case skip(rest) do
        ":" <> rest -> json_value(skip(rest))
        _ -> throw(:invalid_json)
      end

    acc = Map.put(acc, key, value)

    case skip(rest) do
      "," <> rest -> json_object(skip(rest), acc)
      "}" <> rest -> {acc, rest}
      _ -> throw(:invalid_json)
    end
  end

  defp json_object(_, _), do: throw(:invalid_json)

  defp json_array("]" <> rest, []), do: {[], rest}

  defp json_array(text, acc) do
    {value, rest} = json_value(text)

    case skip(rest) do
      "," <> rest -> json_array(skip(rest), [value | acc])
      "]" <> rest -> {Enum.reverse([value | acc]), rest}
      _ -> throw(:invalid_json)
    end
  end

  defp json_string("\"" <> rest, acc), do: {IO.iodata_to_binary(Enum.reverse(acc)), rest}

  defp json_string("\\u" <> <<digits::binary-size(4), rest::binary>>, acc) do
    case {hex(digits), rest} do
      {high, "\\u" <> <<low::binary-size(4), rest::binary>>} when high in 0xD800..0xDBFF ->
        case hex(low) do
          low when low in 0xDC00..0xDFFF ->
            code = 0x10000 + (high - 0xD800) * 0x400 + (low - 0xDC00)
            json_string(rest, [<<code::utf8>> | acc])

          _ ->
            throw(:invalid_json)
        end

      {code, _} when code in 0xD800..0xDFFF ->
        throw(:invalid_json)

      {code, rest} ->
        json_string(rest, [<<code::utf8>> | acc])
    end
  end

  defp json_string(<<"\\", c, rest::binary>>, acc) do
    char =
      case c do
        ?" -> "\""
        ?\\ -> "\\"
        ?/ -> "/"
        ?b -> "\b"
        ?f -> "\f"
        ?n -> "\n"
        ?r -> "\r"
        ?t -> "\t"
        _ -> throw(:invalid_json)
      end

    json_string(rest, [char | acc])
  end

  defp json_string(<<c::utf8, rest::binary>>, acc) when c >= 0x20,
    do: json_string(rest, [<<c::utf8>> | acc])

  defp json_string(_, _), do: throw(:invalid_json)

  defp hex(digits) do
    if digits =~ ~r/\A[0-9a-fA-F]{4}\z/,
      do: String.to_integer(digits, 16),
      else: throw(:invalid_json)
  end

  defp json_number(text) do
    case Regex.run(~r/\A-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/, text) do
      [number | fraction] ->
        rest = binary_part(text, byte_size(number), byte_size(text) - byte_size(number))

        value = if fraction == [], do: String.to_integer(number), else: json_float(number)
        {value, rest}

      nil ->
        throw(:invalid_json)
    end
  end

  # A valid JSON number such as 1e400 exceeds a double: it stays text.
  defp json_float(number) do
    case Float.parse(number) do
      {float, ""} -> float
      _ -> number
    end
  rescue
    ArgumentError -> number
  end

  defp skip(<<c, rest::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: skip(rest)
  defp skip(text), do: text
end
