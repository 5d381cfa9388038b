defmodule HRW.Weighted do
  @moduledoc """
  Weighted rendezvous: a node of weight `w` owns a share `w / Σw` of the keys.

  Nodes are `{node, weight}` tuples with positive numeric weights (integers or
  floats). Use it with lists, rings and skeletons:

      HRW.owner(key, [{"big", 4}, {"small", 1}], scorer: %HRW.Weighted{})

  Owners are always the bare node, never the tuple. Scoring follows the logarithmic
  method (cost `-ln(u) / w`, lowest wins) over a 53-bit uniform drawn from N3, with
  `ln` computed from basic IEEE-754 operations only, so the same weighted owner comes
  out on every platform. Equal weights give exactly the unweighted owners. Changing
  one node's weight moves keys only to or from that node. A node listed twice
  competes with the larger of its weights.

  With a `hash_fn`, scoring runs in Elixir with hrw 0.2.1's formula
  (`(hash / 0x7FFFFFF) ** (1 / weight)`), for migration.
  """
  @behaviour HRW.Scorer

  alias HRW.Native

  import Bitwise

  defstruct [:hash_fn]

  @type t :: %__MODULE__{hash_fn: (term() -> integer()) | nil}

  @phash2_max 0x7FFFFFF

  @doc """
  Scores the weighted node `{node, weight}` for `key`; the highest score wins.

  Natively (no `hash_fn`) the score is minus the cost `-ln(u) / weight`.

  ## Examples

      iex> s = HRW.Weighted.score(%HRW.Weighted{}, "key", {"node", 2})
      iex> s < 0
      true
      iex> HRW.Weighted.score(%HRW.Weighted{hash_fn: fn _ -> 0x7FFFFFF end}, "key", {"node", 2})
      1.0
  """
  @impl HRW.Scorer
  @spec score(t(), term(), {term(), number()}) :: float()
  def score(%__MODULE__{hash_fn: nil}, key, entry) do
    Native.weighted_score(key, entry)
  end

  def score(%__MODULE__{hash_fn: hash_fn}, key, {node, weight})
      when is_number(weight) and weight > 0 do
    normalized = (hash_fn.({key, node}) &&& @phash2_max) / @phash2_max
    :math.pow(normalized, exponent(weight))
  end

  def score(%__MODULE__{}, _key, entry) do
    raise ArgumentError,
          "weighted nodes must be {node, weight} tuples with a positive number as weight, " <>
            "got: #{HRW.brief(entry)}"
  end

  # `1 / weight`, saturated where it leaves the float range: the limits of
  # `normalized ** (1 / weight)` as the exponent grows (a tiny weight) or shrinks (an
  # integer weight too large for a float).
  defp exponent(weight) do
    1 / weight
  rescue
    ArithmeticError -> if weight < 1, do: 1.7976931348623157e308, else: 0.0
  end
end
