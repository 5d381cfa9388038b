defmodule HRW.Reliability.HostileTermsTest do
  @moduledoc """
  Hostile terms through every public function: nesting at the depth limit, huge
  binaries and integers, improper lists, node-local terms, structs changed by hand.
  Whatever the input, every call answers or raises `ArgumentError`.

  `HRW_TEST_SIZE=long mix test test/hrw/reliability` runs the longer soak of every
  file here (`HRW.TestSize`).
  """
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent

  @long HRW.TestSize.level() == :long

  @moduletag timeout: HRW.TestTimeouts.ms(if(@long, do: 1_800_000, else: 600_000))

  import Bitwise
  import HRW.TestHostile

  # The structure a (possibly tampered) struct's own fields describe.
  defp rebuilt(%HRW.Ring{nodes: nodes}), do: HRW.Ring.new(Tuple.to_list(nodes))

  defp rebuilt(%HRW.Skeleton{nodes: nodes, cluster_size: size}),
    do: HRW.build(Tuple.to_list(nodes), cluster_size: size)

  test "nesting just under, at and over the 256-level limit, in every container" do
    targets = targets()

    for kind <- [:mixed | kinds()], depth <- [255, 256, 257, 300], leaf <- [:leaf, 7, "bin"] do
      t = nest(leaf, depth, kind)
      assert misbehaving(t, targets) == [], "#{kind} #{depth} #{inspect(leaf)}"
      # Within the limit a term hashes; a non-binary leaf past it is refused. (A
      # binary is hashed before the depth check, so a binary leaf one level past
      # the limit is accepted; recursion stays bounded either way. An improper tail
      # that is a list continues the same list: no new level.)
      if depth <= 256 do
        # The id is the content's: a copy built anew has it, one level less does not.
        assert HRW.term_id(t) == HRW.term_id(nest(leaf, depth, kind))
        refute HRW.term_id(t) == HRW.term_id(nest(leaf, depth - 1, kind))
      end

      if depth >= 257 and leaf != "bin" and kind not in [:mixed, :improper_tail] do
        assert_raise ArgumentError, ~r/nested deeper/, fn -> HRW.term_id(t) end
      end
    end
  end

  # Every size is past what a normal-scheduler call takes (a binary of 6.4 MB):
  # 16 MB in the quick run, 50 MB in ./scripts/test.
  @huge HRW.TestSize.pick(quick: 16_000_000, ci: 50_000_000, long: 50_000_000)

  test "huge binaries and integers, also deep inside terms and on dirty schedulers" do
    targets = targets()
    huge = :binary.copy(<<0xA5>>, @huge)
    big = 1 <<< 100_000
    megabyte = binary_part(huge, 0, 1_000_000)

    terms = [
      huge,
      binary_part(huge, 3, div(@huge, 5) * 4),
      big,
      -big,
      {huge, big},
      [huge | big],
      %{huge => :value, :key => huge, 1.5 => -1},
      nest(huge, 250, :mixed),
      nest(big, 256, :tuple),
      # A large term past the limit: deep, and too big for a normal scheduler.
      nest({huge}, 300, :list),
      <<1::3, megabyte::binary>>,
      fn -> megabyte end
    ]

    # Only the calls that hand `t` to the NIF: hashing 50 MB in Elixir (phash2 in
    # the hrw 0.2.1 path, inspect in option errors) is slow and not under test here.
    assert_well_behaved(terms, targets, [:native])
    assert HRW.term_id(big) != HRW.term_id(-big)
    assert HRW.term_id(huge) == HRW.term_id(:binary.copy(<<0xA5>>, @huge))
  end

  test "improper lists in every position" do
    targets = targets()

    terms = [
      [1 | 2],
      [1, 2 | 3],
      ["a" | "b"],
      [[1 | 2] | [3 | 4]],
      [:a, [:b | :c], {[:d | :e]} | %{[1 | 2] => [3 | 4]}],
      [{"n1", 1} | {"n2", 2}],
      ["n1", "n2" | "n3"],
      [[] | []],
      nest(:x, 100, :improper_tail),
      nest(:x, 100, :improper_head)
    ]

    assert_well_behaved(terms, targets)
    assert_raise ArgumentError, ~r/improper/, fn -> HRW.owner("k", ["a" | "b"]) end
    assert_raise ArgumentError, ~r/proper list/, fn -> HRW.owner_batch(["k" | "j"], ["a"]) end
  end

  test "node-local and odd terms: pids, refs, ports, funs, bitstrings, mixed maps" do
    targets = targets()
    dead = spawn(fn -> :ok end)
    # `cat` waits for input, so both ports are open until closed here, or until
    # the test process (their owner) ends; a program that exits at once closes its
    # port by itself, racing `Port.close/1`.
    port = Port.open({:spawn, "cat"}, [])
    closed = Port.open({:spawn, "cat"}, [])
    true = Port.close(closed)

    terms = [
      self(),
      dead,
      make_ref(),
      :erlang.list_to_ref(~c"#Ref<0.1.2.3>"),
      port,
      closed,
      fn x -> x end,
      &Enum.map/2,
      &HRW.owner/2,
      <<>>,
      <<1::1>>,
      <<255, 1::7>>,
      binary_part("abcdef", 1, 3),
      %{
        1 => :a,
        1.0 => :b,
        "1" => :c,
        :"1" => :d,
        [1] => :e,
        {1} => :f,
        %{} => [],
        <<1::1>> => 1
      },
      Map.new(1..100, &{{&1, "v"}, &1 * 1.5}),
      %{self() => make_ref(), port => fn -> 1 end},
      {},
      [],
      %{},
      -0.0,
      1.0e308,
      -1.0e-308,
      :"",
      :"ünïcödé ✓",
      0xFFFF_FFFF_FFFF_FFFF + 1,
      -0x8000_0000_0000_0001
    ]

    assert_well_behaved(terms, targets)
  end

  test "structs changed by hand: no call crashes; batches answer as their fields or refuse" do
    %{ring: ring, skeleton: skeleton} = targets = targets()
    other = HRW.build(["x", "y"])

    tampered = [
      %{ring | nodes: {}},
      %{ring | nodes: {"only"}},
      %{ring | nodes: List.to_tuple(["n1", "n2", "n3", :n4, {:n, 5}] ++ ["extra"])},
      %{ring | resource: skeleton.resource},
      %{ring | resource: make_ref()},
      %{ring | resource: make_ref(), fingerprint: 42},
      %{skeleton | nodes: {"a"}},
      %{skeleton | resource: other.resource},
      %{skeleton | resource: ring.resource, fingerprint: 7},
      %{skeleton | resource: make_ref(), nodes: {"z"}},
      %{skeleton | resource: :not_a_reference},
      %{ring | resource: "not a reference"}
    ]

    for t <- tampered, key <- ["k", "j"] do
      for {label, call} <- [
            owner: fn -> HRW.owner(key, t) end,
            owners: fn -> HRW.owners(key, t, 3) end
          ] do
        assert outcome(call) == :ok, "#{label} on #{inspect(t)}"
      end

      # Batches answer as the structure the fields describe, or refuse it.
      for {label, call} <- [
            batch: &HRW.owner_batch([key, "x"], &1),
            groups: &HRW.group_by_owner([key], &1),
            moves: &HRW.moves([key], &1, skeleton)
          ] do
        case HRW.TestValues.outcome(fn -> call.(t) end) do
          {:raised, _} -> :ok
          {:returned, answer} -> assert answer == call.(rebuilt(t)), "#{label} on #{inspect(t)}"
        end
      end
    end

    assert_raise ArgumentError, ~r/do not match/, fn ->
      HRW.owner_batch(["k"], %{ring | nodes: {"only"}})
    end

    assert_well_behaved([%{ring | nodes: {}}, %{skeleton | nodes: {}}], targets)
  end
end
