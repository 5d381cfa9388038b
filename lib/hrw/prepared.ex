defmodule HRW.Prepared do
  @moduledoc false
  # The one module that decides ring or skeleton: how each kind of prepared target,
  # `HRW.Ring` and `HRW.Skeleton`, is looked up, singly (`owner/2`, `owners/3`) and
  # in batches (`nif_target/1`: every target as the batch NIFs take it, node lists
  # included, `list_target/2`), what its overrides and Elixir-scored form change,
  # and how a stale one is rebuilt (`rebuilt/1`, through the node-wide
  # `HRW.Prepared.Cache`). `HRW`, `HRW.Batch` and `HRW.Native` call it; the struct
  # modules build and document.
  #
  # Both structs keep their distinct nodes beside a NIF resource, so a struct whose
  # resource cannot be used here (it came from another BEAM node, or from a binary
  # whose resource was collected) can be rebuilt from its own fields.

  alias HRW.{Compat, Native, Overrides}

  @typedoc "A prepared structure."
  @type t :: HRW.Ring.t() | HRW.Skeleton.t()

  @doc """
  True for a ring or a skeleton with every field of its struct (usable in
  guards): a map that names the struct but lacks a field is no target, and gets
  the same `ArgumentError` as any other.
  """
  defguard is_prepared(target)
           when (is_struct(target, HRW.Ring) or
                   (is_struct(target, HRW.Skeleton) and is_map_key(target, :cluster_size) and
                      is_map_key(target, :fanout) and is_map_key(target, :scorer))) and
                  is_map_key(target, :nodes) and is_map_key(target, :weights) and
                  is_map_key(target, :resource) and is_map_key(target, :fingerprint) and
                  is_map_key(target, :overrides)

  # -- lookups ---------------------------------------------------------------------

  @doc """
  The owner of `key`. Without overrides a structure with a live resource goes to
  `lookup/5`; an Elixir-scored skeleton is scored in Elixir, and a resource that is
  not a reference is rebuilt. (`HRW.owner/3` calls this, or `lookup/5` directly.)
  """
  @spec owner(t(), term()) :: term()
  def owner(%kind{resource: r, nodes: nodes, overrides: nil} = prepared, key)
      when is_reference(r),
      do: lookup(kind, r, nodes, prepared, key)

  def owner(%HRW.Skeleton{resource: nil, scorer: scorer, overrides: nil} = skeleton, key),
    do: Compat.owner(key, Tuple.to_list(skeleton.nodes), scorer)

  # Anything else in the resource field that the NIF cannot use is rebuilt there.
  def owner(%HRW.Skeleton{overrides: nil} = skeleton, key), do: stale_owner(skeleton, key)
  def owner(%HRW.Ring{overrides: nil} = ring, key), do: stale_owner(ring, key)

  def owner(%{overrides: overrides} = prepared, key) do
    case Overrides.owner(overrides, key) do
      {:ok, node} -> node
      :error -> owner(%{prepared | overrides: nil}, key)
    end
  end

  @doc """
  The owner of `key` in the prepared structure of module `kind` (`HRW.Ring` or
  `HRW.Skeleton`) whose fields `resource` and `nodes` the caller matched: the NIF
  lookup, and on a stale resource (`:hrw_stale_resource`) one more on the rebuilt
  structure. The one place that picks a structure's NIF; `owner/2` and the fast
  path of `HRW.owner/3` call it.
  """
  @spec lookup(module(), reference(), tuple(), t(), term()) :: term()
  def lookup(HRW.Skeleton, r, nodes, skeleton, key) do
    elem(nodes, Native.skeleton_owner(r, key))
  catch
    :error, :hrw_stale_resource -> stale_owner(skeleton, key)
  end

  def lookup(HRW.Ring, r, nodes, ring, key) do
    elem(nodes, Native.ring_owner(r, key))
  catch
    :error, :hrw_stale_resource -> stale_owner(ring, key)
  end

  # The owner of `key` in the rebuilt structure (once: a rebuilt resource is live).
  # Only a whole struct can be rebuilt: `HRW.owner/3`'s fast path matches just the
  # fields it reads, so a map naming the struct but lacking one ends here.
  defp stale_owner(prepared, _key) when not is_prepared(prepared),
    do: raise(ArgumentError, HRW.Options.not_target(prepared))

  defp stale_owner(%HRW.Skeleton{} = skeleton, key) do
    %{nodes: nodes, resource: r} = rebuilt(skeleton)
    elem(nodes, Native.skeleton_owner(r, key))
  end

  defp stale_owner(%HRW.Ring{} = ring, key) do
    %{nodes: nodes, resource: r} = rebuilt(ring)
    elem(nodes, Native.ring_owner(r, key))
  end

  @doc "The best `count` owners of `key` (a checked count), overrides first."
  @spec owners(t(), term(), non_neg_integer()) :: [term()]
  def owners(%{overrides: nil} = prepared, key, count), do: own_owners(prepared, key, count)

  def owners(%{overrides: overrides} = prepared, key, count) do
    Overrides.owners(overrides, key, count, &own_owners(prepared, key, &1))
  end

  defp own_owners(%HRW.Ring{resource: r, nodes: nodes} = ring, key, count),
    do: Native.ring_owners(r, nodes, ring, key, count)

  defp own_owners(%HRW.Skeleton{resource: nil, scorer: scorer} = skeleton, key, count),
    do: Compat.owners(key, Tuple.to_list(skeleton.nodes), count, scorer)

  defp own_owners(%HRW.Skeleton{resource: r, nodes: nodes} = skeleton, key, count),
    do: Native.skeleton_owners(r, nodes, skeleton, key, count)

  @doc "The structure's own owner of `key`, its overrides ignored."
  @spec own_owner(t(), term()) :: term()
  def own_owner(prepared, key), do: owner(%{prepared | overrides: nil}, key)

  @doc "The normalized overrides of a target (`nil` for none, and for node lists)."
  @spec overrides(term()) :: Overrides.t() | nil
  def overrides(%HRW.Ring{overrides: overrides}), do: overrides
  def overrides(%HRW.Skeleton{overrides: overrides}), do: overrides
  def overrides(_target), do: nil

  @doc "Whether a prepared structure is scored in Elixir (no resource, no native batch)."
  @spec elixir_scored?(t()) :: boolean()
  def elixir_scored?(%HRW.Skeleton{resource: nil}), do: true
  def elixir_scored?(prepared) when is_prepared(prepared), do: false

  @doc """
  A batch target as the batch NIFs take it (native/hrw_nif/src/batch.rs, `target`):
  `{:ring | :skeleton, resource, nodes}`, or a `list_target/2` unchanged.
  """
  @spec nif_target(t() | {:list, list(), boolean()}) :: tuple()
  def nif_target(%HRW.Ring{resource: r, nodes: nodes}), do: {:ring, r, nodes}
  def nif_target(%HRW.Skeleton{resource: r, nodes: nodes}), do: {:skeleton, r, nodes}
  def nif_target({:list, _nodes, _weighted?} = list), do: list

  @doc "The batch target of a checked node list, scored weighted or not."
  @spec list_target(list(), boolean()) :: {:list, list(), boolean()}
  def list_target(nodes, weighted?), do: {:list, nodes, weighted?}

  # -- stale structures --------------------------------------------------------------

  @doc """
  The struct with a resource usable in this VM: a stale structure's resource is
  rebuilt once per node and fingerprint while `HRW.Prepared.Cache` keeps it (see
  there); other targets are returned unchanged.
  """
  @spec rebuilt(target) :: target when target: term()
  def rebuilt(%module{fingerprint: fingerprint} = prepared) when is_prepared(prepared) do
    %{prepared | resource: HRW.Prepared.Cache.fetch({module, fingerprint}, prepared)}
  end

  def rebuilt(other), do: other

  @doc """
  Builds the resource of `prepared` again from its fields: `{resource, nodes}`.
  Raises when the fields do not give the struct's fingerprint (changed by hand).
  """
  @spec rebuild(t()) :: {reference(), non_neg_integer()}
  def rebuild(%module{fingerprint: fingerprint} = prepared) do
    HRW.Prepared.Cache.count_rebuild()

    case build(prepared) do
      {resource, _, _, ^fingerprint} ->
        {resource, tuple_size(prepared.nodes)}

      _ ->
        raise ArgumentError, "the #{inspect(module)} struct's nodes do not match its fingerprint"
    end
  end

  defp build(%HRW.Ring{} = ring) do
    Native.ring_new(entries(ring.nodes, ring.weights), ring.weights != nil)
  end

  defp build(%HRW.Skeleton{} = skeleton) do
    Native.skeleton_new(
      entries(skeleton.nodes, skeleton.weights),
      skeleton.weights != nil,
      skeleton.cluster_size
    )
  end

  # -- shared by both structs ----------------------------------------------------------

  @doc "The `{node, weight}` list (or plain nodes) a struct was built from."
  @spec entries(tuple(), tuple() | nil) :: [term()]
  def entries(nodes, nil), do: Tuple.to_list(nodes)
  def entries(nodes, weights), do: Enum.zip(Tuple.to_list(nodes), Tuple.to_list(weights))

  @doc "`#Name<n nodes, extra...>` for Inspect."
  @spec label(String.t(), non_neg_integer(), [String.t()]) :: String.t()
  def label(name, n, extras) do
    count = if n == 1, do: "1 node", else: "#{n} nodes"
    "##{name}<" <> Enum.join([count | extras], ", ") <> ">"
  end
end
