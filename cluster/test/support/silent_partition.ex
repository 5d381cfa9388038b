defmodule HRW.SilentPartition do
  @moduledoc false
  # :peer nodes whose links can go silent: packets between two groups stop, the
  # TCP connections stay open (no FIN, no RST), so no `:nodedown` fires until
  # `net_ticktime` notices. No root, no host rule: every distribution connection
  # between two peers runs through a userland relay in this VM
  # (`HRW.SilentPartition.Relay`), which forwards bytes until told to cut a pair,
  # and then reads and forwards nothing of that pair until it is healed. The
  # peers find each other through `HRW.SilentPartition.Epmd` (no epmd).
  #
  # This VM is not part of their distribution: it drives the peers over :peer's
  # TCP control connection (`call/5`), so it is never a member of their clusters
  # and never bridges a cut. Used by test/hrw/cluster_lease_test.exs and
  # bench/silent_partition.exs, and free of ExUnit so that other suites (the
  # example's) and scripts can load it too.

  alias HRW.SilentPartition.Relay

  defstruct [:relay, :nodes, :peers]

  @type t :: %__MODULE__{relay: pid(), nodes: [node()], peers: %{node() => pid()}}

  @doc """
  Starts `count` peers on 127.0.0.1, every pair connected through the relay.
  Options: `:prefix` (an atom in the node names), `:net_ticktime` (seconds,
  default 60: OTP's), `:logger_level` (the peers', default `:error`) and `:args`
  (more command-line arguments, charlists).
  """
  def start(count, opts \\ []) when is_integer(count) and count >= 2 do
    prefix = Keyword.get(opts, :prefix, :silent)
    tag = "#{System.pid()}_#{System.unique_integer([:positive])}"
    names = for i <- 1..count, do: :"#{prefix}_#{i}_#{tag}"
    nodes = Enum.map(names, &:"#{&1}@127.0.0.1")
    {:ok, relay} = Relay.start_link(nodes)

    peers =
      Map.new(Enum.zip(names, nodes), fn {name, node} ->
        {node, start_peer(relay, name, node, nodes, opts)}
      end)

    harness = %__MODULE__{relay: relay, nodes: nodes, peers: peers}

    for {a, i} <- Enum.with_index(nodes), b <- Enum.drop(nodes, i + 1) do
      true = call(harness, a, :net_kernel, :connect_node, [b])
    end

    # Connections are set up asynchronously on the other side too: wait for a mesh.
    await(fn ->
      Enum.all?(nodes, &(Enum.sort(call(harness, &1, Node, :list, [])) == nodes -- [&1]))
    end)

    harness
  end

  defp start_peer(relay, name, node, nodes, opts) do
    routes =
      for other <- nodes, other != node do
        [other_name, _host] = other |> Atom.to_string() |> String.split("@")

        [
          ~c"-hrw_silent_route",
          String.to_charlist(other_name),
          ~c"#{Relay.port(relay, node, other)}"
        ]
      end

    args =
      [
        ~c"-epmd_module",
        ~c"Elixir.HRW.SilentPartition.Epmd",
        ~c"-start_epmd",
        ~c"false",
        ~c"-kernel",
        ~c"net_ticktime",
        ~c"#{Keyword.get(opts, :net_ticktime, 60)}",
        ~c"-kernel",
        ~c"logger_level",
        ~c"#{Keyword.get(opts, :logger_level, :error)}"
      ] ++
        Enum.concat(routes) ++
        Keyword.get(opts, :args, []) ++ Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

    {:ok, peer, ^node} =
      :peer.start(%{
        name: name,
        host: ~c"127.0.0.1",
        longnames: true,
        connection: {{127, 0, 0, 1}, 0},
        wait_boot: HRW.TestTimeouts.ms(120_000),
        args: args
      })

    :ok = Relay.target(relay, node, :peer.call(peer, HRW.SilentPartition.Epmd, :listen_port, []))
    peer
  end

  @doc "Calls `m.f(a)` on `node` over :peer's control connection (not through the relay)."
  def call(%__MODULE__{peers: peers}, node, m, f, a, timeout \\ 60_000),
    do: :peer.call(Map.fetch!(peers, node), m, f, a, timeout)

  @doc """
  Silences every link between a node of `left` and a node of `right`, both ways:
  from now on the relay forwards nothing on them (bytes already read are held).
  Returns the wall-clock time of the cut (`System.os_time(:microsecond)`, the
  same clock on every VM of this host).
  """
  def cut(%__MODULE__{relay: relay}, left, right),
    do: Relay.cut(relay, directions(left, right) ++ directions(right, left))

  @doc """
  Silences the links from each node of `from` to each node of `to` in that
  direction only: bytes (and closes) from `from` reach `to` no more, while `to`'s
  still reach `from`. Returns the wall-clock time of the cut, as `cut/3`.
  """
  def cut_one_way(%__MODULE__{relay: relay}, from, to),
    do: Relay.cut(relay, directions(from, to))

  @doc "Lets every link between `left` and `right` carry bytes again (held bytes first)."
  def heal(%__MODULE__{relay: relay}, left, right),
    do: Relay.heal(relay, directions(left, right) ++ directions(right, left))

  defp directions(from, to), do: for(a <- from, b <- to, a != b, do: {a, b})

  @doc """
  Runs on a peer (`call(harness, node, HRW.SilentPartition, :post, [dest,
  messages])`): sends `messages` to the process `dest` of that node, in order,
  then returns `:ok` once `dest` has handled them all (`:sys.get_state/1` from
  the same sender comes after them).
  """
  def post(dest, messages) do
    Enum.each(messages, &send(dest, &1))
    _ = :sys.get_state(dest)
    :ok
  end

  @doc """
  Runs on a peer: starts a process that calls each `{m, f, a}` of `calls` in
  turn, about every millisecond, until `stop_watch/1` (and once more after it),
  and records, on the wall clock (`System.os_time(:microsecond)`), the start of
  the last call that answered `value` and the end of the first call that
  answered neither `value` nor `nil`. Returns the process.
  """
  def watch(calls, value) do
    spawn(fn -> watch_loop(calls, value, %{last_value: nil, first_other: nil, calls: 0}) end)
  end

  @doc "Stops a `watch/2` process; returns what it recorded."
  def stop_watch(pid) do
    ref = Process.monitor(pid)
    send(pid, {:stop, self(), ref})

    receive do
      {^ref, record} -> record
      {:DOWN, ^ref, _, _, reason} -> exit(reason)
    end
  end

  # A stop is answered after one more pass, begun after the stop was sent, so the
  # record holds whatever the caller saw before stopping it, however late this
  # process was scheduled.
  defp watch_loop(calls, value, record) do
    receive do
      {:stop, from, ref} -> send(from, {ref, watch_pass(calls, value, record)})
    after
      1 -> watch_loop(calls, value, watch_pass(calls, value, record))
    end
  end

  defp watch_pass(calls, value, record) do
    record =
      Enum.reduce(calls, record, fn {m, f, a}, record ->
        started = System.os_time(:microsecond)
        answer = apply(m, f, a)
        ended = System.os_time(:microsecond)

        cond do
          answer == value -> %{record | last_value: started}
          answer == nil or record.first_other != nil -> record
          true -> %{record | first_other: ended}
        end
      end)

    %{record | calls: record.calls + 1}
  end

  @doc "Stops the peers and the relay."
  def stop(%__MODULE__{relay: relay, peers: peers}) do
    Enum.each(peers, fn {_node, peer} ->
      try do
        :peer.stop(peer)
      catch
        :exit, _ -> :ok
      end
    end)

    Relay.stop(relay)
  end

  @doc "Polls `check` every 10 ms until it returns true; raises after `timeout` ms."
  def await(check, timeout \\ 60_000, what \\ "a condition") do
    deadline = System.monotonic_time(:millisecond) + timeout
    poll(check, deadline, what)
  end

  defp poll(check, deadline, what) do
    cond do
      check.() ->
        :ok

      System.monotonic_time(:millisecond) > deadline ->
        raise "timed out waiting for #{what}"

      true ->
        Process.sleep(10)
        poll(check, deadline, what)
    end
  end
end

defmodule HRW.SilentPartition.Relay do
  @moduledoc false
  # Forwards each peer-to-peer distribution connection of an `HRW.SilentPartition`:
  # one listening port per ordered pair of peers (the route the dialling peer is
  # given for the other), two pump processes per connection, one per direction. A
  # pump reads a chunk, then waits while its direction is cut, then writes it on:
  # a cut direction moves no byte and no close (a close seen while cut is passed
  # on only after the heal), as when packets are dropped on the wire; `cut/3`
  # cuts both directions of each pair.

  use GenServer

  @doc "Starts a relay for `nodes`, listening on one loopback port per ordered pair."
  def start_link(nodes), do: GenServer.start_link(__MODULE__, nodes)

  @doc "The relay port `from` dials to reach `to`."
  def port(relay, from, to), do: GenServer.call(relay, {:port, from, to})

  @doc "Records the port `node`'s distribution listens on."
  def target(relay, node, port), do: GenServer.call(relay, {:target, node, port})

  @doc "Silences the directions `{from, to}` of `directions`; returns the wall-clock time."
  def cut(relay, directions), do: GenServer.call(relay, {:cut, directions})

  @doc "Lets the directions `{from, to}` of `directions` carry bytes again."
  def heal(relay, directions), do: GenServer.call(relay, {:heal, directions})

  def stop(relay) do
    GenServer.stop(relay)
  catch
    # Gone with the process it was linked to (the end of a setup_all).
    :exit, _ -> :ok
  end

  @impl GenServer
  def init(nodes) do
    Process.flag(:trap_exit, true)
    cuts = :ets.new(__MODULE__, [:public, read_concurrency: true])
    relay = self()

    ports =
      for from <- nodes, to <- nodes, from != to, into: %{} do
        opts = [:binary, active: false, ip: {127, 0, 0, 1}, reuseaddr: true, nodelay: true]
        {:ok, listen} = :gen_tcp.listen(0, opts)
        {:ok, port} = :inet.port(listen)
        spawn_link(fn -> accept(relay, listen, from, to, cuts) end)
        {{from, to}, port}
      end

    {:ok, %{ports: ports, targets: %{}, cuts: cuts}}
  end

  @impl GenServer
  def handle_call({:port, from, to}, _from, state),
    do: {:reply, Map.fetch!(state.ports, {from, to}), state}

  def handle_call({:target, node, port}, _from, state),
    do: {:reply, :ok, put_in(state.targets[node], port)}

  def handle_call({:lookup, node}, _from, state),
    do: {:reply, Map.get(state.targets, node), state}

  def handle_call({:cut, pairs}, _from, state) do
    :ets.insert(state.cuts, Enum.map(pairs, &{&1}))
    {:reply, System.os_time(:microsecond), state}
  end

  def handle_call({:heal, pairs}, _from, state) do
    Enum.each(pairs, &:ets.delete(state.cuts, &1))
    {:reply, System.os_time(:microsecond), state}
  end

  @impl GenServer
  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  # Runs for the relay's life (its listening socket closes with it): each accepted
  # connection, dialled by `from`, is joined to `to`'s listener; one pump carries
  # each direction. Both sockets belong to this process, so they close with it.
  defp accept(relay, listen, from, to, cuts) do
    with {:ok, inbound} <- :gen_tcp.accept(listen) do
      with port when is_integer(port) <- GenServer.call(relay, {:lookup, to}),
           {:ok, outbound} <-
             :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false, nodelay: true]) do
        spawn_link(fn -> pump(inbound, outbound, {from, to}, cuts) end)
        spawn_link(fn -> pump(outbound, inbound, {to, from}, cuts) end)
      else
        _ -> :gen_tcp.close(inbound)
      end

      accept(relay, listen, from, to, cuts)
    end
  end

  defp pump(from, to, direction, cuts) do
    case :gen_tcp.recv(from, 0) do
      {:ok, data} ->
        open(direction, cuts)

        case :gen_tcp.send(to, data) do
          :ok -> pump(from, to, direction, cuts)
          {:error, _} -> close(from, to)
        end

      {:error, _closed} ->
        open(direction, cuts)
        close(from, to)
    end
  end

  defp open(direction, cuts) do
    if cut?(direction, cuts) do
      Process.sleep(2)
      open(direction, cuts)
    end
  end

  # The table goes with the relay: then nothing is cut any more.
  defp cut?(direction, cuts) do
    :ets.member(cuts, direction)
  rescue
    ArgumentError -> false
  end

  defp close(a, b) do
    :gen_tcp.close(a)
    :gen_tcp.close(b)
  end
end
