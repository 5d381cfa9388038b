defmodule HRW.TestStats do
  @moduledoc false

  @doc "Pearson's χ² of observed counts against a uniform (or given) expectation."
  def chi_square(counts, nodes, keys, expected_share \\ nil) do
    n = length(nodes)

    Enum.reduce(nodes, 0.0, fn node, acc ->
      expected = keys * if(expected_share, do: expected_share.(node), else: 1 / n)
      diff = Map.get(counts, node, 0) - expected
      acc + diff * diff / expected
    end)
  end

  @doc "The acceptance bound used throughout: (N-1) + 8·sqrt(2(N-1))."
  def chi_bound(n), do: n - 1 + 8 * :math.sqrt(2 * (n - 1))

  def node_names(n), do: Enum.map(0..(n - 1), &"node-#{&1}")
end

defmodule HRW.TestValues do
  @moduledoc false

  @doc """
  Returns `value` as a term of unknown type, for tests that pass a wrong value on
  purpose: Elixir's type checker (1.20+) warns at a call it can prove wrong, and
  the suite runs with warnings as errors. The call still receives `value`.
  """
  def untyped(value), do: :persistent_term.get({__MODULE__, :unset}, value)

  @doc "The message of the `ArgumentError` that `fun` raises, or nil if it returns."
  def argument_error_message(fun) do
    _ = fun.()
    nil
  rescue
    e in ArgumentError -> Exception.message(e)
  end
end

defmodule HRW.TestPeers do
  @moduledoc false
  # Erlang distribution and :peer nodes on loopback, for the tests that need other
  # BEAM nodes. Node names carry the OS pid, so concurrent test runs on one machine
  # do not clash.

  @doc "Starts distribution once (and epmd), and silences global's partition warnings."
  def distributed! do
    unless Node.alive?() do
      {_, 0} = System.cmd("epmd", ["-daemon"])
      {:ok, _} = Node.start(:"hrw_test_#{System.pid()}@127.0.0.1", :longnames)
    end

    # When peers stop one after another, global may ask a stopping peer to
    # disconnect "to prevent overlapping partitions" and say so: noise here.
    case :logger.add_primary_filter(__MODULE__, {&__MODULE__.drop_partition_warning/2, nil}) do
      :ok -> :ok
      {:error, {:already_exist, _}} -> :ok
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
        # A peer VM boots in well under :peer's default 15 s natively, not always
        # under emulation on a loaded machine.
        wait_boot: HRW.TestTimeouts.ms(15_000),
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

    ExUnit.Callbacks.on_exit(fn -> stop_peer(peer) end)
    {peer, node}
  end

  @doc """
  Polls `check` every 10 ms until it returns true; flunks with `message` (a string or
  a function giving one) after `timeout` ms. A wait for an asynchronous event, with
  a deadline far above its usual time: nothing here depends on machine speed.
  """
  def eventually(check, message, timeout \\ 15_000) do
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

defmodule HRW.TestTimeouts do
  @moduledoc false

  @doc """
  A test timeout of `ms` at native speed, times `HRW_TEST_TIMEOUT_SCALE` (default
  1): scripts/test-matrix sets it on its emulated legs (qemu-user), which run the
  suite many times slower. For `@tag`/`@moduletag timeout:`, which override `mix
  test --timeout`.
  """
  def ms(ms) do
    case Integer.parse(System.get_env("HRW_TEST_TIMEOUT_SCALE", "1")) do
      {scale, ""} when scale >= 1 -> ms * scale
      _ -> raise ArgumentError, "HRW_TEST_TIMEOUT_SCALE must be a positive integer"
    end
  end
end

# Elixir 1.15+ keeps only the project's applications on the code path: the
# precompiled-NIF tests use OTP's :inets (httpd, and its records at compile time).
if function_exported?(Mix, :ensure_application!, 1) do
  Enum.each([:crypto, :public_key, :ssl, :inets], &apply(Mix, :ensure_application!, [&1]))
end

ExUnit.start()
