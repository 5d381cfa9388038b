defmodule HRW.RingTest do
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent
  doctest HRW.Ring

  import HRW.TestStats

  test "a ring answers exactly what the list answers, owners included" do
    for n <- [1, 2, 7, 64, 500] do
      nodes = node_names(n) ++ [:atom_node, {:tuple, n}]
      ring = HRW.Ring.new(nodes)

      for i <- 1..300 do
        key = {"key", i}
        assert HRW.owner(key, ring) == HRW.owner(key, nodes)
        assert HRW.owners(key, ring, 4) == HRW.owners(key, nodes, 4)
      end
    end
  end

  test "a weighted ring answers exactly what the weighted list answers" do
    nodes = for i <- 1..40, do: {"node-#{i}", rem(i, 7) + 0.5}
    ring = HRW.Ring.new(nodes, scorer: %HRW.Weighted{})
    opts = [scorer: %HRW.Weighted{}]

    for i <- 1..500 do
      key = "key-#{i}"
      assert HRW.owner(key, ring) == HRW.owner(key, nodes, opts)
      assert HRW.owners(key, ring, 3) == HRW.owners(key, nodes, 3, opts)
    end
  end

  test "repeated nodes count once" do
    ring = HRW.Ring.new(["a", "b", "a", "c", "b"])
    assert HRW.Ring.size(ring) == 3
    assert HRW.Ring.nodes(ring) == ["a", "b", "c"]
    assert Enum.sort(HRW.owners("k", ring, 10)) == ["a", "b", "c"]
  end

  test "adding a node moves only the keys the new node wins" do
    nodes = node_names(300)
    before = HRW.Ring.new(nodes)
    later = HRW.Ring.new(["node-new" | nodes])

    moved =
      for i <- 1..30_000, key = "key-#{i}", HRW.owner(key, before) != HRW.owner(key, later) do
        assert HRW.owner(key, later) == "node-new"
      end

    assert length(moved) in 50..160
  end

  test "works after a term_to_binary round trip, while alive and after the resource is gone" do
    nodes = node_names(50)
    bin = :erlang.term_to_binary(HRW.Ring.new(nodes))
    alive = HRW.Ring.new(nodes)
    copy = alive |> :erlang.term_to_binary() |> :erlang.binary_to_term()

    # The ring built inside `bin` has no other reference: collect it.
    :erlang.garbage_collect()
    orphan = :erlang.binary_to_term(bin)

    for i <- 1..200, key = "key-#{i}" do
      assert HRW.owner(key, copy) == HRW.owner(key, nodes)
      assert HRW.owner(key, orphan) == HRW.owner(key, nodes)
      assert HRW.owners(key, orphan, 2) == HRW.owners(key, nodes, 2)
    end
  end

  test "works from :persistent_term and ETS, from other processes" do
    nodes = node_names(20)
    ring = HRW.Ring.new(nodes)
    :persistent_term.put({__MODULE__, :ring}, ring)
    table = :ets.new(:rings, [:public])
    :ets.insert(table, {:ring, ring})

    results =
      1..20
      |> Task.async_stream(fn i ->
        key = "key-#{i}"
        [{:ring, from_ets}] = :ets.lookup(table, :ring)
        from_pt = :persistent_term.get({__MODULE__, :ring})
        {HRW.owner(key, from_ets), HRW.owner(key, from_pt), HRW.owner(key, nodes)}
      end)
      |> Enum.map(fn {:ok, r} -> r end)

    assert Enum.all?(results, fn {a, b, c} -> a == c and b == c end)
    :persistent_term.erase({__MODULE__, :ring})
  end

  test "bad input raises ArgumentError" do
    assert_raise ArgumentError, ~r/non-empty list/, fn -> HRW.Ring.new([]) end
    assert_raise ArgumentError, ~r/non-empty list/, fn -> HRW.Ring.new(:nope) end
    assert_raise ArgumentError, ~r/improper list/, fn -> HRW.Ring.new(["a" | "b"]) end
    assert_raise ArgumentError, ~r/unknown options/, fn -> HRW.Ring.new(["a"], fanout: 2) end

    assert_raise ArgumentError, ~r/runs in Elixir/, fn ->
      HRW.Ring.new(["a"], scorer: %HRW{hash_fn: &:erlang.phash2/1})
    end

    assert_raise ArgumentError, ~r/weight/, fn ->
      HRW.Ring.new([{"a", 0}], scorer: %HRW.Weighted{})
    end

    assert_raise ArgumentError, ~r/count/, fn -> HRW.owners("k", HRW.Ring.new(["a"]), -1) end
  end

  test "nodes/1 returns the distinct nodes in order of first occurrence (HASHING.md §6)" do
    assert HRW.Ring.nodes(HRW.Ring.new(["c", "a", "b", "a", 0.0, -0.0])) == ["c", "a", "b", 0.0]

    assert HRW.Ring.nodes(HRW.Ring.new([{"c", 1}, {"a", 2}, {"c", 3}], scorer: %HRW.Weighted{})) ==
             [{"c", 3}, {"a", 2}]
  end
end
