# These helpers use ExUnit's assertions. `mix test` loads ExUnit before compiling
# them, but `MIX_ENV=test mix compile` on Elixir 1.15+ puts only dependencies on the
# code path.
if function_exported?(Mix, :ensure_application!, 1), do: Mix.ensure_application!(:ex_unit)

defmodule HRW.TestHostile do
  @moduledoc false
  # Hostile terms through every public function (test/hrw/reliability/): whatever
  # the input, each call either answers or raises `ArgumentError`. The VM never
  # crashes and a NIF never panics (`ErlangError` with `:nif_panicked`).

  import ExUnit.Assertions

  @nodes ["n1", "n2", "n3", :n4, {:n, 5}]
  @weighted [{"n1", 1}, {"n2", 2.5}, {:n3, 7}]

  @doc "The structures the calls run on."
  def targets do
    ring = HRW.Ring.new(@nodes)
    skeleton = HRW.build(@nodes, cluster_size: 2)
    wring = HRW.Ring.new(@weighted, scorer: %HRW.Weighted{})
    wskeleton = HRW.build(@weighted, scorer: %HRW.Weighted{}, cluster_size: 1)

    %{
      list: @nodes,
      ring: ring,
      skeleton: skeleton,
      wring: wring,
      wskeleton: wskeleton
    }
  end

  # Every public entry point, with `t` in each argument position that takes terms,
  # in three groups: `:native` (t reaches the NIF), `:elixir` (t is hashed by an
  # Elixir scorer, hrw 0.2.1's path) and `:option` (t is an option or a count:
  # validated in Elixir, whose error messages inspect it). A group may also be a
  # function of `t` giving more labelled calls (a library built on hrw adds its own).
  defp calls(t, targets, groups) do
    Enum.flat_map(groups, &group(&1, t, targets))
  end

  defp group(more, t, _targets) when is_function(more, 1), do: more.(t)

  defp group(:native, t, targets) do
    %{list: list, ring: ring, skeleton: skeleton, wring: wring, wskeleton: wskeleton} = targets
    w = [scorer: %HRW.Weighted{}]

    [
      term_id: fn -> HRW.term_id(t) end,
      score_key: fn -> HRW.score(%HRW{}, t, "n") end,
      score_node: fn -> HRW.score(%HRW{}, "k", t) end,
      owner_list: fn -> HRW.owner(t, list) end,
      owner_ring: fn -> HRW.owner(t, ring) end,
      owner_skeleton: fn -> HRW.owner(t, skeleton) end,
      owners_list: fn -> HRW.owners(t, list, 3) end,
      owners_ring: fn -> HRW.owners(t, ring, 3) end,
      owners_skeleton: fn -> HRW.owners(t, skeleton, 9) end,
      node_in_list: fn -> HRW.owner("k", [t, "a"]) end,
      nodes_as_t: fn -> HRW.owner("k", t) end,
      owners_nodes_as_t: fn -> HRW.owners("k", t, 2) end,
      ring_new: fn -> HRW.Ring.new([t, "a", t]) end,
      ring_new_t: fn -> HRW.Ring.new(t) end,
      build: fn -> HRW.build(["a", t, "b"], cluster_size: 1) end,
      build_t: fn -> HRW.build(t) end,
      owner_batch_ring: fn -> HRW.owner_batch([t, "k", t], ring) end,
      owner_batch_skeleton: fn -> HRW.owner_batch([t], skeleton) end,
      owner_batch_list: fn -> HRW.owner_batch(["k", t], list) end,
      owner_batch_keys_t: fn -> HRW.owner_batch(t, ring) end,
      owner_batch_target_t: fn -> HRW.owner_batch(["k"], t) end,
      owner_batch_node: fn -> HRW.owner_batch(["k", "j"], [t, "a"]) end,
      group_by_owner: fn -> HRW.group_by_owner([t, "k", t], skeleton) end,
      group_by_owner_keys_t: fn -> HRW.group_by_owner(t, list) end,
      moves: fn -> HRW.moves([t, "k"], ring, skeleton) end,
      moves_keys_t: fn -> HRW.moves(t, list, ring) end,
      moves_target_t: fn -> HRW.moves(["k"], ring, t) end,
      moved_fraction: fn -> HRW.moved_fraction([t], list, [t | list]) end,
      moved_fraction_keys_t: fn -> HRW.moved_fraction(t, list, ring) end,
      bounded_key: fn -> HRW.Bounded.assignments([t, "k"], ["a", "b"]) end,
      bounded_node: fn -> HRW.Bounded.assignments(["k", "j"], ["a", t]) end,
      bounded_keys_t: fn -> HRW.Bounded.assignments(t, ["a"]) end,
      bounded_nodes_t: fn -> HRW.Bounded.assignments(["k"], t) end,
      w_owner_list: fn -> HRW.owner(t, @weighted, w) end,
      w_owner_ring: fn -> HRW.owner(t, wring) end,
      w_owner_skeleton: fn -> HRW.owner(t, wskeleton) end,
      w_owners_list: fn -> HRW.owners(t, @weighted, 2, w) end,
      w_owners_skeleton: fn -> HRW.owners(t, wskeleton, 3) end,
      w_node: fn -> HRW.owner("k", [{t, 2}, {"a", 1}], w) end,
      w_weight: fn -> HRW.owner("k", [{"a", t}], w) end,
      w_entry: fn -> HRW.owners("k", [t], 1, w) end,
      w_ring_new: fn -> HRW.Ring.new([{t, 1}, {"b", 3}], w) end,
      w_ring_weight: fn -> HRW.Ring.new([{"a", t}], w) end,
      w_build: fn -> HRW.build([{t, 2}, {"a", t}], w) end,
      w_score_key: fn -> HRW.Weighted.score(%HRW.Weighted{}, t, {"a", 1}) end,
      w_score_entry: fn -> HRW.Weighted.score(%HRW.Weighted{}, "k", t) end,
      w_batch: fn -> HRW.owner_batch([t], wskeleton) end,
      w_batch_list: fn -> HRW.group_by_owner([t], [{t, 1}, {"a", 2}], w) end
    ]
  end

  defp group(:elixir, t, %{list: list}) do
    phash = [scorer: %HRW{hash_fn: &:erlang.phash2/1}]
    wphash = [scorer: %HRW.Weighted{hash_fn: &:erlang.phash2/1}]

    [
      owner_phash: fn -> HRW.owner(t, list, phash) end,
      owners_phash_node: fn -> HRW.owners("k", [t | list], 2, phash) end,
      bounded_hash_fn: fn ->
        HRW.Bounded.assignments([t, "k"], ["a", "b"], hash_fn: &:erlang.phash2/1)
      end,
      w_phash_key: fn -> HRW.owner(t, @weighted, wphash) end,
      w_phash_weight: fn -> HRW.owners("k", [{"a", t}, {"b", 1}], 2, wphash) end,
      w_phash_entry: fn -> HRW.owner("k", [t], wphash) end,
      w_phash_score: fn ->
        HRW.Weighted.score(%HRW.Weighted{hash_fn: &:erlang.phash2/1}, "k", t)
      end
    ]
  end

  defp group(:option, t, %{list: list}) do
    [
      count_as_t: fn -> HRW.owners("k", list, t) end,
      opts_as_t: fn -> HRW.owner("k", list, t) end,
      scorer_as_t: fn -> HRW.owner("k", list, scorer: t) end,
      build_cluster_size: fn -> HRW.build(["a"], cluster_size: t) end,
      bounded_epsilon: fn -> HRW.Bounded.assignments(["k", "j", "i"], ["a"], epsilon: t) end,
      bounded_hash_fn_epsilon: fn ->
        HRW.Bounded.assignments(["k", "j", "i"], ["a"], epsilon: t, hash_fn: &:erlang.phash2/1)
      end
    ]
  end

  # Runs the calls on `t`; returns those that neither answered nor raised
  # ArgumentError, as {call, what happened}.
  def misbehaving(t, targets, groups \\ [:native, :elixir, :option]) do
    for {label, call} <- calls(t, targets, groups),
        outcome = outcome(call),
        outcome != :ok,
        do: {label, outcome}
  end

  @doc "`:ok` when `call` answers or raises `ArgumentError`, else what it did."
  def outcome(call) do
    _ = call.()
    :ok
  rescue
    ArgumentError -> :ok
    other -> {:raised, other}
  catch
    kind, reason -> {kind, reason}
  end

  def assert_well_behaved(terms, targets, groups \\ [:native, :elixir, :option]) do
    failures =
      Enum.flat_map(terms, fn t ->
        for {label, outcome} <- misbehaving(t, targets, groups), do: {label, outcome, t}
      end)

    assert failures == [],
           "calls that neither answered nor raised ArgumentError:\n" <>
             Enum.map_join(Enum.take(failures, 20), "\n", fn {label, outcome, t} ->
               "  #{label}: #{short(outcome)} on #{short(t)}"
             end)
  end

  defp short(term), do: term |> inspect(limit: 8, printable_limit: 40) |> String.slice(0, 300)

  @kinds [:list, :tuple, :map_value, :map_key, :improper_head, :improper_tail, :big_map]

  @doc "The containers `nest/3` can use."
  def kinds, do: @kinds

  # Nest `leaf` `depth` levels deep, choosing each level's container with `kind`.
  def nest(leaf, depth, kind) do
    Enum.reduce(1..depth//1, leaf, fn level, acc ->
      case if(kind == :mixed, do: Enum.at(@kinds, rem(level, length(@kinds))), else: kind) do
        :list -> [acc]
        :tuple -> {acc}
        :map_value -> %{a: acc}
        :map_key -> %{acc => 1}
        :improper_head -> [acc | :tail]
        :improper_tail -> [:head | acc]
        :big_map -> Map.new(1..40, &{&1, &1}) |> Map.put(:x, acc)
      end
    end)
  end
end
