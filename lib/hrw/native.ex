defmodule HRW.Native do
  @moduledoc false
  # NIF declarations only: the one module that knows a NIF exists.
  #
  # Protocol: a NIF raises `ArgumentError` itself for bad input. A NIF that may see
  # large input runs on a normal scheduler within a work budget (~0.5 ms) and raises
  # `:hrw_needs_dirty` when its input would exceed it; the caller then calls the
  # `_dirty` twin, which runs on a dirty CPU scheduler. `dirty_fallback/2` does that.

  @on_load :load_nif

  @doc false
  def load_nif do
    path = :filename.join(:code.priv_dir(:hrw), ~c"native/libhrw_nif")
    :erlang.load_nif(path, 0)
  end

  @doc false
  defmacro dirty_fallback(call, dirty_call) do
    quote do
      try do
        unquote(call)
      catch
        :error, :hrw_needs_dirty -> unquote(dirty_call)
      end
    end
  end

  def term_id(_term), do: err()
  def term_id_dirty(_term), do: err()
  def score(_key, _node), do: err()
  def score_dirty(_key, _node), do: err()

  def list_owner(_key, _nodes), do: err()
  def list_owner_dirty(_key, _nodes), do: err()
  def list_owners(_key, _nodes, _count), do: err()
  def list_owners_dirty(_key, _nodes, _count), do: err()

  def weighted_score(_key, _entry), do: err()
  def weighted_list_owner(_key, _nodes), do: err()
  def weighted_list_owner_dirty(_key, _nodes), do: err()
  def weighted_list_owners(_key, _nodes, _count), do: err()
  def weighted_list_owners_dirty(_key, _nodes, _count), do: err()

  def ring_new(_nodes, _weighted), do: err()
  def ring_new_dirty(_nodes, _weighted), do: err()
  def ring_owner(_ring, _key), do: err()
  def ring_owner_dirty(_ring, _key), do: err()
  def ring_owners(_ring, _key, _count), do: err()
  def ring_owners_dirty(_ring, _key, _count), do: err()

  defp err, do: :erlang.nif_error(:nif_not_loaded)
end
