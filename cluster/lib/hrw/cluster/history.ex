defmodule HRW.Cluster.History do
  @moduledoc false
  # The history a published entry keeps: its generation count and the last
  # `:depth` structures (newest first, `nil` for a generation without a member or
  # without quorum), the one a lookup's `back:` names, and a key's owners over all
  # of them (`HRW.Cluster.stable_owners/3`).

  alias HRW.Cluster.{Check, Options, Server}

  @doc "The number of generations published so far."
  @spec generation(atom()) :: pos_integer()
  def generation(name) do
    {generation, _history} = Server.entry!(name)
    generation
  end

  @doc "The structure of the generation `opts` names (`back: 0`, the current one, by default)."
  @spec structure(atom(), term()) :: HRW.Cluster.structure()
  def structure(name, []) do
    {_generation, history} = Server.entry!(name)
    elem(history, 0)
  end

  def structure(name, opts) do
    {_generation, history} = Server.entry!(name)
    elem(history, Options.back!(opts, tuple_size(history), name))
  end

  @doc "The distinct `count` best owners of `key` in every kept generation, newest first."
  @spec stable_owners(atom(), term(), term()) :: [node()]
  def stable_owners(name, key, count) do
    {_generation, history} = Server.entry!(name)
    count = Check.count!(count)

    history
    |> Tuple.to_list()
    |> Enum.flat_map(fn
      nil -> []
      structure -> HRW.owners(key, structure, count)
    end)
    |> Enum.uniq()
  end
end
