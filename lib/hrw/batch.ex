defmodule HRW.Batch do
  @moduledoc false
  # Many keys in one NIF call (see `HRW.owner_batch/3`). Small batches run on the
  # calling scheduler; batches over the NIF's work budget (native/hrw_core/src/
  # cost.rs) move to a dirty CPU scheduler, where large batches (PARALLEL_MIN_KEYS in
  # native/hrw_nif/src/batch.rs) are split over a rayon pool of one thread fewer
  # than there are dirty CPU schedulers online: the batch leaves a core to the
  # normal schedulers (on a 2-core machine, no split). Which NIF call a target
  # takes, and the rebuild of a stale structure, are `HRW.Prepared`'s; this module
  # checks the inputs and patches overrides in.

  import HRW.Prepared, only: [is_prepared: 1]

  alias HRW.{Compat, Options, Overrides, Prepared}

  @spec owners([term()], HRW.target(), keyword()) :: [term()]
  def owners(keys, target, opts) do
    caller = "HRW.owner_batch/3"

    if elixir_scored?(target, opts, caller) do
      elixir_owners(keys, target, opts, caller)
    else
      native_owners(keys, target, opts, caller)
    end
  end

  @spec groups([term()], HRW.target(), keyword()) :: %{term() => [term()]}
  def groups(keys, target, opts) do
    caller = "HRW.group_by_owner/3"

    cond do
      elixir_scored?(target, opts, caller) ->
        owner = elixir_owner(target, opts, caller)
        keys |> Options.keys!(proper: true) |> Enum.group_by(owner)

      Prepared.overrides(target) != nil ->
        # Computed natively, then only the groups that overridden keys leave or join
        # are patched.
        groups = native_groups(keys, target, opts, caller)

        Overrides.regroup(
          keys,
          groups,
          Prepared.overrides(target),
          &Prepared.own_owner(&1, target)
        )

      true ->
        native_groups(keys, target, opts, caller)
    end
  end

  defp native_groups(keys, target, opts, caller) do
    [t] = native_targets(keys, [target], opts, caller)
    Prepared.groups_of(keys, t, threads())
  end

  @spec moves([term()], HRW.target(), HRW.target(), keyword(), String.t()) ::
          [{term(), term(), term()}]
  def moves(keys, before, later, opts, caller) do
    # Both evaluated, so both targets' options are checked.
    elixir? = Enum.map([before, later], &elixir_scored?(&1, opts, caller))

    if Enum.any?(elixir?) or overridden?(keys, before) or overridden?(keys, later) do
      # Each side's owners (natively where it can), compared exactly here.
      [from, to] =
        Enum.zip_with([before, later], elixir?, fn
          target, true -> elixir_owners(keys, target, opts, caller)
          target, false -> native_owners(keys, target, opts, caller)
        end)

      Overrides.moves(keys, from, to)
    else
      [a, b] = native_targets(keys, [before, later], opts, caller)
      Prepared.moves_of(keys, a, b, threads())
    end
  end

  # Scorers that run in Elixir have no native batch: one lookup per key, as
  # `HRW.owner/3` makes it.
  defp elixir_owners(keys, target, opts, caller) do
    owner = elixir_owner(target, opts, caller)
    keys |> Options.keys!(proper: true) |> Enum.map(owner)
  end

  defp elixir_owner(target, opts, caller) do
    case Options.target!(target) do
      nodes when is_list(nodes) ->
        scorer = Options.scorer!(opts, caller)
        &Compat.owner(&1, nodes, scorer)

      prepared ->
        &Prepared.owner(&1, prepared)
    end
  end

  defp native_owners(keys, target, opts, caller) do
    [t] = native_targets(keys, [target], opts, caller)
    owners = Prepared.owners_of(keys, t, threads())

    case Prepared.overrides(target) do
      nil -> owners
      overrides -> Overrides.patch(keys, owners, overrides)
    end
  end

  defp overridden?(keys, target) do
    case Prepared.overrides(target) do
      nil -> false
      overrides -> Overrides.any_key?(keys, overrides)
    end
  end

  # The targets as `HRW.Prepared`'s batches take them, after checking the keys and
  # every target.
  defp native_targets(keys, targets, opts, caller) do
    _ = Options.keys!(keys)
    Enum.map(targets, &native_target(&1, opts, caller))
  end

  @doc false
  # The rayon pool's size: the `:batch_threads` application setting, else one fewer
  # than the dirty CPU schedulers online. The pool is created once, by the first
  # batch that is split over it (native/hrw_nif/src/batch.rs, `pool`). A setting
  # is a whole number from 1 to 4 times the schedulers online (each is an OS
  # thread: more only waits for cores); anything else raises, naming it.
  @spec threads() :: pos_integer()
  def threads do
    max = 4 * :erlang.system_info(:schedulers_online)

    case Application.get_env(:hrw, :batch_threads) do
      nil ->
        default_threads(:erlang.system_info(:dirty_cpu_schedulers_online))

      n when is_integer(n) and n >= 1 and n <= max ->
        n

      other ->
        raise ArgumentError,
              "config :hrw, batch_threads must be a whole number from 1 to #{max} " <>
                "(4 times the #{div(max, 4)} schedulers online), got: #{HRW.Brief.brief(other)}"
    end
  end

  defp default_threads(online) when is_integer(online) and online > 1, do: online - 1
  defp default_threads(_online), do: 1

  defp native_target(target, opts, caller) do
    case Options.target!(target) do
      nodes when is_list(nodes) ->
        Prepared.list_target(nodes, Options.scorer!(opts, caller) == :weighted)

      prepared ->
        prepared
    end
  end

  # Whether `target` is scored in Elixir (no native batch). Checks the options, for
  # every kind of target.
  defp elixir_scored?(target, opts, caller) do
    scorer = Options.scorer!(opts, caller)

    case target do
      nodes when is_list(nodes) -> is_struct(scorer)
      prepared when is_prepared(prepared) -> Prepared.elixir_scored?(prepared)
      _other -> false
    end
  end
end
