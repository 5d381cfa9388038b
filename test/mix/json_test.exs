defmodule Mix.HrwNative.JSONTest do
  # The JSON reader of cargo's messages: what cargo writes, and what is not JSON.
  use ExUnit.Case, async: true

  alias Mix.HrwNative.JSON

  # Modules of mix/ are loaded by mix.exs from source, with no BEAM file for
  # doctest/1 to read: the examples of their docs are checked here.
  test "the documented examples" do
    assert JSON.decode(~s({"reason": "compiler-artifact", "n": [1, 2.5, null]})) ==
             {:ok, %{"n" => [1, 2.5, nil], "reason" => "compiler-artifact"}}

    assert JSON.decode(~s({"a": 1,})) == :error
  end

  test "values, escapes and surrogate pairs" do
    assert JSON.decode(~s({"a": [1, -2.5e3, true, false, null, "q\\"\\u00e9\\ud83d\\ude00"]})) ==
             {:ok, %{"a" => [1, -2500.0, true, false, nil, "q\"é😀"]}}

    assert JSON.decode(~s({"path":"/t/日本/lib.so"})) == {:ok, %{"path" => "/t/日本/lib.so"}}
    assert JSON.decode(~s( [ ] )) == {:ok, []}
    assert JSON.decode(~s({})) == {:ok, %{}}
    assert JSON.decode(~s("\\/\\b\\f\\n\\r\\t\\\\")) == {:ok, "/\b\f\n\r\t\\"}
    # A number a double cannot hold stays text.
    assert JSON.decode("1e400") == {:ok, "1e400"}
    assert JSON.decode("-0") == {:ok, 0}
  end

  test "a cargo compiler-artifact message" do
    line =
      ~s({"reason":"compiler-artifact","package_id":"hrw_nif 0.3.0","target":{"kind":["cdylib"],) <>
        ~s("name":"hrw_nif"},"filenames":["/t/release/libhrw_nif.so"],"executable":null,"fresh":true})

    assert {:ok, %{"reason" => "compiler-artifact", "target" => target, "filenames" => files}} =
             JSON.decode(line)

    assert target == %{"kind" => ["cdylib"], "name" => "hrw_nif"}
    assert files == ["/t/release/libhrw_nif.so"]
  end

  test "what is not exactly one JSON value is refused" do
    for bad <- [
          ~s({"a":1,}),
          ~s([1,]),
          ~s({"a" 1}),
          ~s({1: 2}),
          ~s("\\ud800"),
          ~s("\\udc00"),
          ~s("\\ud800\\u0041"),
          ~s("\\x"),
          ~s("\\u12g4"),
          ~s("tab\tinside"),
          ~s("unterminated),
          ~s({} x),
          "01",
          "1.",
          "+1",
          "tru",
          "",
          "   "
        ] do
      assert JSON.decode(bad) == :error, bad
    end
  end
end
