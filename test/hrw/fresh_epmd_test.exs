defmodule HRW.FreshEpmdTest do
  # The peer tests on a machine where no epmd runs yet: a VM of its own, pointed by
  # ERL_EPMD_PORT at a port no epmd listens on, starts distribution through
  # `HRW.TestPeers.distributed!/0` (which starts that epmd) and a :peer node through
  # `HRW.TestPeers.start_peer/3`, then looks a key up there. `Node.start/2` right
  # after `epmd -daemon` can find no epmd listening yet on a loaded machine.
  use ExUnit.Case, async: true

  # The helpers come from the code path of a test build; a release build (the
  # emulated legs of scripts/test-matrix) compiled them in memory only.
  @support Path.expand("../support", __DIR__)

  @script """
  ExUnit.start(autorun: false)

  unless Code.ensure_loaded?(HRW.TestPeers) do
    for file <- ["test_timeouts.ex", "test_peers.ex"],
        do: Code.require_file(file, #{inspect(@support)})
  end

  defmodule FreshEpmd do
    use ExUnit.Case

    test "a peer starts and answers" do
      HRW.TestPeers.distributed!()
      {_peer, node} = HRW.TestPeers.start_peer(:hrw_fresh_epmd, :peer)
      assert :erpc.call(node, HRW, :owner, ["k", ["a", "b", "c"]]) == HRW.owner("k", ["a", "b", "c"])
    end
  end

  %{failures: 0, total: 1} = ExUnit.run()
  """

  test "peers start on a machine where no epmd runs yet" do
    port = unused_port()
    env = [{"ERL_EPMD_PORT", Integer.to_string(port)}]
    on_exit(fn -> System.cmd("epmd", ["-kill"], env: env, stderr_to_stdout: true) end)

    # The test build's code path, without ".": run from a folder of its own, so
    # that no folder named like the application (a checkout named hrw) can stand
    # for it when OTP looks up :hrw's priv folder.
    paths = for path <- :code.get_path(), path != ~c".", do: ["-pa", List.to_string(path)]
    elixir = System.find_executable("elixir")
    dir = Path.join(System.tmp_dir!(), "hrw_fresh_epmd_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)

    {output, status} =
      System.cmd(elixir, List.flatten(paths) ++ ["-e", @script],
        env: env,
        cd: dir,
        stderr_to_stdout: true
      )

    assert status == 0, output
    # The VM used the fresh port: its epmd is still there, with no node left.
    assert {names, 0} = System.cmd("epmd", ["-names"], env: env, stderr_to_stdout: true)
    assert names =~ "epmd: up and running on port #{port}"
  end

  # A port nothing listens on now (the OS picked it, and it was closed again).
  defp unused_port do
    {:ok, socket} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(socket)
    :ok = :gen_tcp.close(socket)
    port
  end
end
