defmodule HRW.Report.Yardsticks do
  @moduledoc false
  # What `mix hrw.report` and the benchmark scripts compare hrw with, written here
  # (not other projects' code), so they need no package: libring's algorithm, a
  # ring of 128 points per node on a 2^32 circle, each `phash2({node, i}, 2^32)`, in
  # a `:gb_trees`; a key's owner is the node of the first point at or after
  # `phash2(key, 2^32)`, wrapping to the smallest. (hrw 0.2.1's bounded greedy is
  # `HRW.Bounded.assignments/3` with `hash_fn: &:erlang.phash2/1`.)

  @circle 4_294_967_296

  @doc "A libring-style ring of `nodes`."
  @spec libring_style([term()]) :: :gb_trees.tree()
  def libring_style(nodes) do
    nodes
    |> Enum.flat_map(fn node ->
      for i <- 0..127, do: {:erlang.phash2({node, i}, @circle), node}
    end)
    |> Enum.sort()
    |> Enum.dedup_by(&elem(&1, 0))
    |> :gb_trees.from_orddict()
  end

  @doc "The owner of `key` on a libring-style ring."
  @spec libring_style_owner(:gb_trees.tree(), term()) :: term()
  def libring_style_owner(tree, key) do
    case :gb_trees.next(:gb_trees.iterator_from(:erlang.phash2(key, @circle), tree)) do
      {_point, node, _iter} -> node
      :none -> elem(:gb_trees.smallest(tree), 1)
    end
  end
end
