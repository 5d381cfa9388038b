defmodule HRW.Cluster.Check do
  @moduledoc false
  # The input checks of `HRW.Cluster` and `HRW.Cluster.Fingerprint`. Where hrw
  # has the rule (counts, lookup targets, a skeleton's `:cluster_size`, overrides
  # maps and their keys) hrw's public function checks the value itself, and its
  # message is kept, naming the cluster's caller: a rule and its message live in
  # hrw only. The cluster's own options (keyword lists, integer ranges, functions,
  # choices) are worded as hrw words its options, so one mistake reads the same
  # from both. Values are shown through `HRW.Cluster.Describe`.

  alias HRW.Cluster.Describe

  @doc """
  A weight of docs/HASHING.md §3: an integer or float in `(0, 2^53]`, the rule every
  weighted structure applies.
  """
  defguard is_weight(weight)
           when is_number(weight) and weight > 0 and weight <= 9_007_199_254_740_992

  @doc "`:ok` for a keyword list of `allowed` keys, each once; else `ArgumentError` naming `caller`."
  @spec check!(term(), String.t(), [atom()]) :: :ok
  def check!(opts, caller, allowed) do
    keys = if is_list(opts) and Keyword.keyword?(opts), do: Keyword.keys(opts)
    unknown = keys && keys |> Enum.reject(&(&1 in allowed)) |> Enum.uniq()
    repeated = keys && Enum.uniq(keys -- Enum.uniq(keys))

    cond do
      keys == nil ->
        refuse!("#{caller} expects a keyword list of options, got: ", opts, "")

      unknown != [] ->
        refuse!("#{caller} got unknown options: ", unknown, "")

      repeated != [] ->
        refuse!("#{caller} got duplicated options: ", repeated, " (give each option once)")

      true ->
        :ok
    end
  end

  @doc "`value` when an integer in `min..max` (`caller`'s option `key`), else `ArgumentError`."
  @spec integer!(term(), String.t(), atom(), integer(), integer()) :: integer()
  def integer!(value, caller, key, min, max) do
    if is_integer(value) and value in min..max//1,
      do: value,
      else: must!("#{caller} #{inspect(key)}", "an integer in #{min}..#{max}", value)
  end

  @doc """
  A skeleton's `:cluster_size`, in `HRW.build/2`'s range; a value out of it gets
  `HRW.build/2`'s own message (which raises before building anything, and a
  valid one builds nothing here: checking options builds no structure).
  """
  @spec cluster_size!(term(), String.t()) :: pos_integer()
  def cluster_size!(value, _caller) when is_integer(value) and value in 1..4096, do: value

  def cluster_size!(value, caller) do
    _ = as(caller, "HRW.build/2", fn -> HRW.build([:hrw_cluster_check], cluster_size: value) end)
    # hrw took it after all: its range is wider than this package knows.
    value
  end

  @doc "One of `allowed`, for the option that `what` names, or `ArgumentError`."
  @spec one_of!(term(), String.t(), [term(), ...]) :: term()
  def one_of!(value, what, allowed) do
    if value in allowed, do: value, else: must!(what, choices(allowed), value)
  end

  # Rendered only for a message: a check that passes renders no term.
  defp choices(allowed) do
    {others, [last]} = Enum.split(allowed, -1)
    Enum.map_join(others, ", ", &inspect/1) <> " or " <> inspect(last)
  end

  @doc "An integer `>= 0` for what `what` names, or `ArgumentError`."
  @spec non_neg_integer!(term(), String.t()) :: non_neg_integer()
  def non_neg_integer!(value, what) do
    if is_integer(value) and value >= 0,
      do: value,
      else: must!(what, "a non-negative integer", value)
  end

  @doc "A count of owners, checked by `HRW.owners/3` itself."
  @spec count!(term()) :: non_neg_integer()
  def count!(count) do
    _ = HRW.owners(:hrw_cluster_check, [:hrw_cluster_check], count)
    count
  end

  @doc "`nil` or a function of arity 1, for the option that `what` names."
  @spec function!(term(), String.t()) :: (term() -> term()) | nil
  def function!(fun, what) do
    if is_nil(fun) or is_function(fun, 1),
      do: fun,
      else: must!(what, "a function of arity 1", fun)
  end

  # The one shape of the cluster's option messages, hrw's own:
  # "<what> must be <rule>, got: <value>".
  @spec must!(String.t(), String.t(), term()) :: no_return()
  defp must!(what, rule, value), do: refuse!("#{what} must be #{rule}, got: ", value, "")

  @spec refuse!(String.t(), term(), String.t()) :: no_return()
  defp refuse!(text, value, tail),
    do: raise(ArgumentError, text <> Describe.value(value) <> tail)

  @doc "A proper list of keys, or `ArgumentError`."
  @spec keys!(term()) :: [term()]
  def keys!(keys) when is_list(keys) do
    if proper?(keys), do: keys, else: raise(ArgumentError, "keys must be a proper list")
  end

  def keys!(keys), do: raise(ArgumentError, "keys must be a list, got: #{Describe.value(keys)}")

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
  The `:overrides` given to `caller`, `%{key => node | [node, ...]}`, checked and
  normalized by `HRW.Ring.new/2` itself (its messages, naming `caller`): `nil`
  when there is nothing to override (`nil` or `%{}`), else every value a
  non-empty list of distinct nodes, and every key one that a lookup takes.
  """
  @spec overrides!(term(), String.t()) :: %{optional(term()) => [term(), ...]} | nil
  def overrides!(nil, _caller), do: nil

  def overrides!(overrides, caller) do
    ring =
      as(caller, "HRW.Ring.new/2", fn ->
        HRW.Ring.new([:hrw_cluster_check], overrides: overrides)
      end)

    normalized = HRW.Ring.overrides(ring)
    if normalized == %{}, do: nil, else: normalized
  end

  # Runs `fun`, an hrw function that names itself `hrw_caller` in its messages, as
  # `caller`: one rule, one message, in hrw.
  defp as(caller, hrw_caller, fun) do
    fun.()
  rescue
    error in ArgumentError ->
      reraise ArgumentError,
              [message: String.replace_prefix(error.message, hrw_caller, caller)],
              __STACKTRACE__
  end

  @doc "Whether `list` is a proper list (`length/1` walks it, and refuses an improper one)."
  @spec proper?(term()) :: boolean()
  def proper?(list) when is_list(list) do
    _ = length(list)
    true
  rescue
    ArgumentError -> false
  end

  def proper?(_other), do: false
end
