defmodule HRW.Ring do
  @moduledoc """
  An exact prepared ring: the same owners as `HRW.owner/3` on the same node list,
  faster, because each node's id and its N3 preparation are computed once and kept
  in a NIF resource.

  Use it when the node set changes rarely and lookups are frequent, up to tens of
  thousands of nodes; a lookup scans every node with SIMD (about 0.3–2 ns per node).
  For larger sets use the O(log n) skeleton, `HRW.build/2`.

      ring = HRW.Ring.new(["cache-1", "cache-2", "cache-3"])
      HRW.owner("user:42", ring)           # same as HRW.owner("user:42", nodes)

  Moving from a list to a ring moves no key; adding a node to a ring moves only the
  keys the new node wins. The struct holds the distinct nodes, so it keeps working
  after a `:erlang.term_to_binary/1` round trip or on another BEAM node: when its
  resource cannot be used there, it is rebuilt once and cached in the calling
  process. Rings are immutable and shared by all processes without locks; store them
  in `:persistent_term` or ETS freely.
  """

  alias HRW.{Native, Prepared}

  @enforce_keys [:nodes, :weights, :resource, :fingerprint]
  defstruct @enforce_keys

  @type t :: %__MODULE__{
          nodes: tuple(),
          weights: tuple() | nil,
          resource: reference(),
          fingerprint: non_neg_integer()
        }

  @doc """
  Builds a ring from a non-empty list of nodes (or `{node, weight}` tuples with
  `scorer: %HRW.Weighted{}`). Repeated nodes count once.

  ## Options

    * `:scorer` - `%HRW{}` (default) or `%HRW.Weighted{}`. Scorers that run in
      Elixir (a `hash_fn`, custom modules) have nothing to prepare: use a list.

  ## Examples

      iex> ring = HRW.Ring.new(["cache-1", "cache-2", "cache-3"])
      #HRW.Ring<3 nodes>
      iex> HRW.owner("user:42", ring) == HRW.owner("user:42", ["cache-1", "cache-2", "cache-3"])
      true
      iex> HRW.Ring.new([{"big", 4}, {"small", 1}], scorer: %HRW.Weighted{})
      #HRW.Ring<2 nodes, weighted>
  """
  @spec new([term(), ...], keyword()) :: t()
  def new(nodes, opts \\ []) do
    weighted? = HRW.native_scorer!(opts, "HRW.Ring.new/2", [:scorer])
    HRW.checked_nodes!(nodes)
    {resource, nodes, weights, fingerprint} = Native.ring_new(nodes, weighted?)
    %__MODULE__{nodes: nodes, weights: weights, resource: resource, fingerprint: fingerprint}
  end

  @doc """
  The ring's distinct nodes, in first-occurrence order (`{node, weight}` when weighted).

  ## Examples

      iex> HRW.Ring.nodes(HRW.Ring.new(["a", "b", "a"]))
      ["a", "b"]
  """
  @spec nodes(t()) :: [term()]
  def nodes(%__MODULE__{nodes: nodes, weights: weights}), do: Prepared.entries(nodes, weights)

  @doc """
  The number of distinct nodes.

  ## Examples

      iex> HRW.Ring.size(HRW.Ring.new(["a", "b", "a"]))
      2
  """
  @spec size(t()) :: pos_integer()
  def size(%__MODULE__{nodes: nodes}), do: tuple_size(nodes)

  @doc false
  @spec owner(t(), term()) :: term()
  def owner(%__MODULE__{} = ring, key), do: Native.ring_owner(ring, key)

  @doc false
  @spec owners(t(), term(), non_neg_integer()) :: [term()]
  def owners(%__MODULE__{} = ring, key, count), do: Native.ring_owners(ring, key, count)

  defimpl Inspect do
    def inspect(ring, _opts) do
      extras = if ring.weights, do: ["weighted"], else: []
      HRW.Prepared.label("HRW.Ring", HRW.Ring.size(ring), extras)
    end
  end
end
