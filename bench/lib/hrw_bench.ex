defmodule HRWBench do
  @moduledoc false
  # What the scripts share: node and key names, settings from the environment,
  # the optional hrw 0.2.1 and a summary of medians with ratios.

  @doc "Node counts to run: BENCH_SIZES=10,100 or the default 10, 100, 1k, 10k."
  def sizes, do: env_list("BENCH_SIZES", [10, 100, 1_000, 10_000])

  @doc "Benchee options: BENCH_TIME and BENCH_WARMUP seconds (2 and 1), then `extra`."
  def options(extra) do
    [
      time: env_number("BENCH_TIME", 2),
      warmup: env_number("BENCH_WARMUP", 1),
      print: [fast_warning: false]
    ] ++ extra
  end

  def nodes(n), do: Enum.map(1..n, &"node-#{&1}")
  def keys(n), do: Enum.map(1..n, &"key-#{&1}")

  @doc """
  Key types of `lookup.exs`: BENCH_KEY_TYPES=binary,integer,tuple (the default: all
  three). `binary` is "key-<i>", `integer` is i × 104,729, `tuple` is {:user, i}.
  """
  def key_types do
    case System.get_env("BENCH_KEY_TYPES") do
      value when value in [nil, ""] -> ["binary", "integer", "tuple"]
      value -> value |> String.split(",", trim: true) |> Enum.map(&String.trim/1)
    end
  end

  @doc "`n` distinct keys of the key type `type` (see `key_types/0`)."
  def keys(n, "binary"), do: keys(n)
  def keys(n, "integer"), do: Enum.map(1..n, &(&1 * 104_729))
  def keys(n, "tuple"), do: Enum.map(1..n, &{:user, &1})

  def keys(_n, type),
    do: raise(ArgumentError, "unknown key type #{inspect(type)}: binary, integer or tuple")

  @doc """
  What the lookup benchmarks (`lookup.exs`, `batch.exs`) compare at `n` nodes: the
  node list, an `HRW.Ring`, a skeleton, a libring `HashRing`, the libring-style
  ring, an ExHashRing ring process and, when `old` (`old_hrw/0`) is loaded, hrw
  0.2.1's skeleton (else `nil`).
  """
  def targets(n, old) do
    nodes = nodes(n)
    {:ok, ex_hash_ring} = ExHashRing.Ring.start_link(nodes: nodes)

    %{
      nodes: nodes,
      ring: HRW.Ring.new(nodes),
      skeleton: HRW.build(nodes),
      libring: HashRing.add_nodes(HashRing.new(), nodes),
      libring_style: libring_style(nodes),
      ex_hash_ring: ex_hash_ring,
      old_skeleton: old && old.build(nodes, [])
    }
  end

  @doc "Benchee inputs: `targets/2` at every size of `sizes/0`, named \"<n> nodes\"."
  def inputs(old) do
    IO.puts("building the rings for #{inspect(sizes(), charlists: :as_lists)} nodes...")
    for n <- sizes(), do: {"#{n} nodes", targets(n, old)}
  end

  @doc "A libring-style ring (the yardstick `mix hrw.report` uses; no package)."
  defdelegate libring_style(nodes), to: HRW.Report.Yardsticks

  @doc "The owner of `key` on a libring-style ring."
  defdelegate libring_style_owner(tree, key), to: HRW.Report.Yardsticks

  @doc """
  hrw 0.2.1 under a renamed module (it is the app :hrw with the module HRW, like
  this library), or nil with a note. OLD_HRW_MODULE names it; default OldHRW.
  """
  def old_hrw do
    module = Module.concat([System.get_env("OLD_HRW_MODULE", "OldHRW")])

    if Code.ensure_loaded?(module) and function_exported?(module, :build, 2) do
      module
    else
      IO.puts(
        "note: #{inspect(module)} is not loaded, so hrw 0.2.1 is left out " <>
          "(see bench/README.md, OLD_HRW_PATH)"
      )

      nil
    end
  end

  @doc """
  Varying keys: returns `{next, per_call}` where each `next.()` gives the next
  `per_call` keys of a cycle of `count` distinct keys of the key type `type`
  (`keys/2`: "key-1".."key-<count>" for binaries).
  A job looks up one such chunk; its median divided by `per_call` is the time
  per key, without the timer's cost for every single lookup.
  """
  def key_cycle(count \\ 10_000, per_call \\ 100, type \\ "binary") do
    chunks = count |> keys(type) |> Enum.chunk_every(per_call) |> List.to_tuple()
    size = tuple_size(chunks)
    counter = :atomics.new(1, [])
    {fn -> elem(chunks, rem(:atomics.add_get(counter, 1, 1), size)) end, per_call}
  end

  @doc "Calls `fun` on every key of the list; the loop of a varying-key job."
  def each([key | rest], fun) do
    fun.(key)
    each(rest, fun)
  end

  def each([], _fun), do: :ok

  @doc """
  Prints the median of every job for every input (divided by `per`, e.g. the keys
  per call), then for each of `ours` against each of `theirs` the ratio
  their median / our median: above 1 hrw is that many times faster.

  A median that rests on fewer than 10 samples says so, "(n = k)", and so does
  every ratio computed from it (the smaller count of the two). `skipped` lists
  `{job, reason}`: jobs left out of this suite, printed as "skipped" with the
  reason below the table.
  """
  def summary(suite, title, ours, theirs, per \\ 1, skipped \\ []) do
    medians =
      Map.new(suite.scenarios, fn s ->
        {{s.job_name, s.input_name}, s.run_time_data.statistics.median / per}
      end)

    samples =
      Map.new(suite.scenarios, fn s ->
        {{s.job_name, s.input_name}, s.run_time_data.statistics.sample_size}
      end)

    inputs = suite.scenarios |> Enum.map(& &1.input_name) |> Enum.uniq()
    jobs = suite.scenarios |> Enum.map(& &1.job_name) |> Enum.uniq()
    skipped = Enum.reject(skipped, fn {job, _} -> job in jobs end)
    present = fn names -> Enum.filter(names, &(&1 in jobs)) end

    IO.puts("\n## #{title}: medians#{if per == 1, do: "", else: " per key"}\n")
    row(["case" | inputs])
    row(["---" | Enum.map(inputs, fn _ -> "---:" end)])

    for job <- jobs do
      cells = Enum.map(inputs, &(format_time(medians[{job, &1}]) <> few(samples[{job, &1}])))
      row([job | cells])
    end

    for {job, _} <- skipped, do: row([job | Enum.map(inputs, fn _ -> "skipped" end)])

    IO.puts("")
    for {job, reason} <- skipped, do: IO.puts("#{job} skipped: #{reason}")
    IO.puts("(n = k: a median of only k samples; no mark: 10 or more)")

    IO.puts("\n## #{title}: their median / our median (> 1: hrw faster)\n")
    row(["ours vs theirs" | inputs])
    row(["---" | Enum.map(inputs, fn _ -> "---:" end)])

    for our <- present.(ours), their <- present.(theirs) do
      ratios =
        Enum.map(inputs, fn input ->
          count = min_count(samples[{their, input}], samples[{our, input}])
          format_ratio(medians[{their, input}], medians[{our, input}]) <> few(count)
        end)

      row(["#{our} vs #{their}" | ratios])
    end

    suite
  end

  defp min_count(a, b) when is_integer(a) and is_integer(b), do: min(a, b)
  defp min_count(_a, _b), do: nil

  defp few(count) when is_integer(count) and count < 10, do: " (n = #{count})"
  defp few(_count), do: ""

  defp row(cells), do: IO.puts("| " <> Enum.join(cells, " | ") <> " |")

  defp format_time(nil), do: "-"
  defp format_time(ns) when ns < 1_000, do: "#{Float.round(ns / 1, 1)} ns"
  defp format_time(ns) when ns < 1_000_000, do: "#{Float.round(ns / 1_000, 2)} µs"
  defp format_time(ns) when ns < 1_000_000_000, do: "#{Float.round(ns / 1_000_000, 2)} ms"
  defp format_time(ns), do: "#{Float.round(ns / 1_000_000_000, 2)} s"

  defp format_ratio(theirs, ours) when is_number(theirs) and is_number(ours) and ours > 0 do
    ratio = theirs / ours

    digits =
      cond do
        ratio >= 10 -> 0
        ratio >= 0.1 -> 2
        ratio >= 0.01 -> 3
        true -> 4
      end

    "#{:erlang.float_to_binary(ratio, decimals: digits)}×"
  end

  defp format_ratio(_theirs, _ours), do: "-"

  defp env_list(var, default) do
    case System.get_env(var) do
      value when value in [nil, ""] ->
        default

      value ->
        value |> String.split(",", trim: true) |> Enum.map(&String.to_integer(String.trim(&1)))
    end
  end

  defp env_number(var, default) do
    case System.get_env(var) do
      value when value in [nil, ""] ->
        default

      value ->
        case Float.parse(value) do
          {number, ""} -> number
          _ -> raise ArgumentError, "#{var} must be a number of seconds, got: #{inspect(value)}"
        end
    end
  end
end
