defmodule HRW.DocsTest.Snippets do
  @moduledoc false
  # Reads a doc's ```elixir blocks into steps and runs them (see HRW.DocsTest).
  import ExUnit.Assertions

  # `{line, code}` of each ```elixir block of the file at `path`.
  def blocks(path) do
    path
    |> File.read!()
    |> String.split("\n")
    |> Enum.with_index(1)
    |> Enum.reduce({[], nil}, fn
      {"```elixir", n}, {blocks, nil} -> {blocks, {n + 1, []}}
      {"```", _n}, {blocks, {start, lines}} -> {[{start, Enum.reverse(lines)} | blocks], nil}
      {line, _n}, {blocks, {start, lines}} -> {blocks, {start, [line | lines]}}
      {_line, _n}, {blocks, nil} -> {blocks, nil}
    end)
    |> then(fn {blocks, nil} -> Enum.reverse(blocks) end)
  end

  # The steps of a block: `{:check, line, code, expected}` for each `#=>`, and
  # `{:run, line, code}` for code after the last one.
  def steps(start, lines) do
    {steps, pending} =
      lines
      |> Enum.with_index(start)
      |> Enum.reduce({[], []}, fn {line, n}, {steps, pending} ->
        case String.split(line, "#=>", parts: 2) do
          [code, expected] ->
            code = Enum.reverse([code | pending]) |> Enum.join("\n")
            {[{:check, n, code, String.trim(expected)} | steps], []}

          [code] ->
            {steps, [code | pending]}
        end
      end)

    rest = pending |> Enum.reverse() |> Enum.join("\n")
    steps = if String.trim(rest) == "", do: steps, else: [{:run, start, rest} | steps]
    Enum.reverse(steps)
  end

  def not_run?([first | _]), do: first =~ ~r/^\s*#.*not run/
  def not_run?([]), do: false

  def run({:run, _line, code}, binding) do
    {_value, binding} = Code.eval_string(code, binding)
    binding
  end

  def run({:check, line, code, expected}, binding) do
    {value, binding} = Code.eval_string(code, binding)

    if String.starts_with?(expected, "#") do
      # `#HRW.Ring<...>`: what iex prints.
      assert inspect(value) == expected, "line #{line}: #{inspect(value)}"
    else
      {want, _} = Code.eval_string(expected, binding)
      assert value === want, "line #{line}: got #{inspect(value)}, the doc says #{expected}"
    end

    binding
  end
end

defmodule HRW.DocsTest do
  @moduledoc """
  The README's and docs/MIGRATING.md's ```elixir blocks run as shown.

  A block runs top to bottom in one binding, as pasted into `iex -S mix`. Each
  `expr #=> value` (the `#=>` on the expression's last line, or alone on the next
  line) is checked: the code since the previous check is evaluated and its value
  must equal `value` exactly (`===`). A value written as `#Name<...>` is compared
  with `inspect/1` of the result. A comment after the value (`#=> "c"  # why`) is
  prose. A block whose first line is a comment saying `not run` is shown, not run
  (it needs a supervision tree or a `mix.exs`), and says so to the reader.
  `HRW.Cluster`'s blocks are its own guide's to run.
  """
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent

  import HRW.DocsTest.Snippets

  @root Path.expand("../..", __DIR__)
  @docs ["README.md", "docs/MIGRATING.md"]

  for doc <- @docs, do: @external_resource(Path.join(@root, doc))

  for doc <- @docs, {start, lines} <- blocks(Path.join(@root, doc)) do
    cond do
      not_run?(lines) ->
        @tag skip: "#{doc}:#{start} is marked not run"
        test "#{doc}, the block at line #{start}, is marked not run" do
          :ok
        end

      Enum.any?(lines, &(&1 =~ "HRW.Cluster")) ->
        :ok

      true ->
        @steps steps(start, lines)
        test "#{doc}, the block at line #{start}, runs and gives every #=> value it shows" do
          Enum.reduce(@steps, [], &run/2)
        end
    end
  end

  test "the doc parser checks each #=> line and refuses a wrong value" do
    lines = [
      ~s|x = 1 + 1|,
      ~s|x * 2               #=> 4|,
      ~s|Enum.map([x], &inspect/1)|,
      ~s|#=> ["2"]  # a comment after the value|,
      ~s|HRW.Ring.new(["a"]) #=> #HRW.Ring<1 node>|
    ]

    assert [
             {:check, 11, "x = 1 + 1\nx * 2               ", "4"},
             {:check, 13, "Enum.map([x], &inspect/1)\n", ~s|["2"]  # a comment after the value|},
             {:check, 14, ~s|HRW.Ring.new(["a"]) |, "#HRW.Ring<1 node>"}
           ] = steps = steps(10, lines)

    assert Enum.reduce(steps, [], &run/2)[:x] == 2

    assert_raise ExUnit.AssertionError, ~r/line 1: got 2, the doc says 2.0/, fn ->
      run({:check, 1, "1 + 1", "2.0"}, [])
    end
  end
end
