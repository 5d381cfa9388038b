defmodule HRW.Options do
  @moduledoc false
  # The one home of "is this input valid?" for every public entry point (`HRW`,
  # `HRW.Ring`, `HRW.Skeleton`, `HRW.Bounded`, the batches): the keyword-list check
  # of options, the `:scorer` option, integer ranges, functions, the skeleton's
  # `:cluster_size` and `:fanout`, counts, lookup targets, node and key lists (the one proper-list
  # check). Each check looks at values only: none builds a structure.
  #
  # One mistake, one message, whatever the entry point (test/hrw/inputs_test.exs
  # walks them all): option messages name the caller (`"HRW.owner/3 got unknown
  # options: [:x]"`), an option's value is `"<caller> <:key> must be <what it
  # takes>, got: <value>"`, and values are shown through `HRW.Brief.brief/1`.

  import HRW.Prepared, only: [is_prepared: 1]

  # The NIF takes counts up to 2^32 - 1; nobody has more nodes than that.
  @max_count 0xFFFF_FFFF
  # A leaf is scanned exactly on every lookup, so its size is bounded; `:fanout`
  # does not shape the trie and shares the bound only to stay a small integer.
  @max_cluster_size 4096

  @doc """
  Checks that `opts` is a keyword list of `allowed` keys, each given at most once;
  raises `ArgumentError` naming `caller` otherwise.
  """
  @spec check!(term(), String.t(), [atom()]) :: :ok
  def check!(opts, caller, allowed) do
    unless is_list(opts) and Keyword.keyword?(opts) do
      raise ArgumentError,
            "#{caller} expects a keyword list of options, got: #{HRW.Brief.brief(opts)}"
    end

    keys = Keyword.keys(opts)

    # Not `keys -- allowed`: that removes one occurrence only, so a repeated allowed
    # option would be reported as unknown.
    case keys |> Enum.reject(&(&1 in allowed)) |> Enum.uniq() do
      [] -> :ok
      unknown -> raise ArgumentError, "#{caller} got unknown options: #{HRW.Brief.brief(unknown)}"
    end

    case Enum.uniq(keys -- Enum.uniq(keys)) do
      [] ->
        :ok

      repeated ->
        raise ArgumentError,
              "#{caller} got duplicated options: #{HRW.Brief.brief(repeated)} (give each option once)"
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

      other ->
        scorer_struct!(other, "scorer")
    end
  end

  @doc """
  A scorer struct that runs in Elixir or natively: `%HRW{}` or `%HRW.Weighted{}`
  whose `hash_fn` is `nil` or a function of arity 1, or a struct whose module
  implements `HRW.Scorer.score/3`. Anything else raises `ArgumentError`, `what`
  naming where the value came from.
  """
  @spec scorer_struct!(term(), String.t()) :: struct()
  def scorer_struct!(%struct{hash_fn: f} = scorer, _what) when struct in [HRW, HRW.Weighted] do
    _ = hash_fn!(f)
    scorer
  end

  def scorer_struct!(%mod{} = scorer, what) do
    # A module not loaded yet (code loaded on demand, in a release or iex) is
    # loaded before its function is looked for.
    if Code.ensure_loaded?(mod) and function_exported?(mod, :score, 3) do
      scorer
    else
      raise ArgumentError, "#{what} #{inspect(mod)} does not implement HRW.Scorer.score/3"
    end
  end

  def scorer_struct!(other, what) do
    raise ArgumentError, "#{what} must be a scorer struct, got: #{HRW.Brief.brief(other)}"
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
                "#{HRW.Brief.brief(other)} runs in Elixir, use it with a plain list"
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
            "got: #{HRW.Brief.brief(value)}"
  end

  @doc "A skeleton's `:cluster_size` (nodes in a leaf), an integer in `1..4096`."
  @spec cluster_size!(term(), String.t()) :: pos_integer()
  def cluster_size!(value, caller),
    do: integer!(value, caller, :cluster_size, 1, @max_cluster_size)

  @doc "A skeleton's `:fanout`, an integer in `2..4096`."
  @spec fanout!(term(), String.t()) :: pos_integer()
  def fanout!(value, caller), do: integer!(value, caller, :fanout, 2, @max_cluster_size)

  @doc "One of `allowed`, for the option that `what` names, or `ArgumentError`."
  @spec one_of!(term(), String.t(), [term(), ...]) :: term()
  def one_of!(value, what, allowed) do
    if value in allowed do
      value
    else
      {init, [last]} = Enum.split(allowed, -1)
      choices = Enum.map_join(init, ", ", &inspect/1) <> " or " <> inspect(last)
      raise ArgumentError, "#{what} must be #{choices}, got: #{HRW.Brief.brief(value)}"
    end
  end

  @doc "A number `>= 0` for option `key` of `caller`, or `ArgumentError`."
  @spec non_neg_number!(term(), String.t(), atom()) :: number()
  def non_neg_number!(value, _caller, _key) when is_number(value) and value >= 0, do: value

  def non_neg_number!(value, caller, key) do
    raise ArgumentError,
          "#{caller} #{inspect(key)} must be a non-negative number, got: #{HRW.Brief.brief(value)}"
  end

  @doc """
  An integer `>= 0` for what `what` names (`"count"`, or a caller and its option),
  or `ArgumentError`.
  """
  @spec non_neg_integer!(term(), String.t()) :: non_neg_integer()
  def non_neg_integer!(value, _what) when is_integer(value) and value >= 0, do: value

  def non_neg_integer!(value, what) do
    raise ArgumentError, "#{what} must be a non-negative integer, got: #{HRW.Brief.brief(value)}"
  end

  @doc "`nil` or a function of arity 1, for the option that `what` names."
  @spec function!(term(), String.t()) :: (term() -> term()) | nil
  def function!(fun, _what) when is_nil(fun) or is_function(fun, 1), do: fun

  def function!(other, what) do
    raise ArgumentError, "#{what} must be a function of arity 1, got: #{HRW.Brief.brief(other)}"
  end

  @doc "A scorer's or `HRW.Bounded`'s `hash_fn`: `nil` or a function of arity 1."
  @spec hash_fn!(term()) :: (term() -> integer()) | nil
  def hash_fn!(fun), do: function!(fun, "hash_fn")

  @doc "A non-negative integer count, capped at what the NIF takes."
  @spec count!(term()) :: non_neg_integer()
  def count!(count) when is_integer(count) and count >= 0, do: min(count, @max_count)
  def count!(count), do: non_neg_integer!(count, "count")

  @doc "A non-empty proper list of nodes, or `ArgumentError`."
  @spec nodes!(term()) :: [term(), ...]
  def nodes!([]), do: raise(ArgumentError, "nodes must be a non-empty list")

  def nodes!(nodes) when is_list(nodes) do
    if proper?(nodes),
      do: nodes,
      else: raise(ArgumentError, "nodes must be a proper list, got an improper list")
  end

  def nodes!(nodes),
    do: raise(ArgumentError, "nodes must be a non-empty list, got: #{HRW.Brief.brief(nodes)}")

  @doc """
  The message for a target that is neither a node list nor a prepared structure,
  the same from every function that takes one (`owner/3`, `owners/4`, batches,
  `group_by_owner/3`, `moves/4`).
  """
  @spec not_target(term()) :: String.t()
  def not_target(other) do
    "nodes must be a non-empty list, an HRW.Ring or an HRW.Skeleton, got: " <>
      HRW.Brief.brief(other)
  end

  @doc """
  A lookup target, checked: a non-empty proper node list, or a whole ring or
  skeleton; anything else raises with `not_target/1`.
  """
  @spec target!(term()) :: HRW.target()
  def target!(nodes) when is_list(nodes), do: nodes!(nodes)
  def target!(prepared) when is_prepared(prepared), do: prepared
  def target!(other), do: raise(ArgumentError, not_target(other))

  @doc """
  The message for an argument that should be a `module` struct (the accessors of
  `HRW.Ring` and `HRW.Skeleton`).
  """
  @spec not_struct(term(), module()) :: String.t()
  def not_struct(other, module),
    do: "expected an #{inspect(module)}, got: #{HRW.Brief.brief(other)}"

  @doc """
  The message for a ring or skeleton whose `field` is not what its constructor
  made (changed by hand).
  """
  @spec forged(struct(), atom()) :: String.t()
  def forged(%module{} = struct, field) do
    "the #{inspect(module)} struct's #{inspect(field)} field was changed by hand " <>
      "(build it with its constructor), got: #{HRW.Brief.brief(Map.get(struct, field))}"
  end

  @doc """
  Checks the fields a ring or skeleton is rebuilt from (`HRW.Prepared`'s rebuild):
  `:nodes` a tuple, `:weights` `nil` or a tuple as long, a skeleton's
  `:cluster_size` in range; raises `forged/2`'s `ArgumentError` naming the first
  field that is not what the constructor made.
  """
  @spec rebuildable!(struct()) :: :ok
  def rebuildable!(%{nodes: nodes} = prepared) when not is_tuple(nodes),
    do: raise(ArgumentError, forged(prepared, :nodes))

  def rebuildable!(%{nodes: nodes, weights: weights} = prepared)
      when not (is_nil(weights) or
                  (is_tuple(weights) and tuple_size(weights) == tuple_size(nodes))),
      do: raise(ArgumentError, forged(prepared, :weights))

  def rebuildable!(%HRW.Skeleton{cluster_size: size} = skeleton)
      when not (is_integer(size) and size >= 1 and size <= @max_cluster_size),
      do: raise(ArgumentError, forged(skeleton, :cluster_size))

  def rebuildable!(_prepared), do: :ok

  @doc """
  `#Name<n nodes, extra...>` for the `Inspect` of a ring or skeleton, given its
  `:nodes` field; `nodes: corrupt` when that is no tuple (changed by hand).
  """
  @spec label(String.t(), term(), [String.t()]) :: String.t()
  def label(name, nodes, extras) when is_tuple(nodes),
    do: HRW.Prepared.label(name, tuple_size(nodes), extras)

  def label(name, _nodes, extras),
    do: "##{name}<" <> Enum.join(["nodes: corrupt" | extras], ", ") <> ">"

  @doc "A list of keys; with `proper: true` also a proper one."
  @spec keys!(term(), keyword()) :: [term()]
  def keys!(keys, opts \\ [])

  def keys!(keys, opts) when is_list(keys) do
    if Keyword.get(opts, :proper, false) and not proper?(keys),
      do: raise(ArgumentError, "keys must be a proper list"),
      else: keys
  end

  def keys!(keys, _opts),
    do: raise(ArgumentError, "keys must be a list, got: #{HRW.Brief.brief(keys)}")

  @doc "Whether `list` is a proper list (walks it to its end)."
  @spec proper?(term()) :: boolean()
  def proper?([_ | tail]), do: proper?(tail)
  def proper?([]), do: true
  def proper?(_), do: false
end
