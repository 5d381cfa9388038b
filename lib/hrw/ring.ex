defmodule HRW.Ring do
  @moduledoc """
  An exact prepared ring: the same owners as `HRW.owner/3` on the same node list,
  faster, because each node's id and its N3 preparation are computed once and kept
  in a NIF resource.

  Use it when the node set changes rarely and lookups are frequent, up to thousands
  of nodes; a lookup scans every node with SIMD (for its cost per node see
  docs/BENCHMARKS.md, "The core alone"). For larger sets use the O(log n) skeleton,
  `HRW.build/2`.

      ring = HRW.Ring.new(["cache-1", "cache-2", "cache-3"])
      HRW.owner("user:42", ring)           # same as HRW.owner("user:42", nodes)

  Moving from a list to a ring moves no key; adding a node to a ring moves only the
  keys the new node wins. The struct holds the distinct nodes, so it keeps working
  after a `:erlang.term_to_binary/1` round trip or on another BEAM node: when its
  resource cannot be used there, it is rebuilt once per node and shared by every
  process there while it is in use or recently used (by the `:hrw` application;
  without it running, each call rebuilds). Rings are immutable and shared by all
  processes without locks; store them in `:persistent_term` or ETS freely.
  """

  alias HRW.{Native, Options, Overrides, Prepared}

  @enforce_keys [:nodes, :weights, :resource, :fingerprint]
  defstruct @enforce_keys ++ [overrides: nil]

  @type t :: %__MODULE__{
          nodes: tuple(),
          weights: tuple() | nil,
          resource: reference(),
          fingerprint: non_neg_integer(),
          overrides: %{optional(term()) => [term(), ...]} | nil
        }

  @doc """
  Builds a ring from a non-empty list of nodes (or `{node, weight}` tuples with
  `scorer: %HRW.Weighted{}`). Repeated nodes count once.

  ## Options

    * `:scorer` - `%HRW{}` (default) or `%HRW.Weighted{}`. Scorers that run in
      Elixir (a `hash_fn`, custom modules) have nothing to prepare: use a list.
    * `:overrides` - `%{key => node | [node, ...]}`: pins keys to chosen nodes (a
      hot key to a bigger machine, say). See "Overrides" below. Defaults to none.

  ## Overrides

  An overridden key's `HRW.owner/3` is its first pinned node; `HRW.owners/4` lists
  its pinned nodes first (distinct, in the given order), then the ring's own owners
  of the key without those, `count` in all (fewer when there are not enough distinct
  nodes). `HRW.owner_batch/3`, `HRW.group_by_owner/3`, `HRW.moves/4` and
  `HRW.moved_fraction/4` follow them too. Other keys keep their owners.

    * A pinned node need not be one of the ring's nodes.
    * Keys match as map keys do: exactly (`1` and `1.0` are different keys).
    * A key must be one the ring can look up at all: every entry point refuses a key
      nested deeper than 256 levels (docs/HASHING.md, "Term ids") with
      `ArgumentError`, so an override for one is refused here, when the ring is
      built, rather than answered by some entry points and refused by others.
    * A value that is not a list is one node; a list is a non-empty list of nodes
      (to pin a node that is itself a list, wrap it: `[[:a, :b]]`).
    * The overrides are kept in the struct, so they survive `:erlang.term_to_binary/1`
      round trips and travel to other BEAM nodes with it.

  A ring without overrides pays nothing for the feature.

  ## Examples

      iex> ring = HRW.Ring.new(["cache-1", "cache-2", "cache-3"])
      #HRW.Ring<3 nodes>
      iex> HRW.owner("user:42", ring) == HRW.owner("user:42", ["cache-1", "cache-2", "cache-3"])
      true
      iex> HRW.Ring.new([{"big", 4}, {"small", 1}], scorer: %HRW.Weighted{})
      #HRW.Ring<2 nodes, weighted>

      iex> ring = HRW.Ring.new(["cache-1", "cache-2", "cache-3"],
      ...>   overrides: %{"hot-key" => ["big-1", "cache-3"]})
      #HRW.Ring<3 nodes, overrides: 1>
      iex> HRW.owner("hot-key", ring)
      "big-1"
      iex> HRW.owners("hot-key", ring, 3)
      ["big-1", "cache-3", "cache-1"]
      iex> HRW.owner("user:42", ring)
      "cache-2"
  """
  @spec new([term(), ...], keyword()) :: t()
  def new(nodes, opts \\ []) do
    weighted? = Options.native_scorer!(opts, "HRW.Ring.new/2", [:scorer, :overrides])
    _ = Options.nodes!(nodes)
    overrides = Overrides.new!(Keyword.get(opts, :overrides), "HRW.Ring.new/2", true)
    {resource, nodes, weights, fingerprint} = Native.ring_new(nodes, weighted?)

    %__MODULE__{
      nodes: nodes,
      weights: weights,
      resource: resource,
      fingerprint: fingerprint,
      overrides: overrides
    }
  end

  @doc """
  The ring's overrides, `%{key => [node, ...]}` (each list distinct, in the given
  order); `%{}` when it has none.

  ## Examples

      iex> HRW.Ring.overrides(HRW.Ring.new(["a", "b"], overrides: %{"k" => "z", 7 => ["b", "z", "b"]}))
      %{7 => ["b", "z"], "k" => ["z"]}
      iex> HRW.Ring.overrides(HRW.Ring.new(["a", "b"]))
      %{}
  """
  @spec overrides(t()) :: %{optional(term()) => [term(), ...]}
  def overrides(%__MODULE__{overrides: overrides}), do: Overrides.to_map(overrides)
  def overrides(other), do: raise(ArgumentError, Options.not_struct(other, __MODULE__))

  @doc """
  The ring's distinct nodes, in first-occurrence order (`{node, weight}` when weighted).

  ## Examples

      iex> HRW.Ring.nodes(HRW.Ring.new(["a", "b", "a"]))
      ["a", "b"]
  """
  @spec nodes(t()) :: [term()]
  def nodes(%__MODULE__{} = prepared), do: Prepared.nodes!(prepared)
  def nodes(other), do: raise(ArgumentError, Options.not_struct(other, __MODULE__))

  @doc """
  The number of distinct nodes.

  ## Examples

      iex> HRW.Ring.size(HRW.Ring.new(["a", "b", "a"]))
      2
  """
  @spec size(t()) :: pos_integer()
  def size(%__MODULE__{nodes: nodes}) when is_tuple(nodes), do: tuple_size(nodes)
  def size(%__MODULE__{} = forged), do: raise(ArgumentError, Options.forged(forged, :nodes))
  def size(other), do: raise(ArgumentError, Options.not_struct(other, __MODULE__))

  # A field changed by hand shows as `corrupt`, never as an error from inspect.
  defimpl Inspect do
    def inspect(ring, _opts) do
      extras = if ring.weights, do: ["weighted"], else: []
      overrides = HRW.Overrides.label(ring.overrides)
      HRW.Options.label("HRW.Ring", ring.nodes, extras ++ overrides)
    end
  end
end
