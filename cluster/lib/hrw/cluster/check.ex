defmodule HRW.Cluster.Check do
  @moduledoc false
  # The input checks of `HRW.Cluster` and `HRW.Cluster.Fingerprint`: options as
  # keyword lists, integer ranges, functions, counts, key lists, lookup targets,
  # overrides maps and weights. The rules are the hashing package's documented ones
  # (`HRW.build/2`'s `:cluster_size` in `1..4096`, docs/HASHING.md §3's weights,
  # `HRW.term_id/1`'s refusals), and the messages are worded as its own, so one
  # mistake reads the same from `HRW` and from `HRW.Cluster`. Values are shown
  # through `HRW.brief/1`.

  # A skeleton's `:cluster_size` (HRW.build/2).
  @max_cluster_size 4096

  @doc """
  A weight of docs/HASHING.md §3: an integer or float in `(0, 2^53]`, the rule every
  weighted structure applies.
  """
  defguard is_weight(weight)
           when is_number(weight) and weight > 0 and weight <= 9_007_199_254_740_992

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
  An integer `value` in `min..max` for option `key` of `caller`, or `ArgumentError`
  saying so.
  """
  @spec integer!(term(), String.t(), atom(), integer(), integer()) :: integer()
  def integer!(value, _caller, _key, min, max)
      when is_integer(value) and value >= min and value <= max,
      do: value

  def integer!(value, caller, key, min, max) do
    raise ArgumentError,
          "#{caller} #{inspect(key)} must be an integer in #{min}..#{max}, " <>
            "got: #{HRW.brief(value)}"
  end

  @doc "A skeleton's `:cluster_size`, checked as `HRW.build/2` checks it."
  @spec cluster_size!(term(), String.t()) :: pos_integer()
  def cluster_size!(value, caller),
    do: integer!(value, caller, :cluster_size, 1, @max_cluster_size)

  @doc "One of `allowed`, for the option that `what` names, or `ArgumentError`."
  @spec one_of!(term(), String.t(), [term(), ...]) :: term()
  def one_of!(value, what, allowed) do
    if value in allowed do
      value
    else
      {init, [last]} = Enum.split(allowed, -1)
      choices = Enum.map_join(init, ", ", &inspect/1) <> " or " <> inspect(last)
      raise ArgumentError, "#{what} must be #{choices}, got: #{HRW.brief(value)}"
    end
  end

  @doc "An integer `>= 0` for what `what` names, or `ArgumentError`."
  @spec non_neg_integer!(term(), String.t()) :: non_neg_integer()
  def non_neg_integer!(value, _what) when is_integer(value) and value >= 0, do: value

  def non_neg_integer!(value, what) do
    raise ArgumentError, "#{what} must be a non-negative integer, got: #{HRW.brief(value)}"
  end

  @doc "A count of owners: a non-negative integer (`HRW.owners/3` caps it itself)."
  @spec count!(term()) :: non_neg_integer()
  def count!(count), do: non_neg_integer!(count, "count")

  @doc "`nil` or a function of arity 1, for the option that `what` names."
  @spec function!(term(), String.t()) :: (term() -> term()) | nil
  def function!(fun, _what) when is_nil(fun) or is_function(fun, 1), do: fun

  def function!(other, what) do
    raise ArgumentError, "#{what} must be a function of arity 1, got: #{HRW.brief(other)}"
  end

  @doc "A proper list of keys, or `ArgumentError`."
  @spec keys!(term()) :: [term()]
  def keys!(keys) when is_list(keys) do
    if proper?(keys), do: keys, else: raise(ArgumentError, "keys must be a proper list")
  end

  def keys!(keys), do: raise(ArgumentError, "keys must be a list, got: #{HRW.brief(keys)}")

  @doc """
  A lookup target as `HRW.owners/3` takes it (a non-empty proper node list, an
  `HRW.Ring` or an `HRW.Skeleton`), checked by `HRW.owners/3` itself: a lookup of
  no owners looks at no key and raises its `ArgumentError` for anything else.
  """
  @spec target!(term()) :: HRW.target()
  def target!(target) do
    [] = HRW.owners(:hrw_cluster_check, target, 0)
    target
  end

  @doc """
  The `:overrides` given to `caller`, `%{key => node | [node, ...]}`, normalized
  as `HRW.Ring.new/2` and `HRW.build/2` normalize theirs: `nil` when there is
  nothing to override (`nil` or `%{}`), else every value a non-empty list of
  distinct nodes, and every key one that a lookup takes (`HRW.term_id/1`).
  """
  @spec overrides!(term(), String.t()) :: %{optional(term()) => [term(), ...]} | nil
  def overrides!(nil, _caller), do: nil
  def overrides!(overrides, _caller) when overrides == %{}, do: nil

  def overrides!(overrides, caller) when is_map(overrides) and not is_struct(overrides) do
    Map.new(overrides, fn {key, value} ->
      :ok = hashable!(key, caller)
      {key, pinned!(key, value, caller)}
    end)
  end

  def overrides!(other, caller) do
    raise ArgumentError,
          "#{caller} option :overrides must be a map of key => node or [node, ...], " <>
            "got: #{HRW.brief(other)}"
  end

  defp hashable!(key, caller) do
    _ = HRW.term_id(key)
    :ok
  rescue
    error in ArgumentError ->
      raise ArgumentError,
            "#{caller} option :overrides: key #{HRW.brief(key)} can never be looked up " <>
              "(#{Exception.message(error)}), so it cannot be overridden; leave it out"
  end

  defp pinned!(key, [_ | _] = nodes, caller) do
    if proper?(nodes) do
      Enum.uniq(nodes)
    else
      raise ArgumentError,
            "#{caller} option :overrides: the nodes for key #{HRW.brief(key)} " <>
              "must be a proper list, got an improper list"
    end
  end

  defp pinned!(key, [], caller) do
    raise ArgumentError,
          "#{caller} option :overrides: the node list for key #{HRW.brief(key)} is empty " <>
            "(give at least one node, or leave the key out)"
  end

  defp pinned!(_key, node, _caller), do: [node]

  @doc "Whether `list` is a proper list (walks it to its end)."
  @spec proper?(term()) :: boolean()
  def proper?([_ | tail]), do: proper?(tail)
  def proper?([]), do: true
  def proper?(_), do: false
end
