defmodule HRW.Skeleton do
  @moduledoc """
  The O(log n) skeleton built by `HRW.build/2`: fair, and stable under churn.

  Nodes sit in a binary trie keyed by a hash of their id (never by sorted position).
  A lookup walks down the trie with one pseudo-random coin per level, weighted by
  the number of nodes (or total weight) on each side, and scans the final leaf of at
  most `:cluster_size` nodes exactly. So:

    * every node's expected share is `1/N` (or `w/Σw`);
    * adding or removing one node moves a small multiple of `1/N` of the keys
      (measured by `mix hrw.report`, docs/BENCHMARKS.md; bounded by the churn tests),
      at every size: there are no thresholds where clusters are re-formed wholesale;
    * with at most `:cluster_size` nodes the skeleton's owner is exactly the list's.

  The skeleton lives in a NIF resource; the struct keeps the distinct nodes, so it
  still works after `:erlang.term_to_binary/1` round trips and on other BEAM nodes
  (the resource is rebuilt once per node there and shared by its processes, as
  for `HRW.Ring`). Share it through
  `:persistent_term` or ETS.

  A skeleton built with a scorer that runs in Elixir (`%HRW{hash_fn: fun}` or a
  custom `HRW.Scorer`) has nothing to prepare: its lookups score every node with that
  scorer, like a list, so they stay exact but O(n).
  """

  alias HRW.{Native, Options, Overrides, Prepared}

  @enforce_keys [:nodes, :weights, :resource, :fingerprint, :cluster_size, :fanout, :scorer]
  defstruct @enforce_keys ++ [overrides: nil]

  @type t :: %__MODULE__{
          nodes: tuple(),
          weights: tuple() | nil,
          resource: reference() | nil,
          fingerprint: non_neg_integer() | nil,
          cluster_size: pos_integer(),
          fanout: pos_integer() | nil,
          scorer: struct(),
          overrides: %{optional(term()) => [term(), ...]} | nil
        }

  @default_cluster_size 16

  @doc false
  @spec build([term(), ...], keyword()) :: t()
  def build(nodes, opts) do
    caller = "HRW.build/2"
    scorer = Options.scorer!(opts, caller, [:scorer, :fanout, :cluster_size, :overrides])
    _ = Options.nodes!(nodes)
    size = Options.cluster_size!(Keyword.get(opts, :cluster_size, @default_cluster_size), caller)
    # Accepted for hrw 0.2.1's API, kept as given (`nil` when not given), ignored.
    fanout =
      case Keyword.fetch(opts, :fanout) do
        {:ok, value} -> Options.fanout!(value, caller)
        :error -> nil
      end

    overrides = Overrides.new!(Keyword.get(opts, :overrides), caller, not is_struct(scorer))

    case scorer do
      elixir_scorer when is_struct(elixir_scorer) ->
        if is_struct(elixir_scorer, HRW.Weighted), do: Enum.each(nodes, &HRW.Weighted.entry!/1)

        %__MODULE__{
          nodes: nodes |> Enum.uniq() |> List.to_tuple(),
          weights: nil,
          resource: nil,
          fingerprint: nil,
          cluster_size: size,
          fanout: fanout,
          scorer: elixir_scorer,
          overrides: overrides
        }

      native ->
        weighted? = native == :weighted

        {resource, nodes, weights, fingerprint} = Native.skeleton_new(nodes, weighted?, size)

        %__MODULE__{
          nodes: nodes,
          weights: weights,
          resource: resource,
          fingerprint: fingerprint,
          cluster_size: size,
          fanout: fanout,
          scorer: if(weighted?, do: %HRW.Weighted{}, else: %HRW{}),
          overrides: overrides
        }
    end
  end

  @doc """
  The skeleton's distinct nodes (`{node, weight}` when weighted).

  ## Examples

      iex> HRW.Skeleton.nodes(HRW.build(["a", "b", "a"]))
      ["a", "b"]
  """
  @spec nodes(t()) :: [term()]
  def nodes(%__MODULE__{} = prepared), do: Prepared.nodes!(prepared)
  def nodes(other), do: raise(ArgumentError, Options.not_struct(other, __MODULE__))

  @doc """
  The skeleton's overrides (the `:overrides` option of `HRW.build/2`),
  `%{key => [node, ...]}` (each list distinct, in the given order); `%{}` when it has
  none.

  ## Examples

      iex> HRW.Skeleton.overrides(HRW.build(["a", "b"], overrides: %{"k" => "z"}))
      %{"k" => ["z"]}
      iex> HRW.Skeleton.overrides(HRW.build(["a", "b"]))
      %{}
  """
  @spec overrides(t()) :: %{optional(term()) => [term(), ...]}
  def overrides(%__MODULE__{overrides: overrides}), do: Overrides.to_map(overrides)
  def overrides(other), do: raise(ArgumentError, Options.not_struct(other, __MODULE__))

  @doc """
  The number of distinct nodes.

  ## Examples

      iex> HRW.Skeleton.size(HRW.build(["a", "b", "c"]))
      3
  """
  @spec size(t()) :: non_neg_integer()
  def size(%__MODULE__{nodes: nodes}) when is_tuple(nodes), do: tuple_size(nodes)
  def size(%__MODULE__{} = forged), do: raise(ArgumentError, Options.forged(forged, :nodes))
  def size(other), do: raise(ArgumentError, Options.not_struct(other, __MODULE__))

  # `#HRW.Skeleton<3 nodes, ...>` begins as hrw 0.2.1's did; `:fanout` is shown only
  # when given, marked as ignored. A field changed by hand shows as `corrupt`,
  # never as an error from inspect.
  defimpl Inspect do
    def inspect(skeleton, _opts) do
      fanout =
        if skeleton.fanout,
          do: ["fanout: #{HRW.Brief.brief(skeleton.fanout)} (ignored)"],
          else: []

      extras =
        ["cluster_size: #{HRW.Brief.brief(skeleton.cluster_size)}"] ++
          fanout ++
          ["scorer: #{Kernel.inspect(skeleton.scorer)}" | HRW.Overrides.label(skeleton.overrides)]

      HRW.Options.label("HRW.Skeleton", skeleton.nodes, extras)
    end
  end
end
