defmodule HRW.KeyRulesTest do
  # One answer per key whatever the entry point: `owner`, `owners`, `owner_batch`,
  # `group_by_owner` and `moves` give the same owner, or raise the same exception,
  # for every key on every structure: ordinary keys, overridden keys and keys that
  # the native paths refuse (nested deeper than 256 levels, docs/HASHING.md §2).
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent

  import HRW.TestStats

  @phash2 %HRW{hash_fn: &:erlang.phash2/1}
  @weighted %HRW.Weighted{}

  @nodes node_names(40)
  @weighted_nodes Enum.map(@nodes, &{&1, :erlang.phash2(&1, 4) + 1})

  # A term nested `n` levels deep: the innermost atom is at depth n.
  defp nested(n), do: Enum.reduce(1..n, :leaf, fn _, acc -> [acc] end)
  defp nested_tuple(n), do: Enum.reduce(1..n, :leaf, fn i, acc -> {i, acc} end)

  # Keys no native path can hash, and keys right at the limit.
  defp too_deep, do: [nested(257), nested(300), nested_tuple(257), %{deep: nested(256)}]
  defp at_limit, do: [nested(256), nested_tuple(256), %{deep: nested(255)}]

  defp ordinary, do: ["user:1", {:user, 42}, 1.0, nil, [], %{a: 1}, <<1::3>>]

  # Ordinary overridden keys, one key at the depth limit, and the keys of `too_deep/0`
  # (the report: `overrides: %{deep => "p"}`).
  defp hashable_overrides do
    %{
      "hot" => "node-3",
      "pair" => ["node-7", "node-2"],
      1 => :stranger,
      nested(256) => "pinned-at-limit"
    }
  end

  defp hostile_overrides, do: Map.merge(hashable_overrides(), Map.new(too_deep(), &{&1, "p"}))

  defp keys, do: ordinary() ++ Map.keys(hashable_overrides()) ++ at_limit() ++ too_deep()

  # {label, build(opts), list-target options, hashed?}: every structure, built from
  # its options (`[]` or `[overrides: ...]`).
  defp kinds do
    [
      {"list", fn [] -> @nodes end, [], true},
      {"weighted list", fn [] -> @weighted_nodes end, [scorer: @weighted], true},
      {"phash2 list", fn [] -> @nodes end, [scorer: @phash2], false},
      {"ring", &HRW.Ring.new(@nodes, &1), [], true},
      {"weighted ring", &HRW.Ring.new(@weighted_nodes, [scorer: @weighted] ++ &1), [], true},
      {"skeleton", &HRW.build(@nodes, &1), [], true},
      {"small-leaf skeleton", &HRW.build(@nodes, [cluster_size: 4] ++ &1), [], true},
      {"weighted skeleton", &HRW.build(@weighted_nodes, [scorer: @weighted] ++ &1), [], true},
      {"phash2 skeleton", &HRW.build(@nodes, [scorer: @phash2] ++ &1), [], false}
    ]
  end

  # Every target to test: each kind plain, and each prepared kind with the hostile
  # overrides when it accepts them, else (refused with ArgumentError) with the
  # hashable ones.
  defp targets do
    for {label, build, opts, hashed?} <- kinds(),
        {suffix, target} <- [{"", build.([])} | with_overrides(label, build, hashed?)] do
      {label <> suffix, target, opts, hashed?}
    end
  end

  defp with_overrides(label, build, hashed?) do
    if String.ends_with?(label, "list") do
      []
    else
      case attempt(fn -> build.(overrides: hostile_overrides()) end) do
        # (Refused for hashed structures: the test after next. Accepted, they must
        # still give one answer per key.)
        {:ok, target} ->
          [{" with hostile overrides", target}]

        {:error, ArgumentError} ->
          assert hashed?, "#{label}: refused overrides of keys it can look up"
          [{" with overrides", build.(overrides: hashable_overrides())}]
      end
    end
  end

  # {:ok, value} or {:error, exception module}.
  defp attempt(fun) do
    {:ok, fun.()}
  rescue
    error -> {:error, error.__struct__}
  end

  defp map_ok({:ok, value}, fun), do: {:ok, fun.(value)}
  defp map_ok(error, _fun), do: error

  # The one-node target of the same kind, whose owner is always "elsewhere".
  defp elsewhere(%HRW.Ring{weights: nil}), do: HRW.Ring.new(["elsewhere"])
  defp elsewhere(%HRW.Ring{}), do: HRW.Ring.new([{"elsewhere", 1}], scorer: @weighted)

  defp elsewhere(%HRW.Skeleton{weights: nil, scorer: scorer}),
    do: HRW.build(["elsewhere"], scorer: scorer)

  defp elsewhere(%HRW.Skeleton{}), do: HRW.build([{"elsewhere", 1}], scorer: @weighted)
  defp elsewhere([{_, _} | _]), do: [{"elsewhere", 1}]
  defp elsewhere(list) when is_list(list), do: ["elsewhere"]

  # The owner of `key` as each entry point answers it.
  defp answers(key, target, opts) do
    other = elsewhere(target)
    some = "user:7"

    [
      owner: attempt(fn -> HRW.owner(key, target, opts) end),
      owners_1: attempt(fn -> HRW.owners(key, target, 1, opts) end) |> map_ok(&hd/1),
      owners_3: attempt(fn -> HRW.owners(key, target, 3, opts) end) |> map_ok(&hd/1),
      owner_batch: attempt(fn -> HRW.owner_batch([key], target, opts) end) |> map_ok(&hd/1),
      owner_batch_middle:
        attempt(fn -> HRW.owner_batch([some, key, some], target, opts) end)
        |> map_ok(&Enum.at(&1, 1)),
      group_by_owner:
        attempt(fn -> HRW.group_by_owner([key], target, opts) end)
        |> map_ok(fn groups ->
          [{owner, [^key]}] = Map.to_list(groups)
          owner
        end),
      moves_from:
        attempt(fn -> HRW.moves([key], target, other, opts) end)
        |> map_ok(fn [{^key, from, "elsewhere"}] -> from end),
      moves_to:
        attempt(fn -> HRW.moves([key], other, target, opts) end)
        |> map_ok(fn [{^key, "elsewhere", to}] -> to end)
    ]
  end

  test "every entry point gives one key the same owner, or the same error, on every structure" do
    for {label, target, opts, hashed?} <- targets(), key <- keys() do
      [{:owner, expected} | _] = answers = answers(key, target, opts)

      for {entry, answer} <- answers do
        assert answer == expected,
               "#{label}, key #{HRW.Brief.brief(key)}: #{entry} answered #{inspect(answer)}, " <>
                 "owner/3 #{inspect(expected)}"
      end

      too_deep? = key in too_deep()

      cond do
        too_deep? and hashed? ->
          assert expected == {:error, ArgumentError}, "#{label}: #{HRW.Brief.brief(key)}"

        target_overrides(target) |> Map.has_key?(key) ->
          [pinned | _] = Map.fetch!(target_overrides(target), key)
          assert expected == {:ok, pinned}, "#{label}: #{HRW.Brief.brief(key)}"

        true ->
          assert {:ok, _} = expected, "#{label}: #{HRW.Brief.brief(key)}"
      end
    end
  end

  test "a batch of many keys equals owner/3 per key, and one refused key refuses the batch" do
    for {label, target, opts, _hashed?} <- targets() do
      {accepted, refused} =
        Enum.split_with(keys(), &match?({:ok, _}, attempt(fn -> HRW.owner(&1, target, opts) end)))

      assert HRW.owner_batch(accepted, target, opts) ==
               Enum.map(accepted, &HRW.owner(&1, target, opts)),
             label

      assert HRW.group_by_owner(accepted, target, opts) ==
               Enum.group_by(accepted, &HRW.owner(&1, target, opts)),
             label

      for key <- refused, batch <- [accepted ++ [key], [key | accepted]] do
        assert_raise ArgumentError, fn -> HRW.owner_batch(batch, target, opts) end
        assert_raise ArgumentError, fn -> HRW.group_by_owner(batch, target, opts) end
        assert_raise ArgumentError, fn -> HRW.moves(batch, target, target, opts) end
      end
    end
  end

  test "an override of a key no lookup accepts is refused when the structure is built" do
    for key <- too_deep(),
        build <- [
          &HRW.Ring.new(["a", "b"], overrides: &1),
          &HRW.Ring.new([{"a", 1}], scorer: @weighted, overrides: &1),
          &HRW.build(["a", "b"], overrides: &1),
          &HRW.build([{"a", 1}], scorer: @weighted, overrides: &1)
        ] do
      error = assert_raise ArgumentError, fn -> build.(%{"fine" => "a", key => "p"}) end
      assert error.message =~ "option :overrides: key "
      assert error.message =~ "can never be looked up"
      assert error.message =~ "deeper than 256 levels"
    end

    # Structures scored in Elixir look such keys up, so they take overrides of them.
    skeleton = HRW.build(["a", "b"], scorer: @phash2, overrides: %{nested(300) => "p"})
    assert HRW.owner(nested(300), skeleton) == "p"
    assert HRW.owner_batch([nested(300)], skeleton) == ["p"]
  end

  defp target_overrides(%HRW.Ring{} = ring), do: HRW.Ring.overrides(ring)
  defp target_overrides(%HRW.Skeleton{} = skeleton), do: HRW.Skeleton.overrides(skeleton)
  defp target_overrides(_list), do: %{}
end
