defmodule HRW.Options do
  @moduledoc false
  # The one home of "is this input valid?" for every public entry point (`HRW`,
  # `HRW.Ring`, `HRW.Skeleton`, `HRW.Bounded`, `HRW.Cluster`, the batches): the
  # keyword-list check of options, the `:scorer` option, counts, node and key lists
  # (the one proper-list check). Messages name the caller and show values through
  # `HRW.brief/1`.

  # The NIF takes counts up to 2^32 - 1; nobody has more nodes than that.
  @max_count 0xFFFF_FFFF

  @doc """
  Checks that `opts` is a keyword list of `allowed` keys, each given at most once;
  raises `ArgumentError` naming `caller` otherwise.
  """
  @spec check!(term(), String.t(), [atom()]) :: :ok
  def check!(opts, caller, allowed) do
    unless is_list(opts) and Keyword.keyword?(opts) do
      raise ArgumentError, "#{caller} expects a keyword list of options, got: #{HRW.brief(opts)}"
    end

    keys = Keyword.keys(opts)

    # Not `keys -- allowed`: that removes one occurrence only, so a repeated allowed
    # option would be reported as unknown.
    case keys |> Enum.reject(&(&1 in allowed)) |> Enum.uniq() do
      [] -> :ok
      unknown -> raise ArgumentError, "#{caller} got unknown options: #{HRW.brief(unknown)}"
    end

    case Enum.uniq(keys -- Enum.uniq(keys)) do
      [] ->
        :ok

      repeated ->
        raise ArgumentError,
              "#{caller} got duplicated options: #{HRW.brief(repeated)} (give each option once)"
    end
  end

  @doc """
  Checks `opts` (only `allowed` keys) and resolves the `:scorer` option: `:native`
  (N3), `:weighted` (native weighted) or a struct scored in Elixir.
  """
  @spec scorer!(keyword(), String.t(), [atom()]) :: :native | :weighted | struct()
  def scorer!(opts, caller, allowed \\ [:scorer]) do
    check!(opts, caller, allowed)

    case Keyword.get(opts, :scorer) do
      nil ->
        :native

      %HRW{hash_fn: nil} ->
        :native

      %HRW.Weighted{hash_fn: nil} ->
        :weighted

      %struct{hash_fn: f} = scorer when struct in [HRW, HRW.Weighted] and is_function(f, 1) ->
        scorer

      %struct{hash_fn: f} when struct in [HRW, HRW.Weighted] ->
        raise ArgumentError, "hash_fn must be a function of arity 1, got: #{HRW.brief(f)}"

      %mod{} = scorer ->
        if function_exported?(mod, :score, 3) do
          scorer
        else
          raise ArgumentError, "scorer #{inspect(mod)} does not implement HRW.Scorer.score/3"
        end

      other ->
        raise ArgumentError, "scorer must be a scorer struct, got: #{HRW.brief(other)}"
    end
  end

  @doc "For prepared structures: true when weighted; raises for Elixir-side scorers."
  @spec native_scorer!(keyword(), String.t(), [atom()]) :: boolean()
  def native_scorer!(opts, caller, allowed) do
    case scorer!(opts, caller, allowed) do
      :native ->
        false

      :weighted ->
        true

      other ->
        raise ArgumentError,
              "#{caller} prepares nodes for the native scorers %HRW{} and %HRW.Weighted{}; " <>
                "#{HRW.brief(other)} runs in Elixir, use it with a plain list"
    end
  end

  @doc "A non-negative integer count, capped at what the NIF takes."
  @spec count!(term()) :: non_neg_integer()
  def count!(count) when is_integer(count) and count >= 0, do: min(count, @max_count)

  def count!(count) do
    raise ArgumentError, "count must be a non-negative integer, got: #{HRW.brief(count)}"
  end

  @doc "A non-empty proper list of nodes, or `ArgumentError`."
  @spec nodes!(term()) :: [term(), ...]
  def nodes!([]), do: raise(ArgumentError, "nodes must be a non-empty list")

  def nodes!(nodes) when is_list(nodes) do
    if proper?(nodes),
      do: nodes,
      else: raise(ArgumentError, "nodes must be a proper list, got an improper list")
  end

  def nodes!(nodes), do: raise(ArgumentError, not_nodes(nodes))

  @doc "The message for a target that is not a node list."
  @spec not_nodes(term()) :: String.t()
  def not_nodes(nodes), do: "expected nodes to be a non-empty list, got: #{HRW.brief(nodes)}"

  @doc "A list of keys; with `proper: true` also a proper one."
  @spec keys!(term(), keyword()) :: [term()]
  def keys!(keys, opts \\ [])

  def keys!(keys, opts) when is_list(keys) do
    if Keyword.get(opts, :proper, false) and not proper?(keys),
      do: raise(ArgumentError, "keys must be a proper list"),
      else: keys
  end

  def keys!(keys, _opts), do: raise(ArgumentError, "keys must be a list, got: #{HRW.brief(keys)}")

  @doc "Whether `list` is a proper list (walks it to its end)."
  @spec proper?(term()) :: boolean()
  def proper?([_ | tail]), do: proper?(tail)
  def proper?([]), do: true
  def proper?(_), do: false
end
