defmodule HRW.Prepared do
  @moduledoc false
  # What `HRW.Ring` and `HRW.Skeleton` share: both keep their distinct nodes beside a
  # NIF resource, and rebuild the resource when it cannot be used here (the struct
  # came from another BEAM node, or from a binary whose resource was collected).

  @doc """
  The struct with a usable resource, rebuilt with `build.(struct)` (which returns
  `{resource, nodes, weights, fingerprint}`) at most once per process and
  fingerprint: the last rebuild is cached in the process dictionary, which also
  keeps that resource alive.
  """
  @spec rebuilt(struct, (struct -> tuple)) :: struct when struct: map()
  def rebuilt(%module{fingerprint: fingerprint} = prepared, build) do
    case Process.get({module, :rebuilt}) do
      {^fingerprint, resource} ->
        %{prepared | resource: resource}

      _ ->
        case build.(prepared) do
          {resource, _, _, ^fingerprint} ->
            Process.put({module, :rebuilt}, {fingerprint, resource})
            %{prepared | resource: resource}

          _ ->
            # Only a struct whose fields were changed by hand gets here.
            raise ArgumentError,
                  "the #{inspect(module)} struct's nodes do not match its fingerprint"
        end
    end
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
