defmodule HRW.ClusterAgreementTest do
  # Fingerprints across nodes, snapshots, dead nodes out at once, quorum and
  # await_agreement/2, with :peer nodes on loopback: not async.
  use ExUnit.Case, async: false

  import HRW.TestPeers, only: [eventually: 2]
  alias HRW.Cluster.{Fingerprint, Snapshot}

  @keys Enum.map(1..500, &"key-#{&1}")
  # Far above any test's duration: a member that leaves before it ends left by the
  # immediate path, not by a debounced evaluation.
  @never 600_000

  setup_all do
    HRW.TestPeers.distributed!()
  end

  defp start_peer(tag), do: HRW.TestPeers.start_peer(:hrw_ag, tag, connect: true)

  defp start_on(node, opts), do: {:ok, _} = :erpc.call(node, HRW.Cluster, :start, [opts])

  defp server(name), do: Process.whereis(HRW.Cluster.Options.server_name(name))

  # halt/0 kills the node at once: the call never returns.
  defp halt(node) do
    :erpc.call(node, :erlang, :halt, [], 5_000)
  catch
    _kind, _reason -> :ok
  end

  defp unique(tag), do: :"#{tag}_#{System.unique_integer([:positive])}"

  test "the same members give the same fingerprint on every node, whatever the generations" do
    name = unique(:ag_same)
    {:ok, _} = HRW.Cluster.start_link(name: name, debounce: 10)
    {_p1, n1} = start_peer(:same1)
    eventually(fn -> n1 in HRW.Cluster.members(name) end, "first join")
    {_p2, n2} = start_peer(:same2)
    eventually(fn -> n2 in HRW.Cluster.members(name) end, "second join")
    # n2's cluster starts with every member at once: generation 1.
    start_on(n2, name: name, debounce: 10)

    local = HRW.Cluster.snapshot(name)
    remote = :erpc.call(n2, HRW.Cluster, :snapshot, [name])
    assert local.generation >= 3 and remote.generation == 1
    assert local.members == Enum.sort([node(), n1, n2]) and remote.members == local.members
    assert local.fingerprint == remote.fingerprint
    assert local.fingerprint == Fingerprint.of(local.members)
  end

  test "snapshot/1 is one consistent read; :snapshots subscribers get generations and fingerprints" do
    name = unique(:ag_snap)
    {:ok, _} = HRW.Cluster.start_link(name: name, debounce: 10, depth: 2)
    :ok = HRW.Cluster.subscribe(name, :snapshots)
    first = HRW.Cluster.snapshot(name)
    assert %Snapshot{generation: 1, members: [_], quorum?: true} = first
    assert inspect(first) =~ "generation 1, fingerprint #{Fingerprint.hex(first.fingerprint)}"

    {_peer, n1} = start_peer(:snap)
    assert_receive {:hrw_cluster_snapshot, ^name, old, new}, 30_000
    assert old.generation == 1 and old.fingerprint == first.fingerprint
    assert old.structure == first.structure
    assert new.generation == 2 and new.members == Enum.sort([node(), n1])
    assert new.fingerprint == Fingerprint.of(new.members)
    assert new.structure == HRW.Cluster.structure(name)
    assert HRW.Cluster.snapshot(name) == new

    # Back to the old format; a bad format is refused.
    :ok = HRW.Cluster.subscribe(name, :structures)
    :ok = HRW.Cluster.put_overrides(name, %{"hot" => :pinned@host})
    assert_receive {:hrw_cluster_changed, ^name, _old, %HRW.Skeleton{}}, 5_000

    assert_raise ArgumentError, ~r/:structures or :snapshots/, fn ->
      HRW.Cluster.subscribe(name, :other)
    end
  end

  # The class: every way a member leaves. A nodedown (a stop, a kill, a
  # disconnect) and the last :pg process of a node leaving.
  for how <- [:stop, :kill, :disconnect] do
    test "a nodedown (#{how}) takes the node out before the server's next message" do
      name = unique(:ag_down)
      {peer, n1} = start_peer(:down)
      {:ok, _} = HRW.Cluster.start_link(name: name, debounce: @never, depth: 2)
      :ok = HRW.Cluster.subscribe(name, :snapshots)
      assert n1 in HRW.Cluster.members(name)
      :ok = :net_kernel.monitor_nodes(true)

      case unquote(how) do
        :stop -> HRW.TestPeers.stop_peer(peer)
        :kill -> halt(n1)
        :disconnect -> true = Node.disconnect(n1)
      end

      assert_receive {:nodedown, ^n1}, 30_000
      # The server was sent its nodedown when we were: once it has handled it
      # (this barrier), no lookup names the node.
      eventually(
        fn ->
          _ = :sys.get_state(server(name))
          n1 not in HRW.Cluster.snapshot(name).members
        end,
        "the server to drop #{n1}"
      )

      assert Enum.all?(@keys, &(HRW.Cluster.owner(name, &1) == node()))
      assert Enum.all?(@keys, &(n1 not in HRW.Cluster.owners(name, &1, 3)))
      assert_receive {:hrw_cluster_snapshot, ^name, %{generation: 1}, %{generation: 2} = new}
      assert new.members == [node()]
      # The previous generation still names it, for reads while data moves.
      assert n1 in HRW.Cluster.stable_owners(name, "key-1", 2)
      :ok = :net_kernel.monitor_nodes(false)
    end
  end

  # A VM that loads code on demand (mix, iex, :peer nodes) may spend hundreds of ms
  # loading modules on its first `inspect`: nothing on the immediate path renders
  # a term. Traced on the server process.
  test "the immediate removal renders no term" do
    name = unique(:ag_render)
    {peer, n1} = start_peer(:render)
    {:ok, pid} = HRW.Cluster.start_link(name: name, debounce: @never)

    patterns = [
      {HRW.Cluster.Describe, :value, :_},
      {Kernel, :inspect, :_},
      {Inspect.Algebra, :format, :_}
    ]

    for mfa <- patterns, do: :erlang.trace_pattern(mfa, true, [:local])
    1 = :erlang.trace(pid, true, [:call, {:tracer, self()}])

    try do
      HRW.TestPeers.stop_peer(peer)

      eventually(
        fn ->
          _ = :sys.get_state(pid)
          n1 not in HRW.Cluster.members(name)
        end,
        "the server to drop #{n1}"
      )
    after
      :erlang.trace(pid, false, [:call])
      for mfa <- patterns, do: :erlang.trace_pattern(mfa, false, [:local])
    end

    refute_received {:trace, ^pid, :call, _}
  end

  if Code.ensure_loaded?(:pg) and function_exported?(:pg, :monitor, 2) do
    test "the last :pg process of a node leaving takes the node out at once" do
      name = unique(:ag_pg)
      scope = unique(:ag_scope)
      {_peer, n1} = start_peer(:pg)
      {:ok, _} = :pg.start_link(scope)
      {:ok, _} = :erpc.call(n1, :pg, :start, [scope])

      [a, b] =
        for _ <- 1..2 do
          pid = Node.spawn(n1, Process, :sleep, [:infinity])
          :ok = :erpc.call(n1, :pg, :join, [scope, :g, pid])
          pid
        end

      eventually(fn -> length(:pg.get_members(scope, :g)) == 2 end, "the :pg joins")
      {:ok, _} = HRW.Cluster.start_link(name: name, source: {:pg, scope, :g}, debounce: @never)
      assert HRW.Cluster.members(name) == [n1]

      Process.exit(a, :kill)
      eventually(fn -> length(:pg.get_members(scope, :g)) == 1 end, "the first leave")
      _ = :sys.get_state(server(name))
      # Another process of n1 is still in the group: n1 stays.
      assert HRW.Cluster.members(name) == [n1]

      Process.exit(b, :kill)

      eventually(
        fn ->
          _ = :sys.get_state(server(name))
          HRW.Cluster.members(name) == []
        end,
        "the server to drop #{n1}"
      )

      assert HRW.Cluster.owner(name, "key-1") == nil
    end
  end

  test "quorum: a view with fewer members owns no key" do
    name = unique(:ag_quorum)
    {:ok, _} = HRW.Cluster.start_link(name: name, debounce: 10, quorum: {:majority, 3})
    alone = HRW.Cluster.snapshot(name)
    assert %{members: [_], quorum?: false, structure: nil} = alone
    assert HRW.Cluster.owner(name, "key-1") == nil
    assert HRW.Cluster.owners(name, "key-1", 2) == []
    assert HRW.Cluster.structure(name) == nil
    assert HRW.Cluster.members(name) == []

    {_peer, n1} = start_peer(:quorum)
    eventually(fn -> HRW.Cluster.snapshot(name).quorum? end, "quorum")
    assert HRW.Cluster.owner(name, "key-1") in [node(), n1]
    assert length(HRW.Cluster.owners(name, "key-1", 2)) == 2

    true = Node.disconnect(n1)

    eventually(
      fn ->
        _ = :sys.get_state(server(name))
        not HRW.Cluster.snapshot(name).quorum?
      end,
      "quorum lost"
    )

    assert Enum.all?(@keys, &(HRW.Cluster.owner(name, &1) == nil))

    assert_raise ArgumentError, ~r/:quorum must be/, fn ->
      HRW.Cluster.start(name: :q, quorum: 0)
    end

    assert_raise ArgumentError, ~r/:quorum must be/, fn ->
      HRW.Cluster.start(name: :q, quorum: {:majority, 0})
    end
  end

  test "await_agreement/2 names members that disagree or do not answer, within its timeout" do
    name = unique(:ag_await)
    {_p1, n1} = start_peer(:await1)
    {_p2, n2} = start_peer(:await2)
    {:ok, _} = HRW.Cluster.start_link(name: name, debounce: 10)
    eventually(fn -> length(HRW.Cluster.members(name)) == 3 end, "three members")
    start_on(n1, name: name, debounce: 10)

    # n2 runs no such cluster. Its first call into HRW.Cluster, which loads the
    # modules there, is made before the timed calls, so that their rounds time
    # remote calls only.
    assert :erpc.call(n2, HRW.Cluster, :remote_fingerprint, [name]) == :not_running

    # While members disagree, the call returns at its timeout with the last whole
    # round, so each of these two calls waits its whole timeout out: 2 s, scaled on
    # the emulated legs, long enough for a round's remote calls on a loaded machine
    # (1 s was not, on the emulated legs).
    assert {:error, %{no_answer: %{^n2 => :not_running}, disagree: disagree}} =
             HRW.Cluster.await_agreement(name, HRW.TestTimeouts.ms(2_000))

    assert disagree == %{}

    # n2 runs one that sees another member set.
    start_on(n2, name: name, debounce: 10, deny: [~r/await1/])
    fingerprint = HRW.Cluster.fingerprint(name)

    assert {:error, %{fingerprint: ^fingerprint, disagree: %{^n2 => theirs}}} =
             HRW.Cluster.await_agreement(name, HRW.TestTimeouts.ms(2_000))

    assert theirs == Fingerprint.of(Enum.sort([node(), n2]))
    assert theirs == :erpc.call(n2, HRW.Cluster, :fingerprint, [name])

    :ok = :erpc.call(n2, GenServer, :stop, [HRW.Cluster.Options.server_name(name)])
    start_on(n2, name: name, debounce: 10)
    assert {:ok, ^fingerprint} = HRW.Cluster.await_agreement(name, 30_000)
    assert_raise ArgumentError, ~r/:timeout/, fn -> HRW.Cluster.await_agreement(name, -1) end
  end
end
