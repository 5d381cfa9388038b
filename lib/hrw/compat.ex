defmodule HRW.Compat do
  @moduledoc false
  # hrw 0.2.1's semantics for scorers that run in Elixir (a custom `hash_fn` or a
  # user module implementing `HRW.Scorer`): sort and deduplicate the nodes, score
  # each, keep the first highest score. Slow by design; it exists for migration.

  @spec owner(term(), [term()], struct()) :: term()
  def owner(key, nodes, %mod{} = scorer) do
    nodes
    |> prepare()
    |> Enum.max_by(&mod.score(scorer, key, &1))
    |> unwrap(scorer)
  end

  @spec owners(term(), [term()], non_neg_integer(), struct()) :: [term()]
  def owners(key, nodes, count, %mod{} = scorer) do
    nodes
    |> prepare()
    |> Enum.sort_by(&mod.score(scorer, key, &1), :desc)
    |> Enum.take(count)
    |> Enum.map(&unwrap(&1, scorer))
  end

  defp prepare(nodes), do: nodes |> Enum.sort() |> Enum.dedup()

  defp unwrap({node, _weight}, %HRW.Weighted{}), do: node
  defp unwrap(node, _scorer), do: node
end
