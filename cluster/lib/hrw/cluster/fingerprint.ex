defmodule HRW.Cluster.Fingerprint do
  @moduledoc """
  The fingerprint of a member set: a 64-bit integer that depends only on the set of
  members (and their weights), never on their order, on the order of the events
  that built it, or on the node computing it. Two nodes whose `HRW.Cluster` views
  hold the same members have the same fingerprint; the definition is in
  docs/FINGERPRINT.md, so any language can compute it:

      id(m)  = HRW.term_id(m)                      for a bare node m
      id(m)  = HRW.term_id({HRW.term_id(node), bits(weight / 1)})
                                                   for {node, weight}: bits(x) is the
                                                   IEEE-754 binary64 pattern of the
                                                   weight as a float, an unsigned integer
      mix(z) = z += 0x9e3779b97f4a7c15
               z = (z xor (z >> 30)) * 0xbf58476d1ce4e5b9
               z = (z xor (z >> 27)) * 0x94d049bb133111eb
               z xor (z >> 31)
      fingerprint = mix(n xor Σ mix(id(m)))    n distinct ids, sum mod 2^64

  Members fold as a structure folds them (docs/HASHING.md §6): bare nodes with
  equal ids count once; weighted nodes with equal ids count once, with the
  largest of their weights. A weighted member's id is made from the node's id, not
  from the node, so it is defined for every node a structure takes, however deep.
  So two member lists that build the same structure have the same fingerprint.
  """

  import Bitwise
  import HRW.Cluster.Check, only: [is_weight: 1]

  alias HRW.Cluster.{Check, Describe}

  @mask 0xFFFF_FFFF_FFFF_FFFF

  @typedoc "A member: a bare node, or `{node, weight}`."
  @type member :: term() | {term(), number()}

  @doc """
  The fingerprint of `members`, bare nodes or `{node, weight}` entries, all of one
  kind: with `weighted: true` every member is `{node, weight}` with a weight of
  docs/HASHING.md §3 (`0 < weight <= 2^53`, checked on the exact value before it is
  converted to a float: `2^53 + 1` is refused), and anything else (a bare member, a
  3-tuple) raises `ArgumentError`; with `weighted: false` every member is a bare
  node (a tuple too). Without the option the list is weighted when it is not empty
  and every member is a 2-tuple whose second element is a number (an integer or a
  float): decided from all of them, so in any order alike. So `[{:rack, 1}, {:rack,
  2}]` is one weighted member, and `[{:shard, 0}]` raises (0 is a number, not a
  weight).

  ## Examples

      iex> HRW.Cluster.Fingerprint.of([])
      0xe220a8397b1dcdaf
      iex> HRW.Cluster.Fingerprint.of([:"a@h", :"b@h"]) == HRW.Cluster.Fingerprint.of([:"b@h", :"a@h"])
      true
      iex> HRW.Cluster.Fingerprint.of([{:"a@h", 2}]) == HRW.Cluster.Fingerprint.of([{:"a@h", 2.0}])
      true
      iex> HRW.Cluster.Fingerprint.of([{:rack, 1}, {:rack, 2}]) == HRW.Cluster.Fingerprint.of([{:rack, 2}])
      true
  """
  @spec of([member()], keyword()) :: non_neg_integer()
  def of(members, opts \\ [])

  def of(members, opts) when is_list(members) do
    caller = "HRW.Cluster.Fingerprint.of/2"

    unless Check.proper?(members),
      do: raise(ArgumentError, "#{caller} takes a proper list of members")

    Check.check!(opts, caller, [:weighted])

    weighted =
      case Keyword.fetch(opts, :weighted) do
        {:ok, weighted} -> Check.one_of!(weighted, "#{caller} :weighted", [true, false])
        :error -> weighted?(members)
      end

    {sum, count} =
      members
      |> ids(weighted)
      |> Enum.reduce({0, 0}, fn id, {sum, count} -> {sum + mix(id) &&& @mask, count + 1} end)

    mix(bxor(count, sum))
  end

  def of(other, _opts) do
    raise ArgumentError,
          "HRW.Cluster.Fingerprint.of/2 takes a list of members, got: #{Describe.value(other)}"
  end

  @doc """
  The mixing function of the definition (SplitMix64's finalizer), on an integer in
  `0..2^64-1`.

  ## Examples

      iex> HRW.Cluster.Fingerprint.mix(0)
      0xe220a8397b1dcdaf
  """
  @spec mix(non_neg_integer()) :: non_neg_integer()
  def mix(z) when is_integer(z) and z >= 0 and z <= @mask do
    z = z + 0x9E3779B97F4A7C15 &&& @mask
    z = bxor(z, z >>> 30) * 0xBF58476D1CE4E5B9 &&& @mask
    z = bxor(z, z >>> 27) * 0x94D049BB133111EB &&& @mask
    bxor(z, z >>> 31)
  end

  def mix(other) do
    raise ArgumentError,
          "HRW.Cluster.Fingerprint.mix/1 takes an integer in 0..2^64-1, got: #{Describe.value(other)}"
  end

  @doc "A fingerprint as 16 lower-case hexadecimal digits, for logs."
  @spec hex(non_neg_integer()) :: String.t()
  def hex(fingerprint)
      when is_integer(fingerprint) and fingerprint >= 0 and fingerprint <= @mask do
    fingerprint |> Integer.to_string(16) |> String.downcase() |> String.pad_leading(16, "0")
  end

  def hex(other) do
    raise ArgumentError,
          "HRW.Cluster.Fingerprint.hex/1 takes a fingerprint, an integer in 0..2^64-1, got: " <>
            Describe.value(other)
  end

  defp weighted?([]), do: false
  defp weighted?(members), do: Enum.all?(members, &match?({_node, w} when is_number(w), &1))

  # The distinct ids, folded as §6 folds a structure's nodes.
  defp ids(members, false), do: members |> Enum.map(&HRW.term_id/1) |> Enum.uniq()

  defp ids(members, true) do
    members
    |> Enum.reduce(%{}, fn
      {node, weight}, acc when is_weight(weight) ->
        Map.update(acc, HRW.term_id(node), {node, weight}, fn {first, kept} ->
          {first, if(weight > kept, do: weight, else: kept)}
        end)

      other, _acc ->
        raise ArgumentError,
              "HRW.Cluster.Fingerprint.of/2: a weighted member is {node, weight} with " <>
                "0 < weight <= 2^53 (docs/HASHING.md §3), got: #{Describe.value(other)}"
    end)
    |> Enum.map(fn {id, {_node, weight}} ->
      <<bits::64>> = <<weight / 1::float-64>>
      HRW.term_id({id, bits})
    end)
  end
end
