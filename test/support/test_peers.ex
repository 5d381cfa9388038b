# These helpers call ExUnit. `mix test` loads it before compiling them, but
# `MIX_ENV=test mix compile` on Elixir 1.15+ puts only dependencies on the code path.
if function_exported?(Mix, :ensure_application!, 1), do: Mix.ensure_application!(:ex_unit)

defmodule HRW.TestPeers do
  @moduledoc false
  # Erlang distribution and :peer nodes on loopback, for the tests that need other
  # BEAM nodes. Node names carry the OS pid, so concurrent test runs on one machine
  # do not clash.

  @doc """
  Starts distribution once (and epmd, on the port `ERL_EPMD_PORT` names, else
  4369), and silences global's partition warnings.
  """
  def distributed! do
    unless Node.alive?() do
      epmd!()
      name = :"hrw_test_#{System.pid()}@127.0.0.1"

      case Node.start(name, :longnames) do
        {:ok, _} -> :ok
        {:error, reason} -> raise "could not start distribution as #{name}: #{inspect(reason)}"
      end
    end

    # When peers stop one after another, global may ask a stopping peer to
    # disconnect "to prevent overlapping partitions" and say so: noise here.
    case :logger.add_primary_filter(__MODULE__, {&__MODULE__.drop_partition_warning/2, nil}) do
      :ok -> :ok
      {:error, {:already_exist, _}} -> :ok
    end
  end

  # `epmd -daemon` returns once it has forked, before the daemon listens: a
  # `Node.start/2` right after it can find no epmd (econnrefused, then
  # `{:EXIT, :nodistribution}`), as on a fresh machine under load. So epmd is asked
  # for its names, as distribution will ask it, until it answers; an epmd already
  # running answers at once (the new daemon, finding its port taken, exits).
  defp epmd! do
    {_, 0} = System.cmd("epmd", ["-daemon"])
    deadline = System.monotonic_time(:millisecond) + HRW.TestTimeouts.ms(30_000)
    await_epmd(deadline)
  end

  defp await_epmd(deadline) do
    case :erl_epmd.names() do
      {:ok, _names} ->
        :ok

      {:error, reason} ->
        if System.monotonic_time(:millisecond) > deadline do
          raise "epmd started with `epmd -daemon` does not answer on port " <>
                  "#{System.get_env("ERL_EPMD_PORT", "4369")}: #{inspect(reason)}"
        end

        Process.sleep(20)
        await_epmd(deadline)
    end
  end

  @doc false
  def drop_partition_warning(%{msg: msg} = event, _extra) do
    text =
      case msg do
        {:string, string} -> IO.chardata_to_string(string)
        {:report, _} -> ""
        {format, args} -> format |> :io_lib.format(args) |> IO.chardata_to_string()
      end

    if text =~ "overlapping partitions", do: :stop, else: event
  rescue
    _ -> event
  end

  @doc """
  A peer node on 127.0.0.1 with this project's code, named `prefix_tag_...`, stopped
  when the test (or `setup_all`) that started it ends. With `connect: true` it is
  connected to every visible node, so each member sees the same cluster.
  """
  def start_peer(prefix, tag, opts \\ []) do
    {:ok, peer, node} =
      :peer.start(%{
        name: :"#{prefix}_#{tag}_#{System.pid()}_#{System.unique_integer([:positive])}",
        host: ~c"127.0.0.1",
        longnames: true,
        # A bound for a VM that never boots, far above a boot's time: OTP's JIT
        # under qemu-user on a loaded machine can take minutes to boot a peer.
        wait_boot: HRW.TestTimeouts.ms(60_000),
        args: [
          ~c"-kernel",
          ~c"logger_level",
          ~c"error" | Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
        ]
      })

    if Keyword.get(opts, :connect, false) do
      for other <- Node.list(),
          other != node,
          do: true = :erpc.call(node, Node, :connect, [other])
    end

    ExUnit.Callbacks.on_exit(fn ->
      stop_peer(peer)
      # The next test must not see this peer: its connection to this node goes down
      # a moment after the peer VM halts, and a test that starts meanwhile (a slow,
      # emulated VM shows it) would count it among the visible nodes.
      eventually(
        fn -> node not in Node.list(:connected) end,
        "#{node} still connected after its stop"
      )
    end)

    {peer, node}
  end

  @doc """
  Polls `check` every 10 ms until it returns true; flunks with `message` (a string or
  a function giving one) after `timeout` ms. A wait for an asynchronous event, with
  a deadline far above its usual time: nothing here depends on machine speed.
  """
  def eventually(check, message, timeout \\ HRW.TestTimeouts.ms(15_000)) do
    poll(check, message, System.monotonic_time(:millisecond) + timeout)
  end

  defp poll(check, message, deadline) do
    cond do
      check.() ->
        :ok

      System.monotonic_time(:millisecond) > deadline ->
        text = if is_function(message), do: message.(), else: message
        ExUnit.Assertions.flunk("timed out waiting: " <> text)

      true ->
        Process.sleep(10)
        poll(check, message, deadline)
    end
  end

  @doc "Stops a peer; one already gone is fine."
  def stop_peer(peer) do
    :peer.stop(peer)
  catch
    :exit, _ -> :ok
  end
end
