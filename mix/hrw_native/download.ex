defmodule Mix.HrwNative.Download do
  @max_redirects 5
  @poll_ms 25
  @max_held_bytes 16 * 1024 * 1024
  @redirects [301, 302, 303, 307, 308]

  @moduledoc """
  The one HTTP download of the compile task, through OTP's `:httpc` (as Mix, Hex
  and RustlerPrecompiled fetch), a stand-alone one started for each request and
  stopped before it returns: `:httpc` speaks HTTP/1.1 and to proxies; this module
  keeps the policy. Every URL and header value it acts
  on is checked by `Mix.HrwNative.Wire`; the proxy comes from
  `Mix.HrwNative.Proxy`.

    * Redirects are followed here, not by `:httpc`: at most #{@max_redirects}, each
      `Location` checked as the first URL was, and never to another scheme.
    * TLS: `Mix.HrwNative.TLS`'s options.
    * A 200's body is streamed (`stream: {:self, :once}`) into one binary, and the
      request is cancelled as soon as it would pass the size limit. `:httpc` holds
      the status line, the headers and the whole body of any other status before
      it answers: the request is cancelled once they hold more than
      #{div(@max_held_bytes, 1024 * 1024)} MiB (docs/NATIVE.md has the figures).
    * One deadline for the whole download, redirects included: 20 times the
      timeout, which also bounds each wait for the next message.
  """

  alias Mix.HrwNative.{Proxy, TLS, Wire}
  alias Mix.HrwNative.Download.Failure

  @filter :hrw_native_httpc

  @typedoc """
  `:timeout_ms`: the longest wait for a connection or for the next part of the
  answer (the whole download gets 20 times that); `:max_bytes`: the body's size
  limit; `:cacerts`: the DER CA certificates to trust (`Mix.HrwNative.TLS.read_pem/1`), nil for the
  OS's; `:proxies`: `Mix.HrwNative.Proxy.settings/1`.
  """
  @type options :: %{
          required(:timeout_ms) => pos_integer(),
          required(:max_bytes) => pos_integer(),
          optional(:cacerts) => [binary()] | nil,
          optional(:proxies) => Proxy.settings()
        }

  @typedoc """
  `{:ok, body, url}`, `url` being the one the body came from (after redirects,
  as shown); `{:unavailable, reason}` when nothing came (no answer, a timeout, an
  HTTP error status, a network error, an unusable proxy setting); `{:refused,
  reason}` when what came must not be used (a body over the limit or shorter than
  declared, a certificate that fails verification, a redirect that is not
  allowed).
  """
  @type result ::
          {:ok, binary(), String.t()} | {:unavailable, String.t()} | {:refused, String.t()}

  @doc "Downloads `url` into memory. See `t:options/0` and `t:result/0`."
  @spec download(String.t(), options()) :: result()
  def download(url, opts) do
    :ok = Mix.HrwNative.OTPApps.on_code_path([:crypto, :asn1, :public_key, :ssl, :inets])

    with {:ok, _} <- Application.ensure_all_started(:ssl),
         {:ok, _} <- Application.ensure_all_started(:inets),
         {:ok, url} <- refuse(Wire.parse(url), "refusing to download from a URL that ") do
      get(url, opts, System.monotonic_time(:millisecond) + opts.timeout_ms * 20, 0)
    else
      {:error, _} -> {:unavailable, "cannot start OTP's HTTP client (its ssl or inets failed)"}
      other -> other
    end
  end

  defp refuse({:error, reason}, prefix), do: {:refused, prefix <> reason}
  defp refuse(ok, _prefix), do: ok

  defp get(url, _opts, _deadline, redirects) when redirects > @max_redirects,
    do: {:unavailable, "more than #{@max_redirects} redirects, the last to #{Wire.show(url)}"}

  defp get(url, opts, deadline, redirects) do
    with {:ok, proxy} <- route(url, opts),
         {:ok, tls} <- TLS.options(url, opts) do
      case request(url, proxy, tls, opts, deadline) do
        {:redirect, locations} ->
          with {:ok, next} <- refuse(Wire.location(url, locations), ""),
               do: get(next, opts, deadline, redirects + 1)

        result ->
          result
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

  # -- the client: one stand-alone :httpc per request ---------------------------------

  # A stand-alone :httpc (its manager, unregistered, and the handler it links)
  # lives for one request: `stop/1` kills both and waits for them, so nothing it
  # holds or schedules outlives the request. Unregistered, it cannot re-send a
  # request by itself: the re-send :httpc schedules for a 503 with Retry-After
  # is addressed to a registered profile name, and lands nowhere.
  defp client(proxy) do
    case :inets.start(:httpc, [profile: :hrw_native], :stand_alone) do
      {:ok, client} ->
        true = Process.unlink(client)
        at = proxy && {to_list(proxy.host), proxy.port}
        via = if at, do: [proxy: {at, []}, https_proxy: {at, []}], else: []
        # One request, no connection kept: every request connects anew.
        :ok = :httpc.set_options([ipfamily: :inet6fb4, max_sessions: 1] ++ via, client)
        _ = :logger.remove_primary_filter(@filter)
        :ok = :logger.add_primary_filter(@filter, {&__MODULE__.quiet/2, client})
        {:ok, client}

      {:error, _} ->
        {:unavailable, "cannot start OTP's HTTP client"}
    end
  end

  defp stop(client) do
    {:links, handlers} = Process.info(client, :links) || {:links, []}

    # The handlers first: killed, the manager's death cannot make them report.
    for pid <- handlers ++ [client], is_pid(pid) do
      ref = Process.monitor(pid)
      Process.exit(pid, :kill)
      receive do: ({:DOWN, ^ref, _, _, _} -> :ok)
    end

    _ = :logger.remove_primary_filter(@filter)
  end

  @doc false
  # A logger filter, while a request runs: what the client's processes log (a
  # crash report prints their state, the request's credentials with it) is
  # dropped; what went wrong reaches the caller as the request's result.
  @spec quiet(:logger.log_event(), pid()) :: :stop | :ignore
  def quiet(_event, client),
    do: if(client in [self() | Process.get(:"$ancestors", [])], do: :stop, else: :ignore)

  # -- one request -------------------------------------------------------------------

  defp request(url, proxy, tls, opts, deadline) do
    with {:ok, client} <- client(proxy) do
      try do
        request(url, client, proxy, tls, opts, deadline)
      after
        stop(client)
      end
    end
  end

  defp request(url, client, proxy, tls, opts, deadline) do
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
        # The handler the manager started for the request: watched, so that a
        # request it ends without an answer is not waited for.
        {:links, links} = Process.info(client, :links)
        handler = Enum.find(links, &is_pid/1)
        watch = if handler, do: Process.monitor(handler), else: make_ref()
        if handler == nil, do: send(self(), {:DOWN, watch, :process, nil, :noproc})
        before = :erlang.memory(:binary)

        try do
          answer(Map.merge(s, %{ref: ref, handler: handler, watch: watch, before: before}))
        after
          Process.demonitor(watch, [:flush])
        end

      {:error, reason} ->
        Failure.failed(s, reason)
    end
  after
    flush()
  end

  defp basic(_name, nil), do: []

  defp basic(name, {user, password}),
    do: [{name, to_list("Basic " <> Base.encode64(user <> ":" <> password))}]

  # The proxy's credentials, as :httpc sends them (also on CONNECT); bytes, not
  # code points, because it base64-encodes the lists as they are.
  defp proxy_auth(%{credentials: {user, password}}),
    do: [proxy_auth: {:binary.bin_to_list(user), :binary.bin_to_list(password)}]

  defp proxy_auth(_), do: []

  defp flush do
    receive do
      {:http, _} -> flush()
    after
      0 -> :ok
    end
  end

  defp answer(s) do
    case next(s, now()) do
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
    case next(s, now(), byte_size(acc)) do
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

  # The next message about the request. While it waits, the memory :httpc holds
  # for the answer is looked at every @poll_ms: it keeps a status line, the
  # headers and any body but a 200's in memory until they have all come, so an
  # answer that grows past @max_held_bytes is cancelled (docs/NATIVE.md says
  # what this bounds). Counted: the handler's heap and the VM's binaries made
  # since the request began, but for the `held` bytes of a 200's body this
  # process holds (twice: a binary that grows may have that much room).
  defp next(s, since, held \\ 0) do
    {ref, watch} = {s.ref, s.watch}

    receive do
      {:http, {^ref, :stream_start, headers, pid}} -> {:start, headers, pid}
      {:http, {^ref, :stream, part}} -> {:part, part}
      {:http, {^ref, :stream_end, headers}} -> {:end, headers}
      {:http, {^ref, {:error, reason}}} -> {:error, reason}
      {:http, {^ref, response}} -> {:whole, response}
      {:DOWN, ^watch, _, _, _} -> {:error, :dropped}
    after
      min(@poll_ms, wait(s, since)) ->
        heap = with {:memory, bytes} <- s.handler && Process.info(s.handler, :memory), do: bytes
        bytes = max(:erlang.memory(:binary) - s.before - 2 * held, 0) + (heap || 0)

        cond do
          bytes > @max_held_bytes ->
            {:refused,
             "#{Wire.show(s.url)} sent over #{div(bytes, 1024 * 1024)} MiB of status line, " <>
               "headers or error body, over the #{div(@max_held_bytes, 1024 * 1024)} MiB " <>
               "an answer may hold before its body"}

          wait(s, since) == 0 ->
            Failure.timed_out(s)

          true ->
            next(s, since, held)
        end
    end
  end

  defp binary_headers(headers),
    do: for({k, v} <- headers, do: {String.downcase(to_string(k)), :erlang.iolist_to_binary(v)})

  defp values(headers, name), do: for({^name, value} <- headers, do: value)

  # What is left of a wait that began at `since`: at most the timeout, never past
  # the deadline.
  defp wait(s, since), do: max(min(since + s.opts.timeout_ms, s.deadline) - now(), 0)

  defp now, do: System.monotonic_time(:millisecond)

  defp to_list(text), do: :binary.bin_to_list(text)
end
