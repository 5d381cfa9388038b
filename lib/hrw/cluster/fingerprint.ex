defmodule HRW.Cluster.Fingerprint do
  @moduledoc """
  The fingerprint of a member set: a 64-bit integer that depends only on the set of
  members (and their weights), never on their order, on the order of the events
  that built it, or on the node computing it. Two nodes whose `HRW.Cluster` views
  hold the same members have the same fingerprint; the definition is in
  docs/HASHING.md ("Member-set fingerprints"), so any language can compute it:

      id(m)  = HRW.term_id(m)                  for a bare node m
      id(m)  = HRW.term_id({node, weight / 1}) for {node, weight}: the weight as a float
      mix(z) = z += 0x9e3779b97f4a7c15
               z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
               z = (z ^ (z >> 27)) * 0x94d049bb133111eb
               z ^ (z >> 31)
      fingerprint = mix(n ^ Σ mix(id(m)))      n members, distinct ids, sum mod 2^64

  Members with equal ids count once (docs/HASHING.md §6), as in a structure.
  """

  import Bitwise

  @mask 0xFFFF_FFFF_FFFF_FFFF

  @typedoc "A member: a bare node, or `{node, weight}`."
  @type member :: term() | {term(), number()}

  @doc """
  The fingerprint of `members`, bare nodes or `{node, weight}` entries (all of one
  kind: a tuple is taken for a weighted entry when `weighted: true`, the default
  when the first entry is a 2-tuple whose second element is a number).

  ## Examples

      iex> HRW.Cluster.Fingerprint.of([])
      0xe220a8397b1dcdaf
      iex> HRW.Cluster.Fingerprint.of([:"a@h", :"b@h"]) == HRW.Cluster.Fingerprint.of([:"b@h", :"a@h"])
      true
      iex> HRW.Cluster.Fingerprint.of([{:"a@h", 2}]) == HRW.Cluster.Fingerprint.of([{:"a@h", 2.0}])
      true
  """
  @spec of([member()], keyword()) :: non_neg_integer()
  def of(members, opts \\ [])

  def of(members, opts) when is_list(members) and is_list(opts) do
    unless HRW.Options.proper?(members),
      do: raise(ArgumentError, "HRW.Cluster.Fingerprint.of/2 takes a proper list of members")

    unless Keyword.keyword?(opts) and Keyword.keys(opts) -- [:weighted] == [],
      do:
        raise(
          ArgumentError,
          "HRW.Cluster.Fingerprint.of/2 takes the option :weighted only, got: " <>
            HRW.brief(opts)
        )

    weighted = Keyword.get_lazy(opts, :weighted, fn -> weighted?(members) end)

    unless is_boolean(weighted),
      do:
        raise(
          ArgumentError,
          "HRW.Cluster.Fingerprint.of/2 :weighted must be true or false, got: " <>
            HRW.brief(weighted)
        )

    {sum, count} =
      members
      |> Enum.map(&id(&1, weighted))
      |> Enum.uniq()
      |> Enum.reduce({0, 0}, fn id, {sum, count} -> {sum + mix(id) &&& @mask, count + 1} end)

    mix(bxor(count, sum))
  end

  def of(members, opts) when is_list(members) do
    raise ArgumentError,
          "HRW.Cluster.Fingerprint.of/2 takes a keyword list of options, got: #{HRW.brief(opts)}"
  end

  def of(other, _opts) do
    raise ArgumentError,
          "HRW.Cluster.Fingerprint.of/2 takes a list of members, got: #{HRW.brief(other)}"
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
          "HRW.Cluster.Fingerprint.mix/1 takes an integer in 0..2^64-1, got: #{HRW.brief(other)}"
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
            HRW.brief(other)
  end

  defp weighted?([{_node, weight} | _]) when is_number(weight), do: true
  defp weighted?(_members), do: false

  defp id({node, weight}, true) when is_number(weight), do: HRW.term_id({node, float!(weight)})
  defp id(member, _weighted), do: HRW.term_id(member)

  # An integer weight past the largest float has no float to hash.
  defp float!(weight) do
    weight / 1
  rescue
    ArithmeticError ->
      reraise ArgumentError,
              "HRW.Cluster.Fingerprint.of/2: weight #{HRW.brief(weight)} is beyond the " <>
                "largest float",
              __STACKTRACE__
  end
end
