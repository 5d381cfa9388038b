defmodule HRW.InputsTest do
  # Inputs a hostile probe found outside the option checker (issue 35): each now
  # gets an ArgumentError naming the option or argument and what it accepts, and
  # one mistake gets one message whatever the entry point.
  use ExUnit.Case, async: false

  alias HRW.Cluster.Fingerprint

  @nodes ["n1", "n2", "n3"]

  test "the same wrong target gets the same message from every function that takes one" do
    ring = HRW.Ring.new(@nodes)

    calls = [
      fn t -> HRW.owner("k", t) end,
      fn t -> HRW.owner("k", t, scorer: %HRW{}) end,
      fn t -> HRW.owners("k", t, 2) end,
      fn t -> HRW.owner_batch(["k"], t) end,
      fn t -> HRW.group_by_owner(["k"], t) end,
      fn t -> HRW.moves(["k"], t, ring) end
    ]

    for target <- [:x, %{}, "nodes", 42] do
      messages =
        for call <- calls do
          assert_raise(ArgumentError, fn -> call.(target) end) |> Exception.message()
        end

      assert [message] = Enum.uniq(messages), inspect(messages)
      assert message =~ "expected nodes to be a non-empty list, an HRW.Ring or an HRW.Skeleton"
    end
  end

  test "a map that names a structure's struct but lacks a field is no target" do
    ring = HRW.Ring.new(@nodes)
    skeleton = HRW.build(@nodes)

    # A stale resource too (an atom, or a reference that names no resource, which
    # takes HRW.owner/3's fast path to the rebuild): neither may be rebuilt from.
    for structure <- [ring, skeleton],
        stale <- [:stale, make_ref()],
        field <- [:fingerprint, :overrides, :resource, :nodes, :weights] do
      forged = structure |> Map.put(:resource, stale) |> Map.delete(field)

      for call <- [
            fn -> HRW.owner("k", forged) end,
            fn -> HRW.owners("k", forged, 2) end,
            fn -> HRW.owner_batch(["k"], forged) end,
            fn -> HRW.group_by_owner(["k"], forged) end
          ] do
        error = assert_raise ArgumentError, call
        assert Exception.message(error) =~ "expected nodes to be a non-empty list", inspect(field)
      end
    end

    # A whole struct whose resource is stale is rebuilt, as before.
    assert HRW.owner("k", %{ring | resource: :stale}) == HRW.owner("k", ring)
  end

  test ":batch_threads is a whole number from 1 to 4 times the schedulers online" do
    on_exit(fn -> Application.delete_env(:hrw, :batch_threads) end)
    max = 4 * :erlang.system_info(:schedulers_online)
    ring = HRW.Ring.new(@nodes)

    for bad <- [0, -1, max + 1, Integer.pow(2, 40), Integer.pow(2, 64), :auto, "4", 4.0] do
      Application.put_env(:hrw, :batch_threads, bad)
      error = assert_raise ArgumentError, fn -> HRW.owner_batch(["a", "b"], ring) end
      assert Exception.message(error) =~ "batch_threads must be a whole number from 1 to #{max}"
    end

    for good <- [1, max] do
      Application.put_env(:hrw, :batch_threads, good)
      assert HRW.owner_batch(["a", "b"], ring) == Enum.map(["a", "b"], &HRW.owner(&1, ring))
    end
  end

  defmodule NotLoadedYet do
    @moduledoc false
    # Compiled to a .beam of its own in the test, then unloaded: the state of a
    # module in a release or iex before anything has called it.
    def source do
      """
      defmodule HRW.InputsTest.LazyScorer do
        defstruct []
        def score(_scorer, key, node), do: :erlang.phash2({key, node})
      end
      """
    end
  end

  test "a custom scorer whose module is not loaded yet is loaded, then accepted" do
    dir = Path.join(System.tmp_dir!(), "hrw-lazy-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    [{module, beam}] = Code.compile_string(NotLoadedYet.source())
    File.write!(Path.join(dir, "#{module}.beam"), beam)
    :code.purge(module)
    :code.delete(module)
    :code.purge(module)
    refute :code.is_loaded(module)
    true = Code.prepend_path(dir)
    on_exit(fn -> Code.delete_path(dir) end)

    # Built by hand: struct/2 would load the module first.
    scorer = %{__struct__: module}
    owner = HRW.owner("k", @nodes, scorer: scorer)
    assert owner in @nodes
    assert owner == Enum.max_by(@nodes, &:erlang.phash2({"k", &1}))
  end

  test "HRW.Cluster.moves/4 takes a proper list of keys" do
    ring = HRW.Ring.new(@nodes)
    bigger = HRW.Ring.new(["n4" | @nodes])

    for keys <- [[1 | 2], ["a", "b" | :tail], :keys, "keys", %{}] do
      error = assert_raise ArgumentError, fn -> HRW.Cluster.moves(keys, ring, bigger) end
      assert Exception.message(error) =~ "keys must be a"
    end

    assert is_list(HRW.Cluster.moves(["a", "b"], ring, bigger))
  end

  test "HRW.Cluster.Fingerprint refuses what it cannot fingerprint, by name" do
    for {call, said} <- [
          {fn -> Fingerprint.of([:a | :b]) end, "a proper list of members"},
          {fn -> Fingerprint.of([:a], :weighted) end, "a keyword list of options"},
          {fn -> Fingerprint.of([:a], bogus: 1) end, "the option :weighted only"},
          {fn -> Fingerprint.of([:a], weighted: :yes) end, ":weighted must be true or false"},
          {fn -> Fingerprint.of([{:a, Integer.pow(2, 1100)}]) end, "0 < weight <= 2^53"},
          {fn -> Fingerprint.of(:a) end, "a list of members"},
          {fn -> Fingerprint.hex(-1) end, "an integer in 0..2^64-1"},
          {fn -> Fingerprint.hex(:a) end, "an integer in 0..2^64-1"},
          {fn -> Fingerprint.hex(Integer.pow(2, 64)) end, "an integer in 0..2^64-1"},
          {fn -> Fingerprint.hex(Integer.pow(2, 1_000_000)) end, "an integer in 0..2^64-1"}
        ] do
      error = assert_raise ArgumentError, call
      assert Exception.message(error) =~ said
    end

    assert Fingerprint.hex(0) == "0000000000000000"
    assert Fingerprint.hex(0xFFFF_FFFF_FFFF_FFFF) == "ffffffffffffffff"
  end
end
