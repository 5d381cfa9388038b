defmodule HRW.TestStats do
  @moduledoc false

  @doc "Pearson's χ² of observed counts against a uniform (or given) expectation."
  def chi_square(counts, nodes, keys, expected_share \\ nil) do
    n = length(nodes)

    Enum.reduce(nodes, 0.0, fn node, acc ->
      expected = keys * if(expected_share, do: expected_share.(node), else: 1 / n)
      diff = Map.get(counts, node, 0) - expected
      acc + diff * diff / expected
    end)
  end

  @doc "The acceptance bound used throughout: (N-1) + 8·sqrt(2(N-1))."
  def chi_bound(n), do: n - 1 + 8 * :math.sqrt(2 * (n - 1))

  def node_names(n), do: Enum.map(0..(n - 1), &"node-#{&1}")
end
