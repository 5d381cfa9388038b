defmodule HRW.TermIdTest do
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent

  # The same vectors as native/hrw_core/src/vectors.rs, printed by docs/reference.py.
  @vectors [
    {"", 0x2D06800538D394C2},
    {"user:42", 0x9FC1E605FA7174AA},
    {"héllo", 0x6A45B79A7B549B1F},
    {0, 0x154F124433F8846D},
    {1, 0xD7D8C6235C288C58},
    {-1, 0x384021378D8CF872},
    {9_223_372_036_854_775_807, 0xD66452E54AE2095E},
    {18_446_744_073_709_551_615, 0x852DCCB229ADC782},
    {-340_282_366_920_938_463_463_374_607_431_768_211_457, 0x045A420ECAA3CA94},
    {1.0, 0xD5CA9387DF81EABA},
    {-2.5, 0x06C4721E5E96090F},
    {:a, 0x8A942261FBA21C1C},
    {nil, 0xDD206F34290E70F5},
    {:ünï, 0x18148844259E160C},
    {<<5::3>>, 0xE294965897565C4E},
    {{}, 0x738F402F85AED9C9},
    {{:user, 42}, 0x33EFE09B58654A43},
    {[], 0x6B633834BD370097},
    {[1, 2, 3], 0x776A0F57F21AD88D},
    {~c"ab", 0x14C49EEC3D30B331},
    {[1 | 2], 0x39F6236DFB639883},
    {%{}, 0x01F8F9911DB9F4A1},
    {%{"b" => 2, a: 1}, 0x0311255C12B46ADB},
    {{"x", [1.5, %{k: {}}]}, 0x91921DB748A24993}
  ]

  # The edges of every type ("boundary term ids" in docs/reference.py's output; the
  # same in vectors.rs): integers at ±2^63, ±2^64, ±2^127, ±2^128 and ±2^2040 (the
  # widest read on a normal scheduler), each ±1, and far beyond; atoms outside ASCII
  # and Latin-1 up to 255 characters; special floats; bitstrings of every length mod
  # 8 (all bits set: unused bits must not count); maps on both sides of 32 keys.
  @boundary [
    {2 ** 63 - 1, 0xD66452E54AE2095E},
    {-(2 ** 63 - 1), 0xD42037260EC3BBD0},
    {2 ** 63, 0x571EB3B1DA2994F3},
    {-(2 ** 63), 0xA9807EE526112564},
    {2 ** 63 + 1, 0xB2B4B068830E23BA},
    {-(2 ** 63 + 1), 0xD06BD7CC58A07330},
    {2 ** 64 - 1, 0x852DCCB229ADC782},
    {-(2 ** 64 - 1), 0xEE9226A234691CE0},
    {2 ** 64, 0x382311F1FD68C2B6},
    {-(2 ** 64), 0x05491B19074EE18A},
    {2 ** 64 + 1, 0x92E22FFA45DD8DFC},
    {-(2 ** 64 + 1), 0x786B067741EC7955},
    {2 ** 127 - 1, 0x35226D403F0AADD3},
    {-(2 ** 127 - 1), 0x15819D34FB938F14},
    {2 ** 127, 0x7772BC7514B00BF6},
    {-(2 ** 127), 0x6A33FACCF9C4B304},
    {2 ** 127 + 1, 0x20DAE5425FD5F2A2},
    {-(2 ** 127 + 1), 0x1D138E60AA828455},
    {2 ** 128 - 1, 0x0FEC6D783BFFD058},
    {-(2 ** 128 - 1), 0xA9CA480FF2F9CE9C},
    {2 ** 128, 0x1A1535995AEF827E},
    {-(2 ** 128), 0x623DD9BE1FB27492},
    {2 ** 128 + 1, 0x801C3936953315BA},
    {-(2 ** 128 + 1), 0x045A420ECAA3CA94},
    {2 ** 2040 - 1, 0x5B06B2D06276A945},
    {-(2 ** 2040 - 1), 0x74D47A44BEAFA999},
    {2 ** 2040, 0xE1CEB816B8D5806E},
    {-(2 ** 2040), 0x7887DB80255A71A0},
    {2 ** 2040 + 1, 0xDB26744E45C8AEA0},
    {-(2 ** 2040 + 1), 0xB055BBEF25460332},
    {2 ** 1000, 0xA264F713255351FB},
    {-(2 ** 1000), 0x230F6CBE9E369E51},
    {2 ** 100_000, 0x96CFE307EF0F0BA5},
    {-(2 ** 100_000), 0xB08D9762AC1C732B},
    {:é, 0x13477EE53762D801},
    {:ÿ, 0xDB0BB6DC130FD9A3},
    {:Ā, 0x24632A8FCFF2D83A},
    {:λ, 0x31A2AFB161779022},
    {:日本, 0xF073EE620864A7E7},
    {:"😀", 0xB91BCA74DC67C903},
    {:"", 0x60E851B42C30FF42},
    {:"#{String.duplicate("a", 255)}", 0xFEA30C345D59EE0F},
    {:"#{String.duplicate("é", 255)}", 0x2C9FDE693D257FD3},
    {:"#{String.duplicate("λ", 255)}", 0x3392F62FB1131523},
    {:"#{String.duplicate("😀", 255)}", 0x7A140E458E9A0293},
    {-0.0, 0x973093EC5AB4466A},
    {5.0e-324, 0x6E2971B840454639},
    {-5.0e-324, 0xC60878C4227F395D},
    {2.225073858507201e-308, 0xB37BE98242AF7766},
    {1.7976931348623157e308, 0x94BE98BAAE7BC8BC},
    {-1.7976931348623157e308, 0x196F8DD5E91B142C},
    {<<-1::size(1)>>, 0x6BD0DB3A36616657},
    {<<-1::size(2)>>, 0xE0844C4E0DFC3DA0},
    {<<-1::size(3)>>, 0x5F98AC3E53F9A8BB},
    {<<-1::size(4)>>, 0xC91B8FDB8041A8B4},
    {<<-1::size(5)>>, 0x90B89178B010B739},
    {<<-1::size(6)>>, 0xCE0DC19AA7A1EEAD},
    {<<-1::size(7)>>, 0x5EEE1E9475FADC5C},
    {<<-1::size(9)>>, 0x5718478F4A109380},
    {<<-1::size(15)>>, 0x7CFC15A8ED0F348B},
    {<<-1::size(17)>>, 0x2E70E517C1101EF4},
    {<<-1::size(63)>>, 0x709E449F83C4931F},
    {<<-1::size(65)>>, 0xE9544AA5720A4F04},
    {<<-1::size(1001)>>, 0xB5F98510858FAE57},
    {Map.new(1..32, &{&1, &1}), 0x554A9629C8DD4FBC},
    {Map.new(1..33, &{&1, &1}), 0x6B64F7A29027FC5E},
    {Map.new(1..100, &{&1, &1}), 0x3450D74AD00AB3B6},
    {["a" | "b"], 0x4ADEBF8CAFB209DA},
    {[1, 2 | :a], 0xC84BB10A6C660CF0}
  ]

  @fixture Path.expand("../fixtures/reference_terms.tsv", __DIR__)

  # The pids, ports, references and funs anywhere inside `term`.
  defp opaque_parts(term) when is_pid(term) or is_port(term), do: [term]
  defp opaque_parts(term) when is_reference(term) or is_function(term), do: [term]
  defp opaque_parts(term) when is_tuple(term), do: opaque_parts(Tuple.to_list(term))
  defp opaque_parts(term) when is_map(term), do: opaque_parts(Map.to_list(term))
  defp opaque_parts([head | tail]), do: opaque_parts(head) ++ opaque_parts(tail)
  defp opaque_parts(_other), do: []

  # Whether this VM's encoding of `part` is the one inside the row's `etf`.
  defp encoded_as_in?(part, etf) do
    <<131, body::binary>> = :erlang.term_to_binary(part)
    :binary.match(etf, body) != :nomatch
  end

  test "the fixture's filter finds pids, ports, refs and funs at any depth" do
    for opaque <- [self(), make_ref(), hd(Port.list()), fn -> :ok end] do
      for term <- [opaque, {1, opaque}, [1 | opaque], [[1, {%{k: [opaque]}}]], %{opaque => 1}] do
        assert opaque_parts(term) == [opaque], inspect(term)
        assert encoded_as_in?(opaque, :erlang.term_to_binary(term))
      end
    end

    assert opaque_parts({1, [2 | 3], %{a: ["b", 1.5, :c]}}) == []
    refute encoded_as_in?(self(), :erlang.term_to_binary({1, make_ref()}))
  end

  test "pinned vectors match the written spec" do
    for {term, id} <- @vectors do
      assert HRW.term_id(term) == id, "id of #{inspect(term)}"
    end
  end

  test "boundary values match the written spec" do
    for {term, id} <- @boundary do
      assert HRW.term_id(term) == id, "id of #{HRW.Brief.brief(term)}"
      # The dirty twin (no budget) gives the same id as the normal path.
      assert HRW.NativeProbe.dirty_term_id(term) == id, "dirty id of #{HRW.Brief.brief(term)}"
    end
  end

  test "random terms of every type agree with an independent implementation (docs/reference.py)" do
    # One line per term: the term's external term format written by Python (base64),
    # its id computed by Python from docs/HASHING.md, its type.
    rows =
      for line <- File.stream!(@fixture) do
        [etf, id, kind] = line |> String.trim_trailing() |> String.split("\t")
        {Base.decode64!(etf), String.to_integer(id, 16), kind}
      end

    assert length(rows) >= 10_000

    checked =
      for {etf, id, kind} <- rows,
          term <- [:erlang.binary_to_term(etf)],
          # Pids, ports, references and funs, at any depth, hash this VM's own
          # term_to_binary, which the contract does not promise across OTP versions:
          # such a row is checked where this VM encodes each of them as the row does.
          Enum.all?(opaque_parts(term), &encoded_as_in?(&1, etf)) do
        assert HRW.term_id(term) == id, "#{kind} #{String.slice(Base.encode64(etf), 0, 120)}"
        kind
      end

    kinds = MapSet.new(checked)

    for kind <- ~w(integer float atom binary bits tuple list improper map) do
      assert kind in kinds, "no #{kind} in the fixture"
    end

    if System.otp_release() == "25" do
      assert length(checked) == length(rows)
    end
  end

  describe "integers" do
    test "negative integers with a magnitude in (2^127, 2^128) keep their own ids" do
      # rustler's i128 decode wrapped these onto small positive integers.
      assert HRW.term_id(-(2 ** 128 - 1)) != HRW.term_id(1)
      assert HRW.term_id(-(2 ** 127 + 1)) != HRW.term_id(2 ** 127 - 1)

      for shift <- [0, 1, 17, 63, 64, 100, 126] do
        n = -(2 ** 127 + 2 ** shift)
        assert HRW.term_id(n) != HRW.term_id(-n)
      end
    end

    test "the two keys 1 and -(2^128 - 1) are two keys and two nodes" do
      assert map_size(HRW.Bounded.assignments([1, -(2 ** 128 - 1)], ["a", "b"])) == 2
      assert HRW.Ring.size(HRW.Ring.new([1, -(2 ** 128 - 1)])) == 2
    end

    test "every width and sign gets a distinct id" do
      ints =
        for bits <- [62, 63, 64, 65, 126, 127, 128, 129, 2039, 2040, 2041, 5000],
            delta <- [-1, 0, 1],
            sign <- [1, -1],
            do: sign * (2 ** bits + delta)

      ids = Enum.map(ints, &HRW.term_id/1)
      assert length(Enum.uniq(ids)) == length(Enum.uniq(ints))
    end
  end

  describe "atoms" do
    test "atoms outside Latin-1 hash by their UTF-8 name" do
      nodes = ["a", "b", "c"]
      # docs/reference.py: term_id(Atom("λ")).
      assert HRW.term_id(:λ) == 0x31A2AFB161779022
      assert HRW.owner(:日本, nodes) in nodes
      assert HRW.term_id({:λ, :日本}) == HRW.term_id({:λ, :日本})
      refute HRW.term_id(:λ) == HRW.term_id(:λλ)
    end

    test "Latin-1 atoms hash by their UTF-8 name, not their Latin-1 bytes" do
      # :é is 0xE9 in Latin-1 and C3 A9 in UTF-8; the vector is the UTF-8 one.
      assert HRW.term_id(:é) == 0x13477EE53762D801
      # What the Latin-1 byte would give instead (tag 0x03, then 0xE9).
      refute HRW.term_id(:é) == 0x99AE6DFFBC42AAD4
    end
  end

  test "256 levels of every container kind hash alike on normal and dirty schedulers" do
    # A dirty scheduler's stack is smaller than a normal one's: 256 nested maps
    # must be hashed without overflowing it (an overflow is a VM crash).
    levels = [
      fn acc -> %{next: acc, a: 1} end,
      fn acc -> 1..40 |> Map.new(&{&1, &1}) |> Map.put(:next, acc) end,
      fn acc -> {acc, 1} end,
      fn acc -> [1, acc] end,
      fn acc -> [1, acc | 2] end
    ]

    for level <- levels do
      term = Enum.reduce(1..256, :leaf, fn _, acc -> level.(acc) end)
      assert HRW.NativeProbe.dirty_term_id(term) == HRW.term_id(term)
    end

    mixed = Enum.reduce(1..256, :leaf, fn i, acc -> Enum.at(levels, rem(i, 5)).(acc) end)
    assert HRW.NativeProbe.dirty_term_id(mixed) == HRW.term_id(mixed)
  end

  test "binaries and bitstrings that start inside a byte hash by their bits" do
    <<_::3, rest::binary>> = <<5::3, "hello"::binary>>
    assert HRW.term_id(rest) == HRW.term_id("hello")
    <<_::5, bits::bitstring>> = <<1::5, 5::3, 0xFF>>
    assert bit_size(bits) == 11
    assert HRW.term_id(bits) == HRW.term_id(<<5::3, 0xFF>>)
  end

  describe "bad input" do
    test "nesting up to 256 levels is hashed, deeper raises ArgumentError" do
      nest = fn depth -> Enum.reduce(1..depth, :leaf, fn _, acc -> [acc] end) end
      # docs/reference.py: the ids of 256 lists (tuples) around :leaf.
      assert HRW.term_id(nest.(256)) == 0xDA2C59283AEA4971
      assert HRW.term_id(Enum.reduce(1..256, :leaf, fn _, acc -> {acc} end)) == 0x46644A581F8C72BC

      for deep <- [nest.(257), Enum.reduce(1..300, 1, fn _, acc -> %{a: acc} end)] do
        error = assert_raise ArgumentError, fn -> HRW.term_id(deep) end
        assert error.message =~ "deeper than 256 levels"
      end
    end
  end

  test "terms that are not === get different ids" do
    distinct = [
      1,
      1.0,
      "a",
      :a,
      ~c"a",
      [1],
      {1},
      %{1 => 1},
      [],
      {},
      %{},
      "",
      <<0::1>>,
      <<0::7>>,
      <<0>>
    ]

    ids = Enum.map(distinct, &HRW.term_id/1)
    assert length(Enum.uniq(ids)) == length(distinct)
    assert HRW.term_id(-0.0) == HRW.term_id(0.0)
  end

  test "equal maps get equal ids whatever their construction order" do
    pairs = for i <- 1..100, do: {"k#{i}", i}
    a = Map.new(pairs)
    b = pairs |> Enum.reverse() |> Enum.reduce(%{}, fn {k, v}, m -> Map.put(m, k, v) end)
    assert HRW.term_id(a) == HRW.term_id(b)
    refute HRW.term_id(a) == HRW.term_id(Map.put(a, "k1", 0))
  end

  test "integers hash by value, not by representation" do
    big = 2 ** 64
    assert HRW.term_id(big - big + 5) == HRW.term_id(5)
    refute HRW.term_id(big) == HRW.term_id(-big)
  end

  test "node-local terms hash consistently within a node" do
    pid = self()
    ref = make_ref()
    assert HRW.term_id(pid) == HRW.term_id(pid)
    assert HRW.term_id({pid, ref}) == HRW.term_id({pid, ref})
    refute HRW.term_id(make_ref()) == HRW.term_id(ref)
  end

  # Terms that take the fast paths (small integers, atoms, binaries, flat tuples
  # and maps hashed on the stack) and terms that leave them part way, against ids
  # computed by docs/reference.py.
  @fast_path_vectors [
    {{1, [2], 3}, 0x80ACBB89F0E021C2},
    {{:a, {:b, 1}}, 0x3D95C20108132A67},
    {{"x", 2.5, :c}, 0x672031B5AEF8739C},
    {{:a, 1, 2, 3, 4, 5, 6, 7}, 0x4166D0BDC9A3F791},
    {{1, 2, 3, 4, 5, 6, 7, 8, 9}, 0xC5A63CEF445A4705},
    {{:a, 4_611_686_018_427_387_904}, 0x4A6AD85C88BA1140},
    {{-5, 1_180_591_620_717_411_303_424}, 0xC7F59EAAEA016491},
    {%{a: [1], b: 2}, 0x5CD228FD77A229BD},
    {%{[1] => :x}, 0x7DC7B9AF04043A88},
    {%{a: 1, b: 2.0}, 0x75745D135A880069},
    {%{1.0 => 2, 3 => "z"}, 0xE460207C48CB8A98},
    {%{id: 7, kind: :doc}, 0x42DBDE1FCECE114E},
    {{:tenant, :eu, 42}, 0x8718D95B7F36BF78},
    {{:é, 1}, 0x9A161677CE91D7EB}
  ]

  test "fast paths and the general walk give the reference ids" do
    for {term, id} <- @fast_path_vectors do
      assert HRW.term_id(term) == id, "id of #{inspect(term)}"
      assert HRW.NativeProbe.dirty_term_id(term) == id, "dirty id of #{inspect(term)}"
      # Nested one level down, the same term goes through the general walk.
      assert HRW.term_id([term]) == HRW.term_id([term | []])
    end
  end

  test "atoms created at run time keep their ids, cached or not" do
    # More atoms than the per-VM cache holds: some are cached, some are not.
    names = for i <- 1..20_000, do: "run_time_atom_#{System.unique_integer([:positive])}_#{i}"
    atoms = Enum.map(names, &String.to_atom/1)
    first = Enum.map(atoms, &HRW.term_id/1)
    assert Enum.map(atoms, &HRW.term_id/1) == first
    assert Enum.map(atoms, &HRW.NativeProbe.dirty_term_id/1) == first
    # In a tuple (the flat path) and in a list (the general walk) alike.
    assert Enum.map(atoms, &HRW.term_id({&1, 1})) ==
             Enum.map(atoms, &HRW.term_id({&1, [1]} |> put_elem(1, 1)))

    assert length(Enum.uniq(first)) == length(first)
  end

  # Walks over many terms ask each boxed term what it is in the order the one
  # before it needed (binaries, tuples, maps); only the speed may depend on that.
  test "a node's or key's id does not depend on the terms around it in a list" do
    kinds = [
      fn i -> "node-#{i}" end,
      fn i -> {:node, i} end,
      fn i -> %{id: i} end,
      fn i -> i * 1_000_003 end,
      fn i -> 1.5 * i end,
      fn i -> i * 10_000_000_000_000_000_000_000 end,
      fn i -> [i] end,
      fn i -> :"atom_#{rem(i, 7)}_#{i}" end,
      fn i -> <<i::13>> end,
      fn i -> {:nested, {i, "x"}} end
    ]

    :rand.seed(:exsss, {7, 11, 13})

    for _round <- 1..20 do
      # Runs of one kind, one to four long, in a random order of kinds.
      nodes =
        Enum.flat_map(1..30, fn run ->
          kind = Enum.random(kinds)
          for j <- 1..Enum.random(1..4), do: kind.(run * 10 + j)
        end)
        |> Enum.uniq()

      # Equal weights give the unweighted owners: the weighted node walk too.
      weighted = Enum.map(nodes, &{&1, 2})
      weighted_ring = HRW.Ring.new(weighted, scorer: %HRW.Weighted{})

      for key <- ["k", {:user, 3}, %{a: 1}, 42] do
        best = Enum.max_by(nodes, &HRW.score(%HRW{}, key, &1))
        assert HRW.owner(key, nodes) == best
        assert HRW.owner(key, HRW.Ring.new(nodes)) == best
        assert HRW.owner(key, weighted_ring) == best
      end

      keys = Enum.shuffle(nodes)
      assert HRW.owner_batch(keys, nodes) == Enum.map(keys, &HRW.owner(&1, nodes))

      assert Enum.sort(Map.keys(HRW.Bounded.assignments(keys, ["a", "b", "c"]))) ==
               Enum.sort(keys)
    end
  end

  # docs/HASHING.md §2: an improper list's tail sits one level below the list, like
  # its elements (d + 1): a tail {x} of an improper list at depth 255 puts x at 257.
  test "an improper list's tail is at the depth of its elements" do
    at = fn depth, term -> Enum.reduce(1..depth//1, term, fn _, acc -> [acc] end) end
    # docs/reference.py: the ids of the improper lists at those depths.
    assert HRW.term_id(at.(255, [1 | :t])) == 0x3A7A75DB7DDBE13A
    assert HRW.term_id(at.(254, [1 | {:x}])) == 0xA428E7A3779CFDFC

    assert_raise ArgumentError, ~r/nested deeper than 256/, fn ->
      HRW.term_id(at.(255, [1 | {:x}]))
    end
  end
end

defmodule HRW.TermIdSchedulerTest do
  # Not async: the test build counts every NIF call that runs on a dirty scheduler
  # (native/hrw_nif/src/nif.rs, `dirty_runs`), and no other test may run beside
  # these while they read the count. The count and the work probes exist only in
  # test builds of the library (HRW.TestBuild).
  use ExUnit.Case, async: false
  @moduletag :work_probes
  @moduletag skip: HRW.TestBuild.without_work_probes()

  describe "budget" do
    # The normal-scheduler version must ask for a dirty scheduler before doing work
    # it cannot afford (its probe reports that); HRW.term_id/1 then runs there.
    # These assert the protocol, not a speed.
    test "a 12,000-entry map is hashed on a dirty scheduler" do
      map = Map.new(1..12_000, &{"key-#{&1}", &1})
      assert {:needs_dirty, _, _} = HRW.NativeProbe.probe(:term_id, [map])
      assert HRW.term_id(map) == HRW.NativeProbe.dirty_term_id(map)
    end

    test "integers wider than 2^2040 are encoded on a dirty scheduler only" do
      for n <- [2 ** 2040 - 1, -(2 ** 2040 - 1)] do
        assert {:ok, _, _} = HRW.NativeProbe.probe(:term_id, [n])
        assert HRW.term_id(n) == HRW.NativeProbe.dirty_term_id(n)
      end

      for n <- [2 ** 2040, -(2 ** 2040), 2 ** 100_000, -(2 ** 100_000)] do
        assert {:needs_dirty, _, _} = HRW.NativeProbe.probe(:term_id, [n])
        assert HRW.term_id(n) == HRW.NativeProbe.dirty_term_id(n)
      end
    end
  end

  defp dirty_runs_of(fun) do
    before = HRW.NativeProbe.dirty_runs()
    result = fun.()
    {result, HRW.NativeProbe.dirty_runs() - before}
  end

  test "huge keys are hashed on a dirty scheduler, small ones on the caller's" do
    big = :binary.copy("x", 20_000_000)
    # The id of 20,000,000 "x" bytes: XXH3-64 (seed 0), as docs/reference.py gives it.
    assert {0x82236F096EF05571, 1} = dirty_runs_of(fn -> HRW.term_id(big) end)
    assert {owner, 1} = dirty_runs_of(fn -> HRW.owner(big, ["a", "b"]) end)
    assert owner == Enum.max_by(["a", "b"], &HRW.score(%HRW{}, big, &1))
    assert {_id, 0} = dirty_runs_of(fn -> HRW.term_id("x") end)
    assert {_owner, 0} = dirty_runs_of(fn -> HRW.owner("x", ["a", "b"]) end)
  end

  test "a batch of more keys than the budget can take runs on a dirty scheduler" do
    skeleton = HRW.build(Enum.map(1..100, &"node-#{&1}"))
    keys = Enum.map(1..20_000, &"key-#{&1}")
    assert {owners, 1} = dirty_runs_of(fn -> HRW.owner_batch(keys, skeleton) end)
    assert owners == Enum.map(keys, &HRW.owner(&1, skeleton))
    assert {_, 0} = dirty_runs_of(fn -> HRW.owner_batch(Enum.take(keys, 10), skeleton) end)
  end
end
