defmodule HRW.Scorer do
  @moduledoc """
  Behaviour for scoring strategies, as in hrw 0.2.1.

  A scorer is a struct whose module implements `score/3`; the node with the highest
  score owns the key. Pass one with the `:scorer` option of `HRW.owner/3`,
  `HRW.owners/4` or `HRW.build/2`.

  The built-in scorers run natively: `%HRW{}` (the N3 score over canonical term ids)
  and `%HRW.Weighted{}`. Any other scorer — including `%HRW{hash_fn: fun}` — runs in
  Elixir with hrw 0.2.1's semantics: nodes are sorted and deduplicated, each is
  scored, and the first highest score wins. This is the migration path from hrw:
  `scorer: %HRW{hash_fn: &:erlang.phash2/1}` gives hrw's exact placements.

  ## Example

      iex> defmodule MyScorer do
      ...>   @behaviour HRW.Scorer
      ...>   defstruct []
      ...>   @impl true
      ...>   def score(_scorer, key, node), do: :erlang.phash2({node, key})
      ...> end
      iex> HRW.owner("user:42", ["a", "b", "c"], scorer: struct(MyScorer))
      "a"
  """

  @callback score(scorer :: struct(), key :: term(), node :: term()) :: number()
end
