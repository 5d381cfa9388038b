defmodule HRW.Native do
  @moduledoc false
  # NIF declarations only: the one module that knows a NIF exists.
  #
  # NIFs raise `ArgumentError` themselves for bad input. `_dirty` twins run on dirty
  # CPU schedulers (protocol in `HRW.Scheduling`); resource arguments that no longer
  # decode raise `:hrw_stale_resource` (handled by `HRW.Prepared`).

  @on_load :load_nif

  @doc false
  def load_nif do
    path = :filename.join(:code.priv_dir(:hrw), ~c"native/libhrw_nif")
    :erlang.load_nif(path, 0)
  end

  def term_id(_term), do: err()
  def term_id_dirty(_term), do: err()
  def score(_key, _node), do: err()
  def score_dirty(_key, _node), do: err()

  def list_owner(_key, _nodes, _weighted), do: err()
  def list_owner_dirty(_key, _nodes, _weighted), do: err()
  def list_owners(_key, _nodes, _count, _weighted), do: err()
  def list_owners_dirty(_key, _nodes, _count, _weighted), do: err()

  def weighted_score(_key, _entry), do: err()
  def weighted_score_dirty(_key, _entry), do: err()

  def ring_new(_nodes, _weighted), do: err()
  def ring_new_dirty(_nodes, _weighted), do: err()
  def ring_owner(_ring, _key), do: err()
  def ring_owner_dirty(_ring, _key), do: err()
  def ring_owners(_ring, _key, _count), do: err()
  def ring_owners_dirty(_ring, _key, _count), do: err()

  def skeleton_new(_nodes, _weighted, _leaf_size), do: err()
  def skeleton_new_dirty(_nodes, _weighted, _leaf_size), do: err()
  def skeleton_owner(_skeleton, _key), do: err()
  def skeleton_owner_dirty(_skeleton, _key), do: err()
  def skeleton_owners(_skeleton, _key, _count), do: err()
  def skeleton_owners_dirty(_skeleton, _key, _count), do: err()

  def batch_owners(_keys, _target, _threads), do: err()
  def batch_owners_dirty(_keys, _target, _threads), do: err()
  def batch_groups(_keys, _target, _threads), do: err()
  def batch_groups_dirty(_keys, _target, _threads), do: err()
  def batch_moves(_keys, _before, _after, _threads), do: err()
  def batch_moves_dirty(_keys, _before, _after, _threads), do: err()

  def bounded_assignments(_keys, _nodes, _epsilon), do: err()
  def bounded_assignments_dirty(_keys, _nodes, _epsilon), do: err()

  defp err, do: :erlang.nif_error(:nif_not_loaded)
end
