defmodule HRW.OptionsTest do
  # Sets global trace patterns.
  use ExUnit.Case, async: false

  defp message(fun) do
    fun.()
    flunk("expected ArgumentError")
  rescue
    e in ArgumentError -> e.message
  end

  test "a hash_fn is checked by one check, with one message, in every entry point" do
    expected = "hash_fn must be a function of arity 1, got: 3"

    assert message(fn -> HRW.owner("k", ["a"], scorer: %HRW{hash_fn: 3}) end) == expected

    assert message(fn -> HRW.owner("k", [{"a", 1}], scorer: %HRW.Weighted{hash_fn: 3}) end) ==
             expected

    assert message(fn -> HRW.Bounded.assignments(["k"], ["a"], hash_fn: 3) end) == expected
  end

  test ":cluster_size and :fanout have one range each" do
    for bad <- [0, 4097, :big, 2 ** 64] do
      suffix = ":cluster_size must be an integer in 1..4096, got: #{HRW.Brief.brief(bad)}"
      assert message(fn -> HRW.build(["a"], cluster_size: bad) end) == "HRW.build/2 " <> suffix
    end

    assert message(fn -> HRW.build(["a"], fanout: 1) end) ==
             "HRW.build/2 :fanout must be an integer in 2..4096, got: 1"

    assert HRW.build(["a"], cluster_size: 4096, fanout: 4096).cluster_size == 4096
  end

  test "an :epsilon below 0 is refused with the caller's name" do
    assert message(fn -> HRW.Bounded.assignments(["k"], ["a"], epsilon: -1) end) ==
             "HRW.Bounded.assignments/3 :epsilon must be a non-negative number, got: -1"
  end
end
