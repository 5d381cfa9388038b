defmodule HRW.Batch do
  @moduledoc false
  # Many keys in one NIF call (see `HRW.owner_batch/3`). Small batches run on the
  # calling scheduler; batches over the ~0.5 ms work budget move to a dirty CPU
  # scheduler, where batches of 20,000 keys or more are split over a rayon pool of
  # one thread fewer than there are dirty CPU schedulers online: the batch leaves a
  # core to the normal schedulers. (On a 2-core machine that means no split: with
  # both cores busy, a 1 ms timer on a normal scheduler was seen 100+ ms late.)
  # Lists longer than
  # @dirty_keys go to the dirty scheduler directly: any target makes that much work
  # exceed the budget, and trying on the normal scheduler first would only waste it.

  @dirty_keys 8192

  require HRW.Scheduling
  alias HRW.{Native, Overrides, Scheduling}

  @spec owners([term()], HRW.target(), keyword()) :: [term()]
  def owners(keys, target, opts) do
    caller = "HRW.owner_batch/3"

    if elixir_scored?(target, opts, caller) do
      elixir_owners(keys, target, opts)
    else
      native_owners(keys, target, opts, caller)
    end
  end

  @spec groups([term()], HRW.target(), keyword()) :: %{term() => [term()]}
  def groups(keys, target, opts) do
    caller = "HRW.group_by_owner/3"

    cond do
      elixir_scored?(target, opts, caller) ->
        target = checked!(target)
        keys |> checked_proper_keys!() |> Enum.group_by(&HRW.owner(&1, target, opts))

      overrides(target) != nil ->
        # Computed natively, then only the groups that overridden keys leave or join
        # are patched.
        groups = native_groups(keys, target, opts, caller)
        Overrides.regroup(keys, groups, overrides(target), &own_owner(target, &1))

      true ->
        native_groups(keys, target, opts, caller)
    end
  end

  # A prepared structure's owner of `key` without its overrides.
  defp own_owner(%HRW.Ring{} = ring, key), do: HRW.Ring.owner(%{ring | overrides: nil}, key)

  defp own_owner(%HRW.Skeleton{} = skeleton, key),
    do: HRW.Skeleton.owner(%{skeleton | overrides: nil}, key)

  defp native_groups(keys, target, opts, caller) do
    run_native(keys, [target], opts, caller, fn [t], threads ->
      dispatch(
        keys,
        fn -> Native.batch_groups(keys, t, threads) end,
        fn -> Native.batch_groups_dirty(keys, t, threads) end
      )
    end)
  end

  @spec moves([term()], HRW.target(), HRW.target(), keyword()) :: [{term(), term(), term()}]
  def moves(keys, before, later, opts) do
    caller = "HRW.moves/4"
    # Both evaluated, so both targets' options are checked.
    elixir? = Enum.map([before, later], &elixir_scored?(&1, opts, caller))

    if Enum.any?(elixir?) or overridden?(keys, before) or overridden?(keys, later) do
      # Each side's owners (natively where it can), compared exactly here.
      [from, to] =
        Enum.zip_with([before, later], elixir?, fn
          target, true -> elixir_owners(keys, target, opts)
          target, false -> native_owners(keys, target, opts, caller)
        end)

      Overrides.moves(keys, from, to)
    else
      run_native(keys, [before, later], opts, caller, fn [a, b], threads ->
        dispatch(
          keys,
          fn -> Native.batch_moves(keys, a, b, threads) end,
          fn -> Native.batch_moves_dirty(keys, a, b, threads) end
        )
      end)
    end
  end

  # Scorers that run in Elixir have no native batch: one lookup per key.
  defp elixir_owners(keys, target, opts) do
    target = checked!(target)
    keys |> checked_proper_keys!() |> Enum.map(&HRW.owner(&1, target, opts))
  end

  defp native_owners(keys, target, opts, caller) do
    owners =
      run_native(keys, [target], opts, caller, fn [t], threads ->
        dispatch(
          keys,
          fn -> Native.batch_owners(keys, t, threads) end,
          fn -> Native.batch_owners_dirty(keys, t, threads) end
        )
      end)

    case overrides(target) do
      nil -> owners
      overrides -> Overrides.patch(keys, owners, overrides)
    end
  end

  defp overrides(%HRW.Ring{overrides: overrides}), do: overrides
  defp overrides(%HRW.Skeleton{overrides: overrides}), do: overrides
  defp overrides(_target), do: nil

  defp overridden?(keys, target) do
    case overrides(target) do
      nil -> false
      overrides -> Overrides.any_key?(keys, overrides)
    end
  end

  defp run_native(keys, targets, opts, caller, call) do
    checked_keys(keys)
    threads = threads()

    try do
      call.(Enum.map(targets, &native_target(&1, opts, caller)), threads)
    catch
      :error, :hrw_stale_resource ->
        call.(Enum.map(targets, &native_target(rebuilt(&1), opts, caller)), threads)
    end
  end

  @doc false
  # The rayon pool's size: the `:batch_threads` application setting, else one fewer
  # than the dirty CPU schedulers online. The pool is created once, at first use.
  @spec threads() :: pos_integer()
  def threads do
    case Application.get_env(:hrw, :batch_threads) do
      n when is_integer(n) and n > 0 -> n
      _ -> max(:erlang.system_info(:dirty_cpu_schedulers_online) - 1, 1)
    end
  end

  @doc false
  # Runs `dirty` directly for long key lists, else `normal` with the dirty fallback.
  @spec dispatch(list(), (() -> result), (() -> result)) :: result when result: term()
  def dispatch(keys, normal, dirty) do
    if longer_than?(keys, @dirty_keys) do
      dirty.()
    else
      Scheduling.dirty_fallback(normal.(), dirty.())
    end
  end

  # Counts at most `limit + 1` cells, so a long list costs no more than a short one.
  defp longer_than?([_ | rest], limit) when limit > 0, do: longer_than?(rest, limit - 1)
  defp longer_than?([_ | _], 0), do: true
  defp longer_than?(_, _), do: false

  defp native_target(%HRW.Ring{resource: r, nodes: nodes}, _opts, _caller),
    do: {:ring, r, nodes}

  defp native_target(%HRW.Skeleton{resource: r, nodes: nodes}, _opts, _caller),
    do: {:skeleton, r, nodes}

  defp native_target(nodes, opts, caller) when is_list(nodes) do
    {:list, HRW.checked_nodes!(nodes), HRW.scorer(opts, caller) == :weighted}
  end

  defp native_target(other, _opts, _caller), do: raise(ArgumentError, not_target(other))

  defp not_target(other) do
    "expected nodes to be a non-empty list, an HRW.Ring or an HRW.Skeleton, got: " <>
      HRW.brief(other)
  end

  # A target for the Elixir-scorer paths, checked as the native path checks it.
  defp checked!(nodes) when is_list(nodes), do: HRW.checked_nodes!(nodes)
  defp checked!(%HRW.Skeleton{} = skeleton), do: skeleton
  defp checked!(other), do: raise(ArgumentError, not_target(other))

  defp rebuilt(%HRW.Ring{} = ring), do: HRW.Ring.rebuilt(ring)
  defp rebuilt(%HRW.Skeleton{} = skeleton), do: HRW.Skeleton.rebuilt(skeleton)
  defp rebuilt(other), do: other

  # Whether `target` is scored in Elixir (no native batch). Checks the options, for
  # every kind of target.
  defp elixir_scored?(target, opts, caller) do
    scorer = HRW.scorer(opts, caller)

    case target do
      %HRW.Skeleton{resource: nil} -> true
      nodes when is_list(nodes) -> is_struct(scorer)
      _prepared -> false
    end
  end

  defp checked_keys(keys) when is_list(keys), do: keys

  defp checked_keys(keys) do
    raise ArgumentError, "keys must be a list, got: #{HRW.brief(keys)}"
  end

  # The native path finds an improper tail as it walks; the Elixir paths check first.
  defp checked_proper_keys!(keys) do
    if proper?(checked_keys(keys)),
      do: keys,
      else: raise(ArgumentError, "keys must be a proper list")
  end

  defp proper?([_ | tail]), do: proper?(tail)
  defp proper?([]), do: true
  defp proper?(_), do: false
end
