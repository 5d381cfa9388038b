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
  alias HRW.{Native, Scheduling}

  @spec owners([term()], HRW.target(), keyword()) :: [term()]
  def owners(keys, target, opts) do
    native(keys, [target], opts, &Enum.map(keys, fn key -> HRW.owner(key, &1, opts) end), fn
      [t], threads ->
        dispatch(
          keys,
          fn -> Native.batch_owners(keys, t, threads) end,
          fn -> Native.batch_owners_dirty(keys, t, threads) end
        )
    end)
  end

  @spec groups([term()], HRW.target(), keyword()) :: %{term() => [term()]}
  def groups(keys, target, opts) do
    fallback = fn t -> keys |> Enum.group_by(&HRW.owner(&1, t, opts)) end

    native(keys, [target], opts, fallback, fn [t], threads ->
      dispatch(
        keys,
        fn -> Native.batch_groups(keys, t, threads) end,
        fn -> Native.batch_groups_dirty(keys, t, threads) end
      )
    end)
  end

  @spec moves([term()], HRW.target(), HRW.target()) :: [{term(), term(), term()}]
  def moves(keys, before, later) do
    elixir? = elixir_scored?(before, []) or elixir_scored?(later, [])

    if elixir? do
      for key <- checked_keys(keys),
          from = HRW.owner(key, before),
          to = HRW.owner(key, later),
          from != to,
          do: {key, from, to}
    else
      run_native(keys, [before, later], [], fn [a, b], threads ->
        dispatch(
          keys,
          fn -> Native.batch_moves(keys, a, b, threads) end,
          fn -> Native.batch_moves_dirty(keys, a, b, threads) end
        )
      end)
    end
  end

  defp native(keys, [target], opts, fallback, call) do
    if elixir_scored?(target, opts) do
      checked_keys(keys)
      fallback.(target)
    else
      run_native(keys, [target], opts, call)
    end
  end

  defp run_native(keys, targets, opts, call) do
    checked_keys(keys)
    threads = threads()

    try do
      call.(Enum.map(targets, &native_target(&1, opts)), threads)
    catch
      :error, :hrw_stale_resource ->
        call.(Enum.map(targets, &native_target(rebuilt(&1), opts)), threads)
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

  defp native_target(%HRW.Ring{resource: r, nodes: nodes}, _opts), do: {:ring, r, nodes}
  defp native_target(%HRW.Skeleton{resource: r, nodes: nodes}, _opts), do: {:skeleton, r, nodes}

  defp native_target(nodes, opts) when is_list(nodes) do
    {:list, HRW.checked_nodes!(nodes), HRW.scorer(opts, "HRW batch") == :weighted}
  end

  defp native_target(other, _opts) do
    raise ArgumentError,
          "expected nodes to be a non-empty list, an HRW.Ring or an HRW.Skeleton, got: " <>
            HRW.brief(other)
  end

  defp rebuilt(%HRW.Ring{} = ring), do: HRW.Ring.rebuilt(ring)
  defp rebuilt(%HRW.Skeleton{} = skeleton), do: HRW.Skeleton.rebuilt(skeleton)
  defp rebuilt(other), do: other

  # Scorers that run in Elixir have no native batch: they fall back to one lookup per key.
  defp elixir_scored?(%HRW.Skeleton{resource: nil}, _opts), do: true

  defp elixir_scored?(nodes, opts) when is_list(nodes),
    do: is_struct(HRW.scorer(opts, "HRW batch"))

  defp elixir_scored?(_prepared, _opts), do: false

  defp checked_keys(keys) when is_list(keys), do: keys

  defp checked_keys(keys) do
    raise ArgumentError, "keys must be a list, got: #{HRW.brief(keys)}"
  end
end
