defmodule HRW.Report.SVG do
  @moduledoc false
  # The picture of `mix hrw.report` (lib/mix/tasks/hrw.report.ex): hand-written SVG,
  # no external tools.
  # Left: histogram of keys per node at the largest size up to 1000 nodes, list and
  # skeleton. Right: keys moved by one join or leave, as a multiple of the ideal 1/N,
  # against the node count (log scale).

  @w 1020
  @h 440
  @panel_w 430
  @panel_h 320
  @colors %{"list" => "#1f77b4", "skeleton" => "#d62728"}

  @spec render(%{{String.t(), pos_integer()} => [non_neg_integer()]}, [map()], pos_integer()) ::
          String.t()
  def render(loads, movement, key_count) do
    n = loads |> Map.keys() |> Enum.map(&elem(&1, 1)) |> Enum.filter(&(&1 <= 1000)) |> Enum.max()

    [
      ~s(<svg xmlns="http://www.w3.org/2000/svg" width="#{@w}" height="#{@h}" ),
      ~s(viewBox="0 0 #{@w} #{@h}" font-family="sans-serif" font-size="12">\n),
      ~s(<rect width="100%" height="100%" fill="white"/>\n),
      text(@w / 2, 24, "hrw: fairness and churn (#{key_count} keys)", 16, "middle"),
      histogram(loads, n, key_count, 60, 60),
      movement(movement, 560, 60),
      "</svg>\n"
    ]
    |> IO.iodata_to_binary()
  end

  defp histogram(loads, n, key_count, x0, y0) do
    series = for name <- ["list", "skeleton"], do: {name, Map.fetch!(loads, {name, n})}
    all = Enum.flat_map(series, &elem(&1, 1))
    {lo, hi} = {Enum.min(all), Enum.max(all)}
    bins = 24
    width = max(1, ceil((hi - lo + 1) / bins))
    counts = for {name, l} <- series, do: {name, Enum.frequencies_by(l, &div(&1 - lo, width))}
    ymax = counts |> Enum.flat_map(fn {_, c} -> Map.values(c) end) |> Enum.max()
    bar = @panel_w / bins / 2

    bars =
      for {{name, c}, s} <- Enum.with_index(counts), b <- 0..(bins - 1), v = Map.get(c, b, 0) do
        h = v / ymax * @panel_h
        x = x0 + b * 2 * bar + s * bar
        rect(x, y0 + @panel_h - h, bar - 1, h, @colors[name])
      end

    mean_x = x0 + (key_count / n - lo) / (width * bins) * @panel_w

    [
      text(x0 + @panel_w / 2, y0 - 14, "Keys per node, #{n} nodes", 14, "middle"),
      axes(x0, y0),
      bars,
      line(mean_x, y0, mean_x, y0 + @panel_h, "#555", "4 3"),
      text(mean_x + 4, y0 + 12, "mean", 11, "start"),
      text(x0, y0 + @panel_h + 18, to_string(lo), 11, "start"),
      text(x0 + @panel_w, y0 + @panel_h + 18, to_string(lo + width * bins), 11, "end"),
      text(x0 + @panel_w / 2, y0 + @panel_h + 34, "keys per node", 12, "middle"),
      text(x0 - 8, y0 + 4, to_string(ymax), 11, "end"),
      text(x0 - 8, y0 + @panel_h, "0", 11, "end"),
      legend(x0 + @panel_w - 110, y0 + 8, [{"list / ring", "list"}, {"skeleton", "skeleton"}])
    ]
  end

  defp movement(rows, x0, y0) do
    sizes = rows |> Enum.map(& &1.nodes) |> Enum.uniq() |> Enum.sort()
    ymax = rows |> Enum.flat_map(&[&1.join * &1.nodes, &1.leave * &1.nodes]) |> Enum.max()
    ymax = max(2, ceil(ymax + 0.5))
    {lmin, lmax} = {:math.log10(hd(sizes)), :math.log10(List.last(sizes))}
    xs = fn n -> x0 + (:math.log10(n) - lmin) / max(lmax - lmin, 1.0e-9) * @panel_w end
    ys = fn v -> y0 + @panel_h - v / ymax * @panel_h end

    series =
      for name <- ["list", "skeleton"], {kind, dash} <- [join: nil, leave: "5 3"] do
        points =
          for r <- rows,
              r.structure == name,
              do: {xs.(r.nodes), ys.(Map.fetch!(r, kind) * r.nodes)}

        [polyline(points, @colors[name], dash), Enum.map(points, &dot(&1, @colors[name]))]
      end

    grid =
      for v <- 0..ymax//max(1, div(ymax, 6)) do
        [
          line(x0, ys.(v), x0 + @panel_w, ys.(v), "#eee", nil),
          text(x0 - 8, ys.(v) + 4, "#{v}", 11, "end")
        ]
      end

    [
      text(x0 + @panel_w / 2, y0 - 14, "Keys moved by one join / leave, × N", 14, "middle"),
      grid,
      axes(x0, y0),
      line(x0, ys.(1), x0 + @panel_w, ys.(1), "#555", "4 3"),
      text(x0 + @panel_w - 4, ys.(1) - 5, "ideal 1/N", 11, "end"),
      Enum.map(sizes, &text(xs.(&1), y0 + @panel_h + 18, "#{&1}", 11, "middle")),
      text(x0 + @panel_w / 2, y0 + @panel_h + 34, "nodes (log scale)", 12, "middle"),
      series,
      legend(x0 + 10, y0 + 8, [
        {"list / ring, join", "list"},
        {"skeleton, join", "skeleton"},
        {"dashed: leave", nil}
      ])
    ]
  end

  defp legend(x, y, entries) do
    for {{label, color_key}, i} <- Enum.with_index(entries) do
      swatch = if color_key, do: rect(x, y + i * 16, 10, 10, @colors[color_key]), else: []
      [swatch, text(x + 14, y + i * 16 + 9, label, 11, "start")]
    end
  end

  defp axes(x0, y0) do
    [
      line(x0, y0, x0, y0 + @panel_h, "#333", nil),
      line(x0, y0 + @panel_h, x0 + @panel_w, y0 + @panel_h, "#333", nil)
    ]
  end

  defp rect(x, y, w, h, fill) do
    ~s(<rect x="#{f(x)}" y="#{f(y)}" width="#{f(max(w, 0))}" height="#{f(max(h, 0))}" fill="#{fill}" fill-opacity="0.8"/>\n)
  end

  defp line(x1, y1, x2, y2, color, dash) do
    dash = if dash, do: ~s( stroke-dasharray="#{dash}"), else: ""
    ~s(<line x1="#{f(x1)}" y1="#{f(y1)}" x2="#{f(x2)}" y2="#{f(y2)}" stroke="#{color}"#{dash}/>\n)
  end

  defp polyline(points, color, dash) do
    pts = Enum.map_join(points, " ", fn {x, y} -> "#{f(x)},#{f(y)}" end)
    dash = if dash, do: ~s( stroke-dasharray="#{dash}"), else: ""
    ~s(<polyline points="#{pts}" fill="none" stroke="#{color}" stroke-width="2"#{dash}/>\n)
  end

  defp dot({x, y}, color), do: ~s(<circle cx="#{f(x)}" cy="#{f(y)}" r="3" fill="#{color}"/>\n)

  defp text(x, y, s, size, anchor) do
    ~s(<text x="#{f(x)}" y="#{f(y)}" font-size="#{size}" text-anchor="#{anchor}">#{escape(s)}</text>\n)
  end

  defp escape(s), do: s |> String.replace("&", "&amp;") |> String.replace("<", "&lt;")
  defp f(x), do: :erlang.float_to_binary(x / 1, decimals: 1)
end
