defmodule HRW.Batch do
  @moduledoc false
  # Many keys in one NIF call (see `HRW.owner_batch/3`). Small batches run on the
  # calling scheduler; batches over the ~0.5 ms work budget move to a dirty CPU
  # scheduler, where batches of 20,000 keys or more are split over a rayon pool of
  # one thread fewer than there are dirty CPU schedulers online: the batch leaves a
  # core to the normal schedulers. (On a 2-core machine that means no split: with
  # both cores busy, a 1 ms timer on a normal scheduler was seen 100+ ms late.)
  # Scheduling and the NIF's target protocol live in `HRW.Native`.

  alias HRW.Native

  @spec owners([term()], HRW.target(), keyword()) :: [term()]
  def owners(keys, target, opts) do
    if elixir_scored?(target, opts) do
      keys |> checked_keys() |> Enum.map(&HRW.owner(&1, target, opts))
    else
      Native.batch_owners(checked_keys(keys), native_target(target, opts), threads())
    end
  end

  @spec groups([term()], HRW.target(), keyword()) :: %{term() => [term()]}
  def groups(keys, target, opts) do
    if elixir_scored?(target, opts) do
      keys |> checked_keys() |> Enum.group_by(&HRW.owner(&1, target, opts))
    else
      Native.batch_groups(checked_keys(keys), native_target(target, opts), threads())
    end
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
      targets = [native_target(before, []), native_target(later, [])]
      Native.batch_moves(checked_keys(keys), hd(targets), List.last(targets), threads())
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

  defp native_target(%HRW.Ring{} = ring, _opts), do: ring
  defp native_target(%HRW.Skeleton{} = skeleton, _opts), do: skeleton

  defp native_target(nodes, opts) when is_list(nodes) do
    {:list, HRW.checked_nodes!(nodes), HRW.scorer(opts, "HRW batch") == :weighted}
  end

  defp native_target(other, _opts) do
    raise ArgumentError,
          "expected nodes to be a non-empty list, an HRW.Ring or an HRW.Skeleton, got: " <>
            HRW.brief(other)
  end

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
