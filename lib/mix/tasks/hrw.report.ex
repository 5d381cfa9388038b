defmodule Mix.Tasks.Hrw.Report do
  @shortdoc "Reports hrw's placements, fairness, churn and lookup speed, with an SVG"
  @moduledoc """
  The project's main job: evidence that hrw places keys fairly, moves few keys under
  churn, and answers fast.

      mix hrw.report [--keys 100000] [--large] [--out hrw-report]

  For 10, 100, 1000 and 10,000 nodes (and 100,000 with `--large`):

    * owners of sample keys;
    * load per node for `--keys` keys, for the list (a ring gives the same owners)
      and the skeleton: min, max, standard deviation as % of the mean, and
      Pearson's χ² against the bound (N−1) + 8·√(2(N−1));
    * keys moved when one node joins and when one leaves, against the ideal 1/(N+1);
    * median lookup times of `HRW.owner/2` on a list, a ring and a skeleton, next to
      hrw 0.2.1's pure-Elixir algorithm (sort, dedup, `:erlang.phash2` max), all
      in the same run with varying keys;
    * the same by key type (binary, integer, tuple) at 10 and 10,000 nodes:
      `HRW.term_id/1` next to `:erlang.phash2/1`, and `HRW.owner/2` on a ring and a
      skeleton next to a libring-style ring (libring's algorithm written in the
      report: 128 points per node, `phash2`, a `:gb_trees` successor).

  It writes `report.svg` (load histogram and movement against node count) into
  `--out` and prints its path. Timings are medians of repeated batches; compare
  ratios, not absolute times across runs. Every ratio is theirs / ours (above 1:
  hrw faster): "vs hrw" is hrw 0.2.1 / list, "librng/sk" libring-style / skeleton.
  """
  use Mix.Task

  alias HRW.Report.{SVG, Yardsticks}

  @switches [keys: :integer, large: :boolean, out: :string, help: :boolean]

  @impl Mix.Task
  def run(args) do
    {opts, _, _} = OptionParser.parse(args, strict: @switches)

    if opts[:help] do
      Mix.shell().info(@moduledoc)
    else
      Mix.Task.run("app.start")
      keys = Keyword.get(opts, :keys, 100_000)
      sizes = if opts[:large], do: [10, 100, 1000, 10_000, 100_000], else: [10, 100, 1000, 10_000]
      report(keys, sizes, Keyword.get(opts, :out, "hrw-report"))
    end
  end

  defp report(key_count, sizes, out) do
    keys = Enum.map(1..key_count, &"key-#{&1}")
    _ = sample_owners()
    loads = load_section(keys, sizes)
    movement = movement_section(keys, sizes)
    _ = speed_section(sizes)
    _ = key_type_section()

    File.mkdir_p!(out)
    path = Path.join(out, "report.svg")
    File.write!(path, SVG.render(loads, movement, key_count))
    Mix.shell().info("\nWrote #{Path.expand(path)}")
  end

  defp sample_owners do
    section("Owners of sample keys over cache-1 .. cache-5")
    nodes = Enum.map(1..5, &"cache-#{&1}")
    skeleton = HRW.build(nodes)

    for key <- ["user:42", "user:43", "session:9f2c", {:tenant, 7}, 12_345] do
      line(
        "#{pad(inspect(key), 16)} -> #{HRW.owner(key, nodes)}   top 3: " <>
          "#{inspect(HRW.owners(key, nodes, 3))}   skeleton: #{HRW.owner(key, skeleton)}"
      )
    end
  end

  defp load_section(keys, sizes) do
    section("Load per node, #{length(keys)} keys \"key-1\"..., nodes \"node-1\"...")
    line(row(["nodes", "structure", "min", "max", "stddev %", "chi2", "bound", "fair"]))

    for n <- sizes, {name, target} <- structures(node_names(n)), into: %{} do
      progress("  counting #{name} of #{n} nodes")
      loads = loads(keys, target, n)
      mean = length(keys) / n
      sq = fn x -> (x - mean) * (x - mean) end
      sd = :math.sqrt(Enum.sum(Enum.map(loads, sq)) / n)
      chi = Enum.sum(Enum.map(loads, &(sq.(&1) / mean)))
      bound = n - 1 + 8 * :math.sqrt(2 * (n - 1))
      fair = if chi <= bound, do: "yes", else: "NO"
      cells = [n, name, Enum.min(loads), Enum.max(loads), fmt(100 * sd / mean), fmt(chi)]
      line(row(cells ++ [fmt(bound), fair]))
      {{name, n}, loads}
    end
  end

  defp movement_section(keys, sizes) do
    section("Keys moved by one join / one leave (#{length(keys)} keys), ideal 1/(N+1)")
    line(row(["nodes", "structure", "join %", "leave %", "ideal %", "join xN", "leave xN"]))

    for n <- sizes, {name, build} <- builders() do
      progress("  churning #{name} of #{n} nodes")
      nodes = node_names(n)
      before = build.(nodes)
      joined = HRW.moved_fraction(keys, before, build.(["node-new" | nodes]))
      left = HRW.moved_fraction(keys, before, build.(List.delete(nodes, "node-#{div(n, 2)}")))
      cells = [n, name, fmt(100 * joined), fmt(100 * left), fmt(100 / (n + 1))]
      line(row(cells ++ [fmt(joined * n), fmt(left * n)]))
      %{structure: name, nodes: n, join: joined, leave: left}
    end
  end

  defp speed_section(sizes) do
    section("Lookup time, median ns per HRW.owner call (varying keys)")
    line(row(["nodes", "list", "ring", "skeleton", "hrw 0.2.1", "list/node", "vs hrw"]))

    for n <- Enum.take(sizes, 4) do
      progress("  timing #{n} nodes")
      nodes = node_names(n)
      ring = HRW.Ring.new(nodes)
      skeleton = HRW.build(nodes)
      list = median_ns(&HRW.owner(&1, nodes), n)
      ring_ns = median_ns(&HRW.owner(&1, ring), 1)
      skeleton_ns = median_ns(&HRW.owner(&1, skeleton), 1)
      theirs = median_ns(&phash2_owner(&1, nodes), n * 10)
      cells = [n, fmt(list), fmt(ring_ns), fmt(skeleton_ns), fmt(theirs), fmt(list / n)]
      line(row(cells ++ [fmt(theirs / list) <> "x"]))
    end
  end

  defp key_types do
    [{"binary", &"k#{&1}"}, {"integer", &(&1 * 104_729)}, {"tuple", &{:user, &1}}]
  end

  defp key_type_section do
    section("Lookup time by key type, median ns per call (varying keys)")

    line(
      row(["nodes", "key", "phash2", "term_id", "ring", "skeleton", "libring-st", "librng/sk"])
    )

    for n <- [10, 10_000] do
      progress("  timing key types at #{n} nodes")
      nodes = node_names(n)
      ring = HRW.Ring.new(nodes)
      skeleton = HRW.build(nodes)
      libring = Yardsticks.libring_style(nodes)

      for {type, key} <- key_types() do
        phash2 = median_ns(&:erlang.phash2/1, 1, key)
        term_id = median_ns(&HRW.term_id/1, 1, key)
        ring_ns = median_ns(&HRW.owner(&1, ring), 1, key)
        skeleton_ns = median_ns(&HRW.owner(&1, skeleton), 1, key)
        libring_ns = median_ns(&Yardsticks.libring_style_owner(libring, &1), 1, key)
        cells = [n, type, fmt(phash2), fmt(term_id), fmt(ring_ns), fmt(skeleton_ns)]
        line(row(cells ++ [fmt(libring_ns), fmt(libring_ns / skeleton_ns) <> "x"]))
      end
    end
  end

  defp structures(nodes), do: [{"list", nodes}, {"skeleton", HRW.build(nodes)}]

  defp builders, do: [{"list", & &1}, {"skeleton", &HRW.build/1}]

  defp loads(keys, target, n) do
    counts = keys |> HRW.owner_batch(target) |> Enum.frequencies()
    Enum.map(1..n, &Map.get(counts, "node-#{&1}", 0))
  end

  # hrw 0.2.1's stateless algorithm, written here as the yardstick.
  defp phash2_owner(key, nodes) do
    nodes |> Enum.sort() |> Enum.dedup() |> Enum.max_by(&:erlang.phash2({key, &1}))
  end

  # Median over 7 batches of the per-call time. A batch holds 200,000 / `weight`
  # calls (20 to 20,000), so a costlier call (`weight`) gets fewer repetitions and
  # every figure takes a similar time; the keys are `key.(1)`, `key.(2)`, ...
  defp median_ns(fun, weight, key \\ &"k#{&1}") do
    per_batch = max(20, min(20_000, div(2_000_000, weight * 10)))
    keys = Enum.map(1..per_batch, key)
    Enum.each(keys, fun)

    for _ <- 1..7 do
      {us, _} = :timer.tc(fn -> Enum.each(keys, fun) end)
      us * 1000 / per_batch
    end
    |> Enum.sort()
    |> Enum.at(3)
  end

  defp node_names(n), do: Enum.map(1..n, &"node-#{&1}")

  defp fmt(x) when is_float(x) and x >= 100, do: :erlang.float_to_binary(x, decimals: 0)
  defp fmt(x) when is_float(x), do: :erlang.float_to_binary(x, decimals: 2)
  defp fmt(x), do: to_string(x)

  defp row(cells), do: cells |> Enum.map(&pad(to_string(&1), 10)) |> Enum.join(" ")
  defp pad(s, w), do: String.pad_leading(s, w)
  defp section(title), do: Mix.shell().info("\n## " <> title)
  defp line(text), do: Mix.shell().info(text)

  # Progress goes to stderr, and only when stderr is a terminal: redirected into a
  # file or a pipe (alone or with stdout, `2>&1`), the report holds its tables only.
  defp progress(text) do
    if stderr_terminal?(), do: IO.write(:stderr, String.pad_trailing(text, 40) <> "\r")
    :ok
  end

  defp stderr_terminal? do
    case Process.get(:hrw_report_stderr_terminal) do
      nil ->
        terminal? = terminal?()
        Process.put(:hrw_report_stderr_terminal, terminal?)
        terminal?

      terminal? ->
        terminal?
    end
  end

  # OTP 26+ answers :io.columns/1 for standard_error only on a terminal; OTP 25
  # never does, so there look at what file descriptor 2 is (Linux's /proc). Where
  # neither tells, no progress is printed.
  defp terminal? do
    case :io.columns(:standard_error) do
      {:ok, _} ->
        true

      _ ->
        case File.read_link("/proc/self/fd/2") do
          {:ok, "/dev/pts/" <> _} -> true
          {:ok, "/dev/tty" <> _} -> true
          {:ok, "/dev/console"} -> true
          _ -> false
        end
    end
  end
end
