defmodule HRW.Bounded do
  @moduledoc """
  Bounded-load rendezvous: assigns a known set of keys so that no node gets more
  than `ceil(|keys| / |nodes| × (1 + epsilon))` keys.

  A pure function of `(keys, nodes, opts)`: any two callers with the same inputs
  compute the same assignment, with no coordination. Use it when the whole key set
  is known (shards, partitions, tenants) and skew must stay bounded.

  Each key, in a defined order, takes its highest-scoring node that is not full.
  Duplicate keys and nodes count once.

    * Natively (the default) keys are processed in ascending order of their
      canonical ids and scored with N3, in one NIF call (on a dirty scheduler when
      large). Placement does not depend on the order of the input lists.
    * With `:hash_fn`, this is hrw 0.2.1's algorithm in Elixir, keys processed in
      Erlang term order: `hash_fn: &:erlang.phash2/1` reproduces hrw's assignments.
  """

  alias HRW.{Native, Options}

  @doc """
  Returns `%{key => node}` covering every distinct key (`%{}` for no keys).

  ## Options

    * `:epsilon` - load slack, a number ≥ 0. Smaller values balance more tightly but
      move more keys when nodes change. Defaults to `0.25`.
    * `:hash_fn` - `term -> integer`; scores `{key, node}` in Elixir as hrw 0.2.1 did.

  ## Examples

      iex> HRW.Bounded.assignments(["a", "b", "c", "d"], ["x", "y"], epsilon: 0.0)
      %{"a" => "y", "b" => "x", "c" => "x", "d" => "y"}

      iex> HRW.Bounded.assignments(["a", "b", "c", "d"], ["x", "y"],
      ...>   epsilon: 0.0, hash_fn: &:erlang.phash2/1)
      %{"a" => "x", "b" => "x", "c" => "y", "d" => "y"}
  """
  @spec assignments([term()], [term(), ...], keyword()) :: %{term() => term()}
  def assignments(keys, nodes, opts \\ []) do
    {epsilon, hash_fn} = options!(opts)
    keys = Options.keys!(keys, proper: true)
    _ = Options.nodes!(nodes)
    # Any epsilon >= the number of nodes lifts every cap to at least the number of
    # keys: the same assignment as no cap. Clamping first keeps the float arithmetic
    # finite for huge epsilons (a bignum epsilon cannot even become a float).
    epsilon = min(epsilon, length(nodes)) / 1

    case hash_fn do
      nil ->
        Native.bounded_assignments(keys, nodes, epsilon)

      hash_fn ->
        greedy(keys, nodes, epsilon, hash_fn)
    end
  end

  # hrw 0.2.1's algorithm: sorted, deduplicated keys each take the first highest
  # `hash_fn.({key, node})` among sorted, deduplicated nodes below the cap.
  defp greedy(keys, nodes, epsilon, hash_fn) do
    keys = keys |> Enum.sort() |> Enum.dedup()
    nodes = nodes |> Enum.sort() |> Enum.dedup()
    cap = ceil(length(keys) / length(nodes) * (1 + epsilon))

    {assigned, _load} =
      Enum.reduce(keys, {%{}, %{}}, fn key, {assigned, load} ->
        node =
          nodes
          |> Enum.filter(&(Map.get(load, &1, 0) < cap))
          |> Enum.max_by(&hash_fn.({key, &1}))

        {Map.put(assigned, key, node), Map.update(load, node, 1, &(&1 + 1))}
      end)

    assigned
  end

  defp options!(opts) do
    caller = "HRW.Bounded.assignments/3"
    Options.check!(opts, caller, [:epsilon, :hash_fn])
    epsilon = Options.non_neg_number!(Keyword.get(opts, :epsilon, 0.25), caller, :epsilon)
    {epsilon, Options.hash_fn!(Keyword.get(opts, :hash_fn))}
  end
end
