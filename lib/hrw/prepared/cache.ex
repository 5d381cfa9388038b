defmodule HRW.Prepared.Cache do
  @moduledoc false
  # Rebuilt resources of stale structures, shared by every process of this node: a
  # ring or skeleton that arrives from another node (or from a binary whose
  # resource was collected) is rebuilt once per node, not once per process that
  # uses it. When a structure is stale and what is retried is `HRW.Prepared`'s
  # rule; this is only where its rebuilds are kept: the caller passes the build,
  # so this module knows nothing of rings and skeletons.
  #
  #   * Where: a public ETS table, `{{module, fingerprint}, resource, nodes, used_ms,
  #     order}` (`order` a monotonic integer, for LRU), read by the callers directly; owned by this small server, started by the
  #     :hrw application (`HRW.Application`).
  #   * Coalescing: a miss asks the server for the key. The first caller is told to
  #     build (in its own process: the struct is never copied to the server); the
  #     others wait for its result. If the builder raises or dies, the next waiter
  #     builds.
  #   * Bounds: at most @max_entries entries and @max_nodes nodes in all (one larger
  #     structure is kept alone); least recently used entries go first. An entry
  #     unused for @idle_ms is dropped by a sweep every @sweep_ms. A resource in use
  #     lives on in the processes that hold it (resources are freed by the GC), so
  #     dropping an entry never breaks a lookup, it only costs the next miss a build.
  #   * Without the application (the table does not exist, `mix run --no-start`),
  #     each call rebuilds: structures stay usable, at the price of a build per call.
  #
  # Rebuilds are counted in a `:counters` reference kept in `:persistent_term`
  # (`rebuilds/0`), so tests can count them deterministically.

  use GenServer

  @table __MODULE__
  @counter {__MODULE__, :rebuilds}
  @max_entries 64
  @max_nodes 16_000_000
  @idle_ms 60_000
  @sweep_ms 10_000
  # `used_ms` is written at most this often per entry, not on every lookup.
  @touch_ms 1_000

  @typedoc "`{struct module, fingerprint}`."
  @type key :: {module(), non_neg_integer()}

  @doc "Starts the server that owns the table (a child of `HRW.Application`)."
  @spec start_link(term()) :: GenServer.on_start()
  def start_link(_arg), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @doc """
  The resource for `key`: from the table, from a build another process is running,
  or made here by `build` (which returns `{resource, node_count}`) and shared. The
  build runs in the calling process, never in the server.
  """
  @spec fetch(key(), (... -> {reference(), non_neg_integer()})) :: reference()
  def fetch(key, build) do
    case lookup(key) do
      {:ok, resource} -> resource
      :miss -> claim(key, build)
      :no_table -> elem(build.(), 0)
    end
  end

  defp lookup(key) do
    case :ets.lookup(@table, key) do
      [{^key, resource, _nodes, used, _order}] ->
        now = now()
        if now - used > @touch_ms, do: :ets.update_element(@table, key, [{4, now}, {5, order()}])
        {:ok, resource}

      [] ->
        :miss
    end
  rescue
    ArgumentError -> :no_table
  end

  defp claim(key, build) do
    case GenServer.call(__MODULE__, {:claim, key}, :infinity) do
      {:ok, resource} ->
        resource

      :build ->
        {resource, nodes} =
          try do
            build.()
          catch
            kind, reason ->
              GenServer.cast(__MODULE__, {:failed, key, self()})
              :erlang.raise(kind, reason, __STACKTRACE__)
          end

        :ok = GenServer.call(__MODULE__, {:built, key, resource, nodes}, :infinity)
        resource
    end
  catch
    # The server stopped (the application is stopping): build here.
    :exit, {reason, {GenServer, :call, _}} when reason in [:noproc, :shutdown, :normal] ->
      elem(build.(), 0)
  end

  @doc "Counts one rebuild (each build given to `fetch/2` calls it)."
  @spec count_rebuild() :: :ok
  def count_rebuild do
    case :persistent_term.get(@counter, nil) do
      nil -> :ok
      counter -> :counters.add(counter, 1, 1)
    end
  end

  @doc "Rebuilds of stale structures in this VM since the application first started."
  @spec rebuilds() :: non_neg_integer()
  def rebuilds do
    case :persistent_term.get(@counter, nil) do
      nil -> 0
      counter -> :counters.get(counter, 1)
    end
  end

  @doc "The entries kept, `[{key, nodes}]`, most recently used first."
  @spec entries() :: [{key(), non_neg_integer()}]
  def entries do
    @table
    |> :ets.tab2list()
    |> Enum.sort_by(fn {_key, _resource, _nodes, _used, order} -> -order end)
    |> Enum.map(fn {key, _resource, nodes, _used, _order} -> {key, nodes} end)
  end

  @doc "Drops the entries unused since `now_ms - #{@idle_ms}` (the periodic sweep)."
  @spec sweep(integer()) :: :ok
  def sweep(now_ms), do: GenServer.call(__MODULE__, {:sweep, now_ms})

  # -- the server ----------------------------------------------------------------------

  @impl GenServer
  def init([]) do
    if :persistent_term.get(@counter, nil) == nil,
      do: :persistent_term.put(@counter, :counters.new(1, [:atomics]))

    _ = :ets.new(@table, [:named_table, :public, :set, read_concurrency: true])
    _ = :timer.send_interval(@sweep_ms, :sweep)
    # key => {builder pid, monitor, waiting callers}
    {:ok, %{building: %{}}}
  end

  @impl GenServer
  def handle_call({:claim, key}, {pid, _} = from, state) do
    case {:ets.lookup(@table, key), state.building} do
      {[{^key, resource, _nodes, _used, _order}], _} ->
        {:reply, {:ok, resource}, state}

      {[], %{^key => {builder, mref, waiting}}} ->
        {:noreply, put_in(state.building[key], {builder, mref, [from | waiting]})}

      {[], _} ->
        {:reply, :build, put_in(state.building[key], {pid, Process.monitor(pid), []})}
    end
  end

  def handle_call({:built, key, resource, nodes}, _from, state) do
    {{_builder, mref, waiting}, building} = Map.pop(state.building, key)
    Process.demonitor(mref, [:flush])
    true = :ets.insert(@table, {key, resource, nodes, now(), order()})
    for from <- waiting, do: GenServer.reply(from, {:ok, resource})
    evict(key)
    {:reply, :ok, %{state | building: building}}
  end

  def handle_call({:sweep, now_ms}, _from, state) do
    {:reply, sweep_table(now_ms), state}
  end

  @impl GenServer
  def handle_cast({:failed, key, pid}, state), do: {:noreply, builder_gone(state, key, pid)}

  @impl GenServer
  def handle_info(:sweep, state) do
    :ok = sweep_table(now())
    {:noreply, state}
  end

  def handle_info({:DOWN, _mref, :process, pid, _reason}, state) do
    keys = for {key, {^pid, _, _}} <- state.building, do: key
    {:noreply, Enum.reduce(keys, state, &builder_gone(&2, &1, pid))}
  end

  # The builder of `key` failed or died: the next waiter builds, or nobody waits.
  defp builder_gone(state, key, pid) do
    case state.building do
      %{^key => {^pid, mref, waiting}} ->
        Process.demonitor(mref, [:flush])

        case Enum.reverse(waiting) do
          [] ->
            %{state | building: Map.delete(state.building, key)}

          [{next, _} = from | rest] ->
            GenServer.reply(from, :build)
            entry = {next, Process.monitor(next), Enum.reverse(rest)}
            put_in(state.building[key], entry)
        end

      _ ->
        state
    end
  end

  # Least recently used first, until within both bounds (`kept` stays).
  defp evict(kept) do
    entries = :ets.tab2list(@table)
    total = Enum.reduce(entries, 0, fn {_, _, nodes, _, _}, sum -> sum + nodes end)

    entries
    |> Enum.reject(fn {key, _, _, _, _} -> key == kept end)
    |> Enum.sort_by(fn {_, _, _, _, order} -> order end)
    |> Enum.reduce_while({length(entries), total}, fn {key, _, nodes, _, _}, {count, total} ->
      if count > @max_entries or total > @max_nodes do
        true = :ets.delete(@table, key)
        {:cont, {count - 1, total - nodes}}
      else
        {:halt, {count, total}}
      end
    end)

    :ok
  end

  defp sweep_table(now_ms) do
    idle = now_ms - @idle_ms
    _ = :ets.select_delete(@table, [{{:_, :_, :_, :"$1", :_}, [{:<, :"$1", idle}], [true]}])
    :ok
  end

  defp now, do: System.monotonic_time(:millisecond)
  defp order, do: System.unique_integer([:monotonic])
end
