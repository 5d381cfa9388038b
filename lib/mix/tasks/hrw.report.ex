defmodule Mix.Tasks.Hrw.Report do
  @shortdoc "Reports hrw's placements, fairness, churn and lookup speed"
  @moduledoc """
  The project's main job: evidence that hrw places keys fairly, moves few keys under
  churn, and answers fast.

      mix hrw.report [--keys 100000] [--large]

  Sections:

    * owners of sample keys;
    * load per node for `--keys` keys over 10, 100, 1000 and 10,000 nodes (100,000
      too with `--large`): min, max, standard deviation as % of the mean, and
      Pearson's χ² against the bound (N−1) + 8·√(2(N−1));
    * keys moved when one node joins and when one leaves, against the ideal 1/(N+1);
    * median lookup time of `HRW.owner/2` on a list next to hrw 0.2.1's pure-Elixir
      algorithm (sort, dedup, `:erlang.phash2` max) in the same run, varying keys.

  Medians of repeated timed batches; the machine's noise shows in the spread, so
  compare the ratios rather than absolute times across runs.
  """
  use Mix.Task

  @switches [keys: :integer, large: :boolean, help: :boolean]

  @impl Mix.Task
  def run(args) do
    {opts, _, _} = OptionParser.parse(args, strict: @switches)

    if opts[:help] do
      Mix.shell().info(@moduledoc)
    else
      Mix.Task.run("app.start")
      keys = Keyword.get(opts, :keys, 100_000)
      sizes = if opts[:large], do: [10, 100, 1000, 10_000, 100_000], else: [10, 100, 1000, 10_000]
      report(keys, sizes)
    end
  end

  defp report(keys, sizes) do
    section("Owners of sample keys over cache-1 .. cache-5")
    nodes = Enum.map(1..5, &"cache-#{&1}")

    for key <- ["user:42", "user:43", "session:9f2c", {:tenant, 7}, 12_345] do
      line(
        "#{pad(inspect(key), 16)} -> #{HRW.owner(key, nodes)}   top 3: " <>
          inspect(HRW.owners(key, nodes, 3))
      )
    end

    section("Load per node, #{keys} keys \"key-i\", nodes \"node-i\"")
    line(row(["nodes", "min", "max", "stddev %", "chi2", "bound", "fair"]))
    key_list = Enum.map(1..keys, &"key-#{&1}")

    for n <- sizes do
      progress("  counting #{n} nodes ...")
      nodes = node_names(n)
      counts = Enum.frequencies(Enum.map(key_list, &HRW.owner(&1, nodes)))
      loads = Enum.map(nodes, &Map.get(counts, &1, 0))
      mean = keys / n
      sd = :math.sqrt(Enum.sum(Enum.map(loads, &((&1 - mean) ** 2))) / n)
      chi = Enum.sum(Enum.map(loads, &((&1 - mean) ** 2 / mean)))
      bound = n - 1 + 8 * :math.sqrt(2 * (n - 1))

      line(
        row(
          [n, Enum.min(loads), Enum.max(loads), fmt(100 * sd / mean), fmt(chi), fmt(bound)] ++
            [if(chi <= bound, do: "yes", else: "NO")]
        )
      )
    end

    section("Keys moved by one join / one leave (#{keys} keys), ideal 1/(N+1)")
    line(row(["nodes", "join %", "leave %", "ideal %"]))

    for n <- sizes do
      progress("  churning #{n} nodes ...")
      nodes = node_names(n)
      before = Enum.map(key_list, &HRW.owner(&1, nodes))
      joined = Enum.map(key_list, &HRW.owner(&1, ["node-new" | nodes]))
      left = Enum.map(key_list, &HRW.owner(&1, tl(nodes)))

      line(
        row(
          [n, pct(changed(before, joined), keys), pct(changed(before, left), keys)] ++
            [fmt(100 / (n + 1))]
        )
      )
    end

    section("Lookup time, median ns per call (varying keys)")
    line(row(["nodes", "HRW.owner", "ns/node", "hrw 0.2.1", "speed-up"]))

    for n <- Enum.take(sizes, 4) do
      nodes = node_names(n)
      ours = median_ns(&HRW.owner(&1, nodes), n)
      theirs = median_ns(&phash2_owner(&1, nodes), n)
      line(row([n, fmt(ours), fmt(ours / n), fmt(theirs), fmt(theirs / ours) <> "x"]))
    end
  end

  # hrw 0.2.1's stateless algorithm, written here as the yardstick.
  defp phash2_owner(key, nodes) do
    nodes |> Enum.sort() |> Enum.dedup() |> Enum.max_by(&:erlang.phash2({key, &1}))
  end

  # Median over 7 batches of the per-call time; batches sized to ~20 ms of work.
  defp median_ns(fun, n) do
    per_batch = max(20, div(2_000_000, n * 10))
    keys = Enum.map(1..per_batch, &"k#{&1}")
    Enum.each(keys, fun)

    for _ <- 1..7 do
      {us, _} = :timer.tc(fn -> Enum.each(keys, fun) end)
      us * 1000 / per_batch
    end
    |> Enum.sort()
    |> Enum.at(3)
  end

  defp changed(a, b), do: Enum.zip(a, b) |> Enum.count(fn {x, y} -> x != y end)
  defp node_names(n), do: Enum.map(0..(n - 1), &"node-#{&1}")
  defp pct(count, total), do: fmt(100 * count / total)

  defp fmt(x) when is_float(x) and x >= 100, do: :erlang.float_to_binary(x, decimals: 0)
  defp fmt(x) when is_float(x), do: :erlang.float_to_binary(x, decimals: 2)
  defp fmt(x), do: to_string(x)

  defp row(cells), do: cells |> Enum.map(&pad(to_string(&1), 11)) |> Enum.join(" ")
  defp pad(s, w), do: String.pad_leading(s, w)
  defp section(title), do: Mix.shell().info("\n## " <> title)
  defp line(text), do: Mix.shell().info(text)
  defp progress(text), do: IO.write(:stderr, text <> "\r")
end
