defmodule HRW.ClusterUtf8MessagesTest do
  # HRW.Cluster's error messages and log lines show users' values through
  # `HRW.Cluster.Describe`, which never cuts inside a character: every message stays valid
  # UTF-8 whatever the value. Names are checked by the VM's own rule for atoms (at
  # most 255 code points).
  use ExUnit.Case, async: true

  import ExUnit.CaptureLog

  # Loose: Describe shows 5 × 5 leaves of at most 64 bytes and a size (the tight
  # bounds are cluster_describe_test.exs's); here what matters is UTF-8.
  @max_message 2_500

  # Multi-byte text of every UTF-8 width, cut at every offset modulo the width, with
  # combining marks and a single grapheme longer than any cut.
  defp texts do
    for base <- ["é", "€", "😀", "e\u0301", "🇫🇷", "a\u0301\u0302"],
        lead <- ["", "a", "ab", "abc"],
        do: lead <> String.duplicate(base, 100)
  end

  defp hostile do
    long_texts = texts() ++ ["e" <> String.duplicate("\u0301", 300)]

    atoms =
      [
        String.duplicate("é", 100),
        String.duplicate("e\u0301", 127),
        String.duplicate("😀", 255),
        "a b " <> String.duplicate("€", 200)
      ]
      |> Enum.map(&String.to_atom/1)

    values = long_texts ++ atoms

    values ++
      [
        Enum.take(values, 7),
        List.to_tuple(atoms),
        Map.new(atoms, &{&1, &1}),
        %{__struct__: hd(atoms), field: List.last(long_texts)}
      ]
  end

  defp assert_valid(text, what) do
    assert String.valid?(text), "#{what}: not UTF-8: #{inspect(text, binaries: :as_binaries)}"
    assert byte_size(text) <= @max_message, "#{what}: #{byte_size(text)} bytes"
  end

  test "every error path that shows a value is valid UTF-8" do
    for {value, v} <- Enum.with_index(hostile()) do
      calls = [
        fn -> HRW.Cluster.owner(value, "k") end,
        fn -> HRW.Cluster.subscribe(value) end,
        fn -> HRW.Cluster.start_link(name: :hrw_utf8, debounce: value) end,
        fn -> HRW.Cluster.start_link(name: :hrw_utf8, allow: value) end,
        fn -> HRW.Cluster.start(name: :hrw_utf8, overrides: %{value => []}) end,
        fn -> HRW.Cluster.child_spec(name: :hrw_utf8, source: value) end,
        fn -> HRW.Cluster.Fingerprint.of([{"a", value}], weighted: true) end,
        fn -> HRW.Cluster.Fingerprint.of(["a"], weighted: value) end
      ]

      for {call, i} <- Enum.with_index(calls) do
        assert {:raised, text} = HRW.TestValues.outcome(call), "call #{i} with value #{v}"
        assert_valid(text, "call #{i} with value #{v}")
      end
    end
  end

  test "HRW.Cluster failures and log lines that name a value are valid UTF-8" do
    name = String.to_atom(String.duplicate("é", 100))

    for {value, v} <- Enum.with_index(hostile()) do
      log =
        capture_log(fn ->
          assert {:error, {:evaluation_failed, message}} =
                   HRW.Cluster.start(name: name, weight_fn: fn _ -> value end)

          assert_valid(message, "weight_fn returning value #{v}")

          assert {:error, {:evaluation_failed, message}} =
                   HRW.Cluster.start(
                     name: name,
                     weight_fn: fn _ -> raise ArgumentError, text(value) end
                   )

          assert_valid(message, "weight_fn raising value #{v}")
        end)

      assert String.valid?(log), "log not UTF-8: #{inspect(log, binaries: :as_binaries)}"
    end

    {:ok, pid} = HRW.Cluster.start(name: name)

    log =
      capture_log([level: :debug], fn ->
        for value <- hostile(), do: send(pid, {:hrw_utf8_test, value})
        # A call is answered after the messages sent before it are handled.
        assert HRW.Cluster.subscribe(name) == :ok
      end)

    assert String.valid?(log), "log not UTF-8: #{inspect(log, binaries: :as_binaries)}"
    assert log =~ "ignored {:hrw_utf8_test, "
    GenServer.stop(pid)
  end

  defp text(value) when is_binary(value), do: value
  defp text(value), do: inspect(value)

  describe "HRW.Cluster names" do
    # 243 code points is the most: the server's name adds 12 ("HRW.Cluster:") and
    # an atom holds at most 255.
    test "are counted in code points, as the VM counts an atom's length" do
      combining = fn cps ->
        String.duplicate("e\u0301", div(cps, 2)) <> String.duplicate("e", rem(cps, 2))
      end

      for cps <- [242, 243] do
        name = String.to_atom(combining.(cps))
        assert length(Atom.to_charlist(name)) == cps
        {:ok, pid} = HRW.Cluster.start(name: name)
        assert HRW.Cluster.owner(name, "k") == node()
        assert HRW.Cluster.subscribe(name) == :ok
        GenServer.stop(pid)
      end

      # Four-byte characters count once each.
      name = String.to_atom(String.duplicate("😀", 243))
      {:ok, pid} = HRW.Cluster.start(name: name)
      GenServer.stop(pid)

      # 127 × "e\u0301" is 127 graphemes but 254 code points (the report), 255 is
      # the longest atom.
      for cps <- [244, 254, 255] do
        name = String.to_atom(combining.(cps))

        for call <- [
              fn -> HRW.Cluster.start(name: name) end,
              fn -> HRW.Cluster.start_link(name: name) end,
              fn -> HRW.Cluster.child_spec(name: name) end
            ] do
          error = assert_raise ArgumentError, call
          assert error.message =~ "at most 243 characters (code points)"
          assert_valid(error.message, "name of #{cps} code points")
        end

        for call <- [
              fn -> HRW.Cluster.subscribe(name) end,
              fn -> HRW.Cluster.put_overrides(name, %{}) end,
              fn -> HRW.Cluster.owner(name, "k") end
            ] do
          error = assert_raise ArgumentError, call
          assert error.message =~ "is running"
        end
      end

      # 256 code points is no atom at all: the VM refuses it.
      assert_raise SystemLimitError, fn -> String.to_atom(combining.(256)) end
    end
  end
end
