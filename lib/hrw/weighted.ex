defmodule HRW.Weighted do
  @moduledoc """
  Weighted rendezvous: a node of weight `w` owns a share `w / Σw` of the keys.

  Nodes are `{node, weight}` tuples; a weight is an integer or a float with
  `0 < weight <= 2 ** 53` (anything else raises `ArgumentError`, on every path). Use
  it with lists, rings and skeletons:

      HRW.owner(key, [{"big", 4}, {"small", 1}], scorer: %HRW.Weighted{})

  Owners are always the bare node, never the tuple. Scoring follows the logarithmic
  method (cost `-log2(u) / w`, lowest wins) over a 53-bit uniform drawn from N3, with
  the logarithm computed from basic IEEE-754 operations only and costs compared
  exactly, so the same weighted owner comes out on every platform, for any weights
  from the smallest positive float (`5.0e-324`) to `2 ** 53`
  (docs/HASHING.md §3). Equal weights give exactly the unweighted owners, and
  multiplying every weight by the same power of two changes nothing. Changing one
  node's weight moves keys only to or from that node. A node listed twice counts
  once: its first occurrence's term, with the larger of its weights.
  `HRW.Ring.nodes/1` and `HRW.Skeleton.nodes/1` return each weight exactly as
  given (`1.0e10` stays a float).

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

  Natively (no `hash_fn`) the score is a non-negative integer below `2 ** 128` that
  orders nodes exactly as owners are chosen: `(2 ** 64 - 1 - cost_key) * 2 ** 64 +
  n3_score`, the cost key of docs/HASHING.md §3 (lower cost, then higher N3 score,
  wins). It is exact for every valid weight: no cost overflows or rounds. A first
  argument that is not an `%HRW.Weighted{}`, a `hash_fn` that is not a function of
  arity 1, an entry that is not `{node, weight}` or a weight out of range raises
  `ArgumentError`.

  ## Examples

      iex> s = HRW.Weighted.score(%HRW.Weighted{}, "key", {"node", 2})
      iex> is_integer(s) and s > 0
      true
      iex> HRW.Weighted.score(%HRW.Weighted{}, "key", {"node", 2}) <
      ...>   HRW.Weighted.score(%HRW.Weighted{}, "key", {"node", 2 * 2 ** 20})
      true
      iex> HRW.Weighted.score(%HRW.Weighted{hash_fn: fn _ -> 0x7FFFFFF end}, "key", {"node", 2})
      1.0
  """
  @impl HRW.Scorer
  @spec score(t(), term(), {term(), number()}) :: number()
  def score(%__MODULE__{hash_fn: nil}, key, entry) do
    Native.weighted_score(key, entry)
  end

  def score(%__MODULE__{hash_fn: hash_fn}, key, {node, weight}) when is_function(hash_fn, 1) do
    normalized = (hash_fn.({key, node}) &&& @phash2_max) / @phash2_max
    :math.pow(normalized, exponent(checked_weight!(weight)))
  end

  def score(%__MODULE__{hash_fn: hash_fn}, _key, entry) when is_function(hash_fn, 1) do
    raise ArgumentError,
          "weighted nodes must be {node, weight} tuples, got: #{describe(entry)}"
  end

  def score(%__MODULE__{} = scorer, _key, _entry) do
    # A `hash_fn` that is no function of arity 1 is named; a map that only
    # names the struct is refused as a whole.
    _ = HRW.Options.scorer_struct!(scorer, "scorer")

    raise ArgumentError,
          "HRW.Weighted.score/3 expects an %HRW.Weighted{} scorer, got: #{HRW.Brief.brief(scorer)}"
  end

  def score(other, _key, _entry) do
    raise ArgumentError,
          "HRW.Weighted.score/3 expects an %HRW.Weighted{} scorer, got: #{HRW.Brief.brief(other)}"
  end

  @doc false
  # The one rule for a weight, the native paths' exactly: an integer or float in
  # (0, 2^53].
  defguard is_weight(weight)
           when is_number(weight) and weight > 0 and weight <= 9_007_199_254_740_992

  @doc false
  # A `{node, weight}` entry checked as every path checks it: `HRW.build/2` checks
  # each entry of a skeleton scored in Elixir up front, as the native build does.
  @spec entry!(term()) :: {term(), number()}
  def entry!({_node, weight} = entry) do
    _ = checked_weight!(weight)
    entry
  end

  def entry!(entry),
    do:
      raise(
        ArgumentError,
        "weighted nodes must be {node, weight} tuples, got: #{describe(entry)}"
      )

  defp checked_weight!(weight) when is_weight(weight), do: weight

  defp checked_weight!(weight) when is_number(weight) and weight <= 0,
    do: raise(ArgumentError, "weight must be positive, got: #{refused(weight)}")

  defp checked_weight!(weight) when is_number(weight),
    do:
      raise(
        ArgumentError,
        "weight must be at most 2^53 (9007199254740992), got: #{refused(weight)}"
      )

  defp checked_weight!(weight),
    do: raise(ArgumentError, "weight must be a number, got: #{refused(weight)}")

  # A refused weight as every path prints it (the native one in
  # native/hrw_nif/src/weighted.rs, docs/HASHING.md §3): a float and an integer of
  # the signed 64-bit range exactly, any other integer by that fact alone.
  defp refused(weight)
       when is_integer(weight) and
              (weight < -0x8000_0000_0000_0000 or weight > 0x7FFF_FFFF_FFFF_FFFF),
       do: "an integer outside the 64-bit range"

  defp refused(weight), do: HRW.Brief.brief(weight)

  # Bounded in size and time even when a tuple holds a huge integer.
  defp describe(entry) when is_tuple(entry) and tuple_size(entry) <= 3,
    do: "{" <> Enum.map_join(Tuple.to_list(entry), ", ", &HRW.Brief.brief/1) <> "}"

  defp describe(entry) when is_tuple(entry), do: "a tuple of #{tuple_size(entry)} elements"
  defp describe(entry), do: HRW.Brief.brief(entry)

  # `1 / weight`, saturated where it leaves the float range: the limits of
  # `normalized ** (1 / weight)` as the exponent grows (a tiny weight) or shrinks (an
  # integer weight too large for a float).
  defp exponent(weight) do
    1 / weight
  rescue
    ArithmeticError -> if weight < 1, do: 1.7976931348623157e308, else: 0.0
  end
end
