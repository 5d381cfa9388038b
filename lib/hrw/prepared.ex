defmodule HRW.Prepared do
  @moduledoc false
  # What `HRW.Ring` and `HRW.Skeleton` share: both keep their distinct nodes beside a
  # NIF resource, and rebuild the resource when it cannot be used here (the struct
  # came from another BEAM node, or from a binary whose resource was collected).

  # Rebuilt resources kept per process, most recently used first: enough for any
  # realistic number of stale structures in use at once, few enough that a process
  # cannot accumulate them without bound.
  @cache_size 32
  @cache_key {__MODULE__, :rebuilt}

  @doc """
  The struct with a resource usable in this process. Each fingerprint is rebuilt
  at most once per process while it stays among the #{@cache_size} most recently
  rebuilt: the process dictionary holds those resources (which keeps them alive).
  """
  @spec rebuilt(struct) :: struct when struct: HRW.Ring.t() | HRW.Skeleton.t()
  def rebuilt(%module{fingerprint: fingerprint} = prepared) do
    key = {module, fingerprint}
    cache = Process.get(@cache_key, [])

    case List.keyfind(cache, key, 0) do
      {^key, resource} ->
        if hd(cache) |> elem(0) != key do
          Process.put(@cache_key, [{key, resource} | List.keydelete(cache, key, 0)])
        end

        %{prepared | resource: resource}

      nil ->
        case build(prepared) do
          {resource, _, _, ^fingerprint} ->
            Process.put(@cache_key, Enum.take([{key, resource} | cache], @cache_size))
            %{prepared | resource: resource}

          _ ->
            # Only a struct whose fields were changed by hand gets here.
            raise ArgumentError,
                  "the #{inspect(module)} struct's nodes do not match its fingerprint"
        end
    end
  end

  defp build(%HRW.Ring{} = ring) do
    HRW.Native.ring_new(entries(ring.nodes, ring.weights), ring.weights != nil)
  end

  defp build(%HRW.Skeleton{} = skeleton) do
    HRW.Native.skeleton_new(
      entries(skeleton.nodes, skeleton.weights),
      skeleton.weights != nil,
      skeleton.cluster_size
    )
  end

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
