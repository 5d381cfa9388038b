defmodule HRW.Prepared do
  @moduledoc false
  # The one module that tells a ring from a skeleton, and the one home of the
  # stale-resource rule on the Elixir side.
  #
  # Kinds: how each prepared target, `HRW.Ring` and `HRW.Skeleton`, is looked up
  # singly (`owner/2`, `owners/3`) and in batches (`owners_of/3`, `groups_of/3`,
  # `moves_of/4`, on `nif_target/1`'s encoding, node lists included), and what its
  # overrides and Elixir-scored form change. `HRW` and `HRW.Batch` call it with a
  # checked target; the struct modules build and document; `HRW.Native` holds the
  # NIF stubs only.
  #
  # Stale resources. Both structs keep their distinct nodes beside a NIF resource,
  # so a struct whose resource cannot be used in this VM (it came from another
  # BEAM node, from a binary whose resource was collected, or its field holds
  # anything but a live resource) can be rebuilt from its own fields. The rule:
  #   * when: a NIF raises `:hrw_stale_resource` (native/hrw_nif/src/prepared.rs,
  #     `resource`); every NIF call on a resource in lib/ is made in this module;
  #   * how: `rebuilt/1` takes only a whole struct (`is_prepared/1`), builds its
  #     resource from its fields once per node and fingerprint (`rebuild/1`,
  #     through the node-wide `HRW.Prepared.Cache`) and refuses fields that do not
  #     give the struct's fingerprint;
  #   * retry once: `again/2` makes the same call on the rebuilt struct, outside
  #     the catch (a rebuilt resource is live: no loop).
  # Reloading `HRW.Native` keeps resources valid (native/hrw_nif/src/init.rs), so
  # a reload is not a reason to rebuild.

  alias HRW.{Compat, Native, Options, Overrides}

  @typedoc "A prepared structure."
  @type t :: HRW.Ring.t() | HRW.Skeleton.t()

  @typedoc "A batch target: a prepared structure, or a checked node list (`list_target/2`)."
  @type batch_target :: t() | {:list, list(), boolean()}

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

  # The lookups take their arguments in `HRW`'s order (key first), so that
  # `HRW.owner/3`'s fast path passes them on unmoved, and `owner/2` reads every
  # field a lookup needs in one match before it looks at the kind
  # (`bench/native_ab.exs` measures this path).

  @doc """
  The owner of `key` in `target`, any term: a ring or skeleton without overrides
  goes straight to its NIF (the fast path of `HRW.owner/3`, which matches no field
  itself), an Elixir-scored skeleton is scored in Elixir, and anything that is no
  whole ring or skeleton gets `HRW.Options.not_target/1`'s `ArgumentError`.
  """
  @spec owner(term(), term()) :: term()
  def owner(key, %{__struct__: kind, resource: r, nodes: nodes, overrides: nil} = target),
    do: lookup(key, target, kind, nodes, r)

  def owner(key, prepared) when is_prepared(prepared) do
    case Overrides.owner(prepared.overrides, key) do
      {:ok, node} -> node
      :error -> owner(key, %{prepared | overrides: nil})
    end
  end

  def owner(_key, other), do: raise(ArgumentError, Options.not_target(other))

  # The owner of `key` in `target`, of struct `kind`, without overrides, whose
  # nodes and resource `owner/2` read: the one place that picks a lookup's NIF.
  defp lookup(key, ring, HRW.Ring, nodes, r) do
    elem(nodes, Native.ring_owner(r, key))
  catch
    :error, :hrw_stale_resource -> again(&ring_owner(&1, key), [ring])
  end

  defp lookup(key, skeleton, HRW.Skeleton, nodes, nil) when is_prepared(skeleton),
    do: Compat.owner(key, Tuple.to_list(nodes), skeleton.scorer)

  defp lookup(key, skeleton, HRW.Skeleton, nodes, r) do
    elem(nodes, Native.skeleton_owner(r, key))
  catch
    :error, :hrw_stale_resource -> again(&skeleton_owner(&1, key), [skeleton])
  end

  defp lookup(_key, other, _kind, _nodes, _r),
    do: raise(ArgumentError, Options.not_target(other))

  defp ring_owner(%{resource: r, nodes: nodes}, key), do: elem(nodes, Native.ring_owner(r, key))

  defp skeleton_owner(%{resource: r, nodes: nodes}, key),
    do: elem(nodes, Native.skeleton_owner(r, key))

  @doc "The best `count` owners of `key` (a checked count), overrides first."
  @spec owners(term(), t(), non_neg_integer()) :: [term()]
  def owners(key, %{overrides: nil} = prepared, count), do: own_owners(prepared, key, count)

  def owners(key, %{overrides: overrides} = prepared, count) do
    Overrides.owners(overrides, key, count, &own_owners(prepared, key, &1))
  end

  defp own_owners(%HRW.Skeleton{resource: nil, scorer: scorer} = skeleton, key, count),
    do: Compat.owners(key, Tuple.to_list(skeleton.nodes), count, scorer)

  defp own_owners(prepared, key, count) do
    native_owners(prepared, key, count)
  catch
    :error, :hrw_stale_resource -> again(&native_owners(&1, key, count), [prepared])
  end

  defp native_owners(%HRW.Ring{resource: r, nodes: nodes}, key, count),
    do: pick(nodes, Native.ring_owners(r, key, count))

  defp native_owners(%HRW.Skeleton{resource: r, nodes: nodes}, key, count),
    do: pick(nodes, Native.skeleton_owners(r, key, count))

  defp pick(nodes, indices), do: for(i <- indices, do: elem(nodes, i))

  @doc "The structure's own owner of `key`, its overrides ignored."
  @spec own_owner(term(), t()) :: term()
  def own_owner(key, prepared), do: owner(key, %{prepared | overrides: nil})

  @doc "The normalized overrides of a target (`nil` for none, and for node lists)."
  @spec overrides(term()) :: Overrides.t() | nil
  def overrides(%HRW.Ring{overrides: overrides}), do: overrides
  def overrides(%HRW.Skeleton{overrides: overrides}), do: overrides
  def overrides(_target), do: nil

  @doc "Whether a prepared structure is scored in Elixir (no resource, no native batch)."
  @spec elixir_scored?(t()) :: boolean()
  def elixir_scored?(%HRW.Skeleton{resource: nil}), do: true
  def elixir_scored?(prepared) when is_prepared(prepared), do: false

  # -- batches -----------------------------------------------------------------------

  @doc "The owners of `keys` (a checked list) in one batch NIF call, in key order."
  @spec owners_of([term()], batch_target(), pos_integer()) :: [term()]
  def owners_of(keys, target, threads) do
    Native.batch_owners(keys, nif_target(target), threads)
  catch
    :error, :hrw_stale_resource ->
      again(&Native.batch_owners(keys, nif_target(&1), threads), [target])
  end

  @doc "`keys` grouped by owner in one batch NIF call."
  @spec groups_of([term()], batch_target(), pos_integer()) :: %{term() => [term()]}
  def groups_of(keys, target, threads) do
    Native.batch_groups(keys, nif_target(target), threads)
  catch
    :error, :hrw_stale_resource ->
      again(&Native.batch_groups(keys, nif_target(&1), threads), [target])
  end

  @doc "`{key, from, to}` for the keys whose owner differs, in one batch NIF call."
  @spec moves_of([term()], batch_target(), batch_target(), pos_integer()) ::
          [{term(), term(), term()}]
  def moves_of(keys, before, later, threads) do
    Native.batch_moves(keys, nif_target(before), nif_target(later), threads)
  catch
    :error, :hrw_stale_resource ->
      again(
        &Native.batch_moves(keys, nif_target(&1), nif_target(&2), threads),
        [before, later]
      )
  end

  @doc """
  A batch target as the batch NIFs take it (native/hrw_nif/src/batch.rs, `target`):
  `{:ring | :skeleton, resource, nodes}`, or a `list_target/2` unchanged.
  """
  @spec nif_target(batch_target()) :: tuple()
  def nif_target(%HRW.Ring{resource: r, nodes: nodes}), do: {:ring, r, nodes}
  def nif_target(%HRW.Skeleton{resource: r, nodes: nodes}), do: {:skeleton, r, nodes}
  def nif_target({:list, _nodes, _weighted?} = list), do: list

  @doc "The batch target of a checked node list, scored weighted or not."
  @spec list_target(list(), boolean()) :: {:list, list(), boolean()}
  def list_target(nodes, weighted?), do: {:list, nodes, weighted?}

  # -- stale structures --------------------------------------------------------------

  # The rule's last step: `fun` once more, on the rebuilt targets.
  defp again(fun, targets), do: apply(fun, Enum.map(targets, &rebuilt/1))

  # The struct with a resource usable in this VM, shared node-wide while
  # `HRW.Prepared.Cache` keeps it; a node list is returned unchanged. Only a whole
  # struct can be rebuilt: `owner/2` matches just the fields it reads, so a map
  # naming the struct but lacking one ends here.
  defp rebuilt(%module{fingerprint: fingerprint} = prepared) when is_prepared(prepared) do
    %{
      prepared
      | resource: HRW.Prepared.Cache.fetch({module, fingerprint}, fn -> rebuild(prepared) end)
    }
  end

  defp rebuilt({:list, _nodes, _weighted?} = list), do: list
  defp rebuilt(other), do: raise(ArgumentError, Options.not_target(other))

  # The resource of `prepared` built again from its fields: `{resource, nodes}`, the
  # build `rebuilt/1` gives the cache. Raises when the fields do not give the
  # struct's fingerprint (changed by hand).
  defp rebuild(%module{fingerprint: fingerprint} = prepared) do
    HRW.Prepared.Cache.count_rebuild()
    :ok = Options.rebuildable!(prepared)

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

  @doc """
  `HRW.Ring.nodes/1` and `HRW.Skeleton.nodes/1`: the struct's entries, or an
  `ArgumentError` naming the field changed by hand.
  """
  @spec nodes!(struct()) :: [term()]
  def nodes!(%{nodes: nodes, weights: nil}) when is_tuple(nodes), do: entries(nodes, nil)

  def nodes!(%{nodes: nodes, weights: weights})
      when is_tuple(nodes) and is_tuple(weights) and tuple_size(weights) == tuple_size(nodes),
      do: entries(nodes, weights)

  def nodes!(%{nodes: nodes} = forged) when is_tuple(nodes),
    do: raise(ArgumentError, Options.forged(forged, :weights))

  def nodes!(forged), do: raise(ArgumentError, Options.forged(forged, :nodes))

  @doc "`#Name<n nodes, extra...>` for Inspect."
  @spec label(String.t(), non_neg_integer(), [String.t()]) :: String.t()
  def label(name, n, extras) do
    count = if n == 1, do: "1 node", else: "#{n} nodes"
    "##{name}<" <> Enum.join([count | extras], ", ") <> ">"
  end
end
