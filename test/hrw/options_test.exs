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

  test ":cluster_size has one range, checked alike by HRW.build/2 and HRW.Cluster" do
    for bad <- [0, 4097, :big, 2 ** 64] do
      suffix = ":cluster_size must be an integer in 1..4096, got: #{HRW.brief(bad)}"
      assert message(fn -> HRW.build(["a"], cluster_size: bad) end) == "HRW.build/2 " <> suffix

      assert message(fn -> HRW.Cluster.child_spec(name: :x, cluster_size: bad) end) ==
               "HRW.Cluster " <> suffix
    end

    assert message(fn -> HRW.build(["a"], fanout: 1) end) ==
             "HRW.build/2 :fanout must be an integer in 2..4096, got: 1"

    assert HRW.build(["a"], cluster_size: 4096, fanout: 4096).cluster_size == 4096
    assert %{id: {HRW.Cluster, :x}} = HRW.Cluster.child_spec(name: :x, cluster_size: 4096)
  end

  test "checking a cluster's options builds no structure" do
    patterns = [
      {HRW.Skeleton, :build, 2},
      {HRW.Ring, :new, 2},
      {HRW.Native, :skeleton_new, 3},
      {HRW.Native, :ring_new, 2}
    ]

    for {module, _, _} = mfa <- patterns do
      Code.ensure_loaded!(module)
      assert :erlang.trace_pattern(mfa, true, [:global]) == 1
    end

    try do
      # A build is traced: the tracing works before anything is refuted.
      assert [{HRW.Skeleton, :build, _} | _] = traced_calls(fn -> HRW.build(["a"]) end)

      assert traced_calls(fn ->
               for opts <- [[name: :x, cluster_size: 8], [name: :x, structure: :ring], [name: :x]],
                   do: HRW.Cluster.child_spec(opts)
             end) == []
    after
      for mfa <- patterns, do: :erlang.trace_pattern(mfa, false, [:global])
    end
  end

  # The traced calls `fun` makes, run in a process traced by this one.
  defp traced_calls(fun) do
    parent = self()

    pid =
      spawn_link(fn ->
        receive do: (:go -> :ok)
        fun.()
        send(parent, {:done, self()})
      end)

    :erlang.trace(pid, true, [:call])
    send(pid, :go)
    assert_receive {:done, ^pid}, 60_000
    # Every trace message of the process is in this mailbox after this barrier.
    ref = :erlang.trace_delivered(pid)
    assert_receive {:trace_delivered, ^pid, ^ref}, 60_000
    collect(pid, [])
  end

  defp collect(pid, acc) do
    receive do
      {:trace, ^pid, :call, mfa} -> collect(pid, [mfa | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  test "a cluster's :structure is one of two" do
    assert message(fn -> HRW.Cluster.child_spec(name: :x, structure: :tree) end) ==
             "HRW.Cluster :structure must be :skeleton or :ring, got: :tree"
  end

  test "an :epsilon below 0 is refused with the caller's name" do
    assert message(fn -> HRW.Bounded.assignments(["k"], ["a"], epsilon: -1) end) ==
             "HRW.Bounded.assignments/3 :epsilon must be a non-negative number, got: -1"
  end
end
