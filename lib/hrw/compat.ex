defmodule HRW.Compat do
  @moduledoc false
  # hrw 0.2.1's semantics for scorers that run in Elixir (a custom `hash_fn` or a
  # user module implementing `HRW.Scorer`): sort and deduplicate the nodes, score
  # each, keep the first highest score. Slow by design; it exists for migration.
  #
  # Callers: `HRW` for a list with a checked Elixir scorer, and `HRW.Prepared` for a
  # skeleton without a resource, whose `:scorer` field is checked here: a skeleton
  # built by `HRW.build/2` with a native scorer always has a resource, so a native
  # or malformed scorer there means the struct was changed by hand.

  @spec owner(term(), [term()], struct()) :: term()
  def owner(key, nodes, scorer) do
    %mod{} = scorer!(scorer)

    nodes
    |> prepare()
    |> Enum.max_by(&mod.score(scorer, key, &1))
    |> unwrap(scorer)
  end

  @spec owners(term(), [term()], non_neg_integer(), struct()) :: [term()]
  def owners(key, nodes, count, scorer) do
    %mod{} = scorer!(scorer)

    nodes
    |> prepare()
    |> Enum.sort_by(&mod.score(scorer, key, &1), :desc)
    |> Enum.take(count)
    |> Enum.map(&unwrap(&1, scorer))
  end

  defp scorer!(%HRW{hash_fn: nil} = native), do: raise(ArgumentError, forged(native))
  defp scorer!(%HRW.Weighted{hash_fn: nil} = native), do: raise(ArgumentError, forged(native))

  defp scorer!(scorer) do
    HRW.Options.scorer_struct!(scorer, "scorer")
  rescue
    ArgumentError -> reraise ArgumentError, forged(scorer), __STACKTRACE__
  end

  defp forged(scorer) do
    "an HRW.Skeleton without a resource is scored in Elixir, but its :scorer field " <>
      "holds #{HRW.Brief.brief(scorer)}, no scorer that runs in Elixir (a %HRW{} or " <>
      "%HRW.Weighted{} with a hash_fn of arity 1, or a struct whose module implements " <>
      "HRW.Scorer.score/3): the struct was changed by hand, build it with HRW.build/2"
  end

  defp prepare(nodes), do: nodes |> Enum.sort() |> Enum.dedup()

  defp unwrap({node, _weight}, %HRW.Weighted{}), do: node
  defp unwrap(node, _scorer), do: node
end
