defmodule HRW.TermIdTest do
  use ExUnit.Case, async: true

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
    {'ab', 0x14C49EEC3D30B331},
    {[1 | 2], 0x39F6236DFB639883},
    {%{}, 0x01F8F9911DB9F4A1},
    {%{"b" => 2, a: 1}, 0x0311255C12B46ADB},
    {{"x", [1.5, %{k: {}}]}, 0x91921DB748A24993}
  ]

  test "pinned vectors match the written spec" do
    for {term, id} <- @vectors do
      assert HRW.term_id(term) == id, "id of #{inspect(term)}"
    end
  end

  test "terms that are not === get different ids" do
    distinct = [
      1,
      1.0,
      "a",
      :a,
      'a',
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

  test "huge keys are hashed on a dirty scheduler" do
    big = :binary.copy("x", 20_000_000)
    assert HRW.term_id(big) == HRW.term_id(:binary.copy("x", 20_000_000))
    assert is_binary(HRW.owner(big, ["a", "b"]))
  end
end
