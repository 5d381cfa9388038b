defmodule HRW.StaleRebuildTest do
  # Structures whose resource cannot be used in this VM (a struct from another node,
  # or a binary round trip after the original was collected) are rebuilt once per
  # node and fingerprint, and shared by every process while they are kept. Rebuilds
  # are counted by `HRW.Prepared.Cache.rebuilds/0`, so not async: the counts must be
  # this module's alone.
  use ExUnit.Case, async: false

  alias HRW.Prepared.Cache

  # Node names no other test uses, so no structure of theirs is in the cache.
  defp names(n) do
    tag = System.unique_integer([:positive])
    Enum.map(1..n, &"stale-#{tag}-#{&1}")
  end

  # What a struct looks like on another node: its resource is a plain reference.
  defp foreign(prepared), do: %{prepared | resource: make_ref()}

  # Structures built in a binary whose resources are then collected.
  defp orphans(builders) do
    bin = :erlang.term_to_binary(Enum.map(builders, & &1.()))
    :erlang.garbage_collect()
    :erlang.binary_to_term(bin)
  end

  defp rebuilds(fun) do
    before = Cache.rebuilds()
    result = fun.()
    {Cache.rebuilds() - before, result}
  end

  test "100 processes looking up with one foreign 100k-node skeleton cause one rebuild" do
    skeleton = HRW.build(names(100_000))
    stale = foreign(skeleton)
    keys = Enum.map(1..20, &"key-#{&1}")
    expected = Enum.map(keys, &HRW.owner(&1, skeleton))

    {count, answers} =
      rebuilds(fn ->
        me = self()

        pids =
          for _ <- 1..100 do
            spawn_link(fn ->
              receive do
                :go -> send(me, {self(), Enum.map(keys, &HRW.owner(&1, stale))})
              end
            end)
          end

        Enum.each(pids, &send(&1, :go))
        for pid <- pids, do: assert_receive({^pid, _answers}, 60_000) |> elem(1)
      end)

    assert count == 1
    assert Enum.uniq(answers) == [expected]

    # Every other entry point on the same structure reuses that resource.
    {count, _} =
      rebuilds(fn ->
        assert HRW.owner_batch(keys, stale) == expected
        assert HRW.owners("k", stale, 3) == HRW.owners("k", skeleton, 3)
        assert HRW.moves(keys, stale, skeleton) == []
      end)

    assert count == 0
  end

  test "any number of stale structures used alternately each rebuild once" do
    structures =
      orphans(
        for(n <- 3..8, do: fn -> HRW.Ring.new(names(n)) end) ++
          for(n <- 3..8, do: fn -> HRW.build(names(n), cluster_size: 2) end)
      )

    # The same structures, built here: what the rebuilt ones must answer.
    fresh =
      for s <- structures do
        nodes = Tuple.to_list(s.nodes)

        if is_struct(s, HRW.Ring),
          do: HRW.Ring.new(nodes),
          else: HRW.build(nodes, cluster_size: 2)
      end

    {count, _} =
      rebuilds(fn ->
        for key <- Enum.map(1..200, &"key-#{&1}"), {s, f} <- Enum.zip(structures, fresh) do
          if is_struct(s, HRW.Ring),
            do: assert(HRW.owner(key, s) == HRW.owner(key, s.nodes |> Tuple.to_list()))

          assert HRW.owner(key, s) == HRW.owner(key, f)
          assert HRW.owners(key, s, 2) == HRW.owners(key, f, 2)
        end
      end)

    assert count == 12
  end

  test "the cache is bounded: the least recently used structures are dropped first" do
    structures = for _ <- 1..70, do: foreign(HRW.Ring.new(names(3)))
    {70, _} = rebuilds(fn -> Enum.each(structures, &HRW.owner("k", &1)) end)

    assert length(Cache.entries()) <= 64
    # The newest is kept; the oldest was dropped and is built again.
    assert {0, _} = rebuilds(fn -> HRW.owner("k", List.last(structures)) end)
    assert {1, _} = rebuilds(fn -> HRW.owner("k", hd(structures)) end)
  end

  test "a structure unused for a minute is dropped; one used within the minute is kept" do
    ring = foreign(HRW.Ring.new(names(4)))
    skeleton = foreign(HRW.build(names(5)))
    {2, _} = rebuilds(fn -> {HRW.owner("k", ring), HRW.owner("k", skeleton)} end)
    used_at = System.monotonic_time(:millisecond)

    kept? = fn s ->
      Enum.any?(Cache.entries(), fn {{_module, fp}, _} -> fp == s.fingerprint end)
    end

    # The sweep as it runs 59 s after the use keeps both...
    :ok = Cache.sweep(used_at + 59_000)
    assert kept?.(ring) and kept?.(skeleton)
    assert {0, _} = rebuilds(fn -> HRW.owner("k", ring) end)

    # ...and as it runs a minute later drops both: the next use builds again.
    :ok = Cache.sweep(used_at + 61_000)
    refute kept?.(ring) or kept?.(skeleton)
    assert {1, _} = rebuilds(fn -> HRW.owner("k", ring) end)
  end

  test "a struct whose fields were changed by hand raises, and blocks no one" do
    ring = HRW.Ring.new(names(3))
    edited = %{foreign(ring) | nodes: {"a", "b", "c"}}

    tasks =
      for _ <- 1..5 do
        Task.async(fn -> catch_error(HRW.owner("k", edited)) end)
      end

    for error <- Task.await_many(tasks, 30_000) do
      assert %ArgumentError{message: message} = error
      assert message =~ "nodes do not match its fingerprint"
    end

    assert HRW.owner("k", foreign(ring)) == HRW.owner("k", ring)
  end

  @tag :capture_log
  test "without the :hrw application structures stay usable, rebuilt on each call" do
    ring = HRW.Ring.new(names(6))
    stale = foreign(ring)
    :ok = Application.stop(:hrw)

    try do
      assert {2, _} =
               rebuilds(fn ->
                 assert HRW.owner("k", stale) == HRW.owner("k", ring)
                 assert HRW.owner_batch(["a", "b"], stale) == HRW.owner_batch(["a", "b"], ring)
               end)
    after
      {:ok, _} = Application.ensure_all_started(:hrw)
    end

    assert {1, _} = rebuilds(fn -> Enum.each(1..10, &HRW.owner(&1, stale)) end)
  end
end
