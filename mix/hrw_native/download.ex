defmodule Mix.HrwNative.Download do
  @max_redirects 5
  @poll_ms 25
  @max_held_bytes 16 * 1024 * 1024
  @redirects [301, 302, 303, 307, 308]

  @moduledoc """
  The compile task's one HTTP download, in an OS process of its own: `download/2`
  starts an `erl` of the VM's own OTP and Elixir through a port and hands it the
  request on its standard input; there OTP's `:httpc` makes the requests and
  this module keeps the policy (docs/NATIVE.md, "The download's boundary"). The
  child halts when its input closes (its caller or the caller's VM ended), at
  its own deadline, or once it has answered; a watchdog refuses the download
  once the child holds #{div(@max_held_bytes, 1024 * 1024)} MiB beyond twice the
  body's limit; it writes no crash dump and logs nothing. Redirects are followed
  here (at most #{@max_redirects}, each `Location` checked by `Mix.HrwNative.Wire`,
  never to another scheme); TLS is `Mix.HrwNative.TLS`'s, the proxy
  `Mix.HrwNative.Proxy`'s; a 200's body is refused as soon as it would pass its
  limit; one deadline, 20 timeouts, covers the whole download.
  """

  alias Mix.HrwNative.{Proxy, TLS, Wire}
  alias Mix.HrwNative.Download.Failure

  # The child's code: the object code mix.exs compiled (keep/1).
  @modules [Wire, Proxy, TLS, Failure, __MODULE__]
  @compiled {__MODULE__, :object_code}

  # Reads the request, loads the code, runs child/2; any failure halts it silently.
  @boot ~S"""
  try
    P = open_port({fd, 0, 1}, [binary, {packet, 4}, eof]),
    receive {P, {data, D}} -> ok end,
    {Code, Job} = binary_to_term(D),
    {ok, _} = application:ensure_all_started(elixir),
    [{module, M} = code:load_binary(M, "hrw_native", B) || {M, B} <- Code],
    'Elixir.Mix.HrwNative.Download':child(P, Job)
  catch _:_ -> erlang:halt(3, [{flush, false}])
  end.
  """

  @typedoc """
  `:timeout_ms`: the longest wait for a connection or the next part of the answer;
  `:max_bytes`: the body's limit; `:cacerts`: DER CA certificates (nil: the
  OS's); `:proxies`: `Mix.HrwNative.Proxy.settings/1`.
  """
  @type options :: %{
          required(:timeout_ms) => pos_integer(),
          required(:max_bytes) => pos_integer(),
          optional(:cacerts) => [binary()] | nil,
          optional(:proxies) => Proxy.settings()
        }

  @typedoc """
  `{:ok, body, url}` (where the body came from, as shown); `{:unavailable,
  reason}` when nothing came; `{:refused, reason}` when what came must not be used.
  """
  @type result ::
          {:ok, binary(), String.t()} | {:unavailable, String.t()} | {:refused, String.t()}

  @doc "Downloads `url` into memory, in a process of its own. See `t:options/0` and `t:result/0`."
  @spec download(String.t(), options()) :: result()
  def download(url, opts) do
    case Wire.parse(url) do
      {:ok, parsed} ->
        # The port's owner: it closes the port (so the child halts) as soon as
        # the caller ends, and none of its failures can reach the caller.
        {caller, tag} = {self(), make_ref()}
        {_, ref} = spawn_monitor(fn -> send(caller, {tag, own(caller, url, opts, parsed)}) end)

        receive do
          {^tag, result} ->
            Process.demonitor(ref, [:flush]) && result

          {:DOWN, ^ref, _, _, _} ->
            {:unavailable, "the download of #{Wire.show(parsed)} ended without an answer"}
        end

      {:error, reason} ->
        {:refused, "refusing to download from a URL that " <> reason}
    end
  end

  defp own(caller, url, opts, parsed) do
    Process.flag(:trap_exit, true)
    watch = Process.monitor(caller)

    # ArgumentError (rescued below) if mix.exs kept no code for it.
    code = :persistent_term.get(@compiled)

    erl =
      :os.find_executable(~c"erl", ~c"#{:code.root_dir()}/bin") || raise(ArgumentError, "no erl")

    args = ~w(-noinput -kernel logger_level none -hrw_native_download -pa)
    args = args ++ [Path.dirname(:code.which(Kernel)), "-eval", @boot]
    # On Unix through sh, so that the child's stderr (a signal's name) goes nowhere.
    sh = ["-c", ~s(exec "$0" "$@" 2>/dev/null), to_string(erl) | args]
    {exe, args} = if match?({:unix, _}, :os.type()), do: {"/bin/sh", sh}, else: {erl, args}

    port =
      Port.open({:spawn_executable, exe}, [
        :binary,
        :exit_status,
        packet: 4,
        cd: "/",
        args: args,
        env:
          [{~c"ERL_CRASH_DUMP_SECONDS", ~c"0"}, {~c"ERL_CRASH_DUMP", ~c"/dev/null"}] ++
            for(name <- ~w(ERL_AFLAGS ERL_FLAGS ERL_ZFLAGS), do: {~c"#{name}", false})
      ])

    # Closed explicitly: a port ignores its owner's normal exit.
    try do
      Port.command(port, :erlang.term_to_binary({code, {url, opts}}))
      # The child's own deadline is 21 timeouts; its start is given one more.
      await(port, watch, parsed, now() + opts.timeout_ms * 22)
    after
      close(port)
    end
  rescue
    error in [ErlangError, ArgumentError] ->
      {:unavailable,
       "cannot start the download's process (#{Wire.escape(Exception.message(error))})"}
  end

  defp close(port) do
    Port.close(port)
  rescue
    ArgumentError -> :ok
  end

  @doc false
  # mix.exs hands over what Code.require_file/2 compiled: the child's modules.
  @spec keep([{module(), binary()}]) :: :ok
  def keep(compiled) do
    case for {module, _} = pair <- compiled, module in @modules, do: pair do
      [] -> :ok
      code -> :persistent_term.put(@compiled, code)
    end
  end

  defp await(port, watch, url, deadline) do
    receive do
      {^port, {:data, data}} ->
        :erlang.binary_to_term(data, [:safe])

      {^port, {:exit_status, status}} ->
        {:unavailable,
         "the download of #{Wire.show(url)} stopped (status #{status}) before it answered"}

      {:EXIT, ^port, _} ->
        {:unavailable, "the download of #{Wire.show(url)} stopped before it answered"}

      {:DOWN, ^watch, _, _, _} ->
        exit(:normal)
    after
      max(deadline - now(), 0) ->
        {:unavailable,
         "downloading #{Wire.show(url)}: its process did not answer in time (timed out)"}
    end
  end

  @doc false
  # The child's side (see @boot): runs the download in a process of its own,
  # watches its memory, answers once and halts.
  @spec child(port(), {String.t(), options()}) :: no_return()
  def child(port, {url, opts}) do
    {:ok, _} = Application.ensure_all_started(:ssl)
    {:ok, _} = Application.ensure_all_started(:inets)
    {parent, {:ok, url}} = {self(), Wire.parse(url)}
    before = :erlang.memory(:total)
    deadline = now() + opts.timeout_ms * 20
    {_, ref} = spawn_monitor(fn -> send(parent, {:result, get(url, opts, deadline, 0)}) end)
    limit = @max_held_bytes + 2 * opts.max_bytes
    watch(port, ref, {before, limit}, deadline + opts.timeout_ms, url)
  end

  # What the child holds beyond what it held before the request: the body (at
  # most twice its limit while it grows) and @max_held_bytes more.
  defp watch(port, ref, {before, limit} = budget, deadline, url) do
    receive do
      {:result, result} ->
        finish(port, result)

      {^port, :eof} ->
        :erlang.halt(1, flush: false)

      {:DOWN, ^ref, _, _, _} ->
        finish(port, {:unavailable, "downloading #{Wire.show(url)} failed in OTP's HTTP client"})
    after
      @poll_ms ->
        held = :erlang.memory(:total) - before

        cond do
          held > limit -> finish(port, Failure.over_memory(url, held, limit))
          now() > deadline -> :erlang.halt(2, flush: false)
          true -> watch(port, ref, budget, deadline, url)
        end
    end
  end

  defp finish(port, result) do
    Port.command(port, :erlang.term_to_binary(result))
    :erlang.halt(0)
  end

  # -- within the child: the requests -----------------------------------------------

  defp get(url, _opts, _deadline, redirects) when redirects > @max_redirects,
    do: {:unavailable, "more than #{@max_redirects} redirects, the last to #{Wire.show(url)}"}

  defp get(url, opts, deadline, redirects) do
    with {:ok, proxy} <- route(url, opts),
         {:ok, tls} <- TLS.options(url, opts),
         {:redirect, locations} <- request(url, proxy, tls, opts, deadline, redirects) do
      case Wire.location(url, locations) do
        {:ok, next} -> get(next, opts, deadline, redirects + 1)
        {:error, reason} -> {:refused, reason}
      end
    end
  end

  defp route(url, opts) do
    case Proxy.for_url(url, Map.get(opts, :proxies, %{http: nil, https: nil, no_proxy: []})) do
      :direct -> {:ok, nil}
      {:error, reason} -> {:unavailable, reason}
      ok -> ok
    end
  end

  # One stand-alone :httpc per request (a redirect's starts another), one
  # connection, not kept; unregistered, so the re-send :httpc schedules for a 503
  # with Retry-After (addressed to a registered profile) lands nowhere.
  defp request(url, proxy, tls, opts, deadline, redirects) do
    {:ok, client} = :inets.start(:httpc, [profile: :"hrw_native#{redirects}"], :stand_alone)
    true = Process.unlink(client)
    at = proxy && {to_list(proxy.host), proxy.port}
    via = if at, do: [proxy: {at, []}, https_proxy: {at, []}], else: []
    :ok = :httpc.set_options([ipfamily: :inet6fb4, max_sessions: 1] ++ via, client)
    left = max(deadline - now(), 1)

    headers =
      [
        {~c"user-agent", ~c"hrw-native-compiler"},
        {~c"accept-encoding", ~c"identity"},
        {~c"connection", ~c"close"}
      ] ++ basic(~c"authorization", Wire.credentials(url))

    http_opts =
      [
        autoredirect: false,
        timeout: left,
        connect_timeout: min(opts.timeout_ms, left),
        ssl: tls
      ] ++ proxy_auth(proxy)

    request = {to_list(Wire.request_url(url)), headers}
    options = [sync: false, stream: {:self, :once}, body_format: :binary]
    s = %{url: url, proxy: proxy, opts: opts, deadline: deadline, length: :none, chunked: false}

    case :httpc.request(:get, request, http_opts, options, client) do
      {:ok, ref} ->
        # The request's handler: watched, so a request it drops is not waited for.
        {:links, links} = Process.info(client, :links)
        handler = Enum.find(links, &is_pid/1)
        watch = if handler, do: Process.monitor(handler), else: make_ref()
        if handler == nil, do: send(self(), {:DOWN, watch, :process, nil, :noproc})
        answer(Map.merge(s, %{ref: ref, watch: watch}))

      {:error, reason} ->
        Failure.failed(s, reason)
    end
  end

  defp basic(_name, nil), do: []

  defp basic(name, {user, password}),
    do: [{name, to_list("Basic " <> Base.encode64(user <> ":" <> password))}]

  # The proxy's credentials, as :httpc sends them (also on CONNECT); bytes, not
  # code points, because it base64-encodes the lists as they are.
  defp proxy_auth(%{credentials: {user, password}}),
    do: [proxy_auth: {:binary.bin_to_list(user), :binary.bin_to_list(password)}]

  defp proxy_auth(_), do: []

  defp answer(s) do
    case next(s) do
      {:start, headers, pid} ->
        headers = binary_headers(headers)

        case Wire.content_length(values(headers, "content-length")) do
          {:ok, length} when length > s.opts.max_bytes ->
            Failure.oversized(s, length)

          {:error, reason} ->
            {:refused, "#{Wire.show(s.url)} sent #{reason}"}

          length ->
            chunked = Enum.any?(values(headers, "transfer-encoding"), &(&1 =~ ~r/chunked/i))
            :ok = :httpc.stream_next(pid)
            body(%{s | length: length, chunked: chunked}, pid, <<>>)
        end

      {:whole, {{_, 407, _}, _headers, _body}} when s.proxy != nil ->
        {:unavailable,
         "the proxy #{s.proxy.shown} answered HTTP 407 (it asks for credentials) to the " <>
           "request for #{Wire.show(s.url)}"}

      {:whole, {{_, status, _}, headers, _body}} when status in @redirects ->
        {:redirect, values(binary_headers(headers), "location")}

      {:whole, {{_, status, _}, _headers, _body}} ->
        {:unavailable, "#{Wire.show(s.url)} answered HTTP #{status}"}

      {:error, reason} ->
        Failure.failed(s, reason)

      other ->
        stop_or_unexpected(s, other)
    end
  end

  defp body(s, pid, acc) do
    case next(s) do
      {:part, part} when byte_size(acc) + byte_size(part) > s.opts.max_bytes ->
        Failure.oversized(s, byte_size(acc) + byte_size(part))

      {:part, part} ->
        :ok = :httpc.stream_next(pid)
        body(s, pid, acc <> part)

      {:end, _headers} ->
        case s.length do
          {:ok, length} when length > byte_size(acc) -> Failure.truncated(s, length)
          _ -> {:ok, acc, Wire.show(s.url)}
        end

      {:error, reason} ->
        Failure.failed(s, reason)

      other ->
        stop_or_unexpected(s, other)
    end
  end

  defp stop_or_unexpected(_s, {kind, _} = stop) when kind in [:refused, :unavailable], do: stop

  defp stop_or_unexpected(s, _other),
    do: {:unavailable, "#{Wire.show(s.url)}: :httpc sent its messages out of order"}

  # The next message about the request, waited for at most the timeout and never
  # past the deadline.
  defp next(s) do
    {ref, watch} = {s.ref, s.watch}

    receive do
      {:http, {^ref, :stream_start, headers, pid}} -> {:start, headers, pid}
      {:http, {^ref, :stream, part}} -> {:part, part}
      {:http, {^ref, :stream_end, headers}} -> {:end, headers}
      {:http, {^ref, {:error, reason}}} -> {:error, reason}
      {:http, {^ref, response}} -> {:whole, response}
      {:DOWN, ^watch, _, _, _} -> {:error, :dropped}
    after
      max(min(s.opts.timeout_ms, s.deadline - now()), 0) -> Failure.timed_out(s)
    end
  end

  defp binary_headers(headers),
    do: for({k, v} <- headers, do: {String.downcase(to_string(k)), :erlang.iolist_to_binary(v)})

  defp values(headers, name), do: for({^name, value} <- headers, do: value)

  defp now, do: System.monotonic_time(:millisecond)

  defp to_list(text), do: :binary.bin_to_list(text)
end
