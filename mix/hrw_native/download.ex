defmodule Mix.HrwNative.Download do
  @max_redirects 5
  @max_head_bytes 64 * 1024
  @redirects [301, 302, 303, 307, 308]

  @moduledoc """
  The one HTTP download of the compile task: HTTP/1.1 GET over `:gen_tcp` or
  `:ssl`, written here so that every byte is bounded. The status line and headers
  (at most #{div(@max_head_bytes, 1024)} KiB) decide before any body is read: only a
  200's body is read, up to the size limit; a redirect's or an error's never is.

  TLS: the certificate chain is verified against the OS's CA store
  (`:public_key.cacerts_get/0`) or the PEM file given; a host name is sent as SNI
  and checked against the certificate's DNS names; an IP literal is sent as no
  SNI and checked against its IP addresses. Redirects (at most #{@max_redirects}) are checked
  one by one by `Mix.HrwNative.Precompiled.check_url/1`, and one from https to
  plain http is refused.
  """

  alias Mix.HrwNative.Precompiled

  @typedoc """
  `:timeout_ms`: the longest wait for a connection or for the next bytes (the
  whole download gets 20 times that); `:max_bytes`: the body's size limit;
  `:cacerts_path`: a PEM file of CA certificates instead of the OS's, or nil.
  """
  @type options :: %{
          required(:timeout_ms) => pos_integer(),
          required(:max_bytes) => pos_integer(),
          optional(:cacerts_path) => Path.t() | nil
        }

  @typedoc """
  `{:ok, body, url}`, `url` being the one the body came from (after redirects);
  `{:unavailable, reason}` when nothing came (no answer, a timeout, an HTTP error
  status, a network error); `{:refused, reason}` when what came must not be used
  (a body over the limit or shorter than declared, a certificate that fails
  verification, a downgrade to http, a URL that is not allowed).
  """
  @type result ::
          {:ok, binary(), String.t()} | {:unavailable, String.t()} | {:refused, String.t()}

  @doc "Downloads `url` into memory. See `t:options/0` and `t:result/0`."
  @spec download(String.t(), options()) :: result()
  def download(url, opts) do
    :ok = on_code_path([:crypto, :asn1, :public_key, :ssl])

    case Application.ensure_all_started(:ssl) do
      # One deadline for the whole download, redirects included.
      {:ok, _} ->
        get(url, opts, System.monotonic_time(:millisecond) + opts.timeout_ms * 20, 0, nil)

      {:error, reason} ->
        {:unavailable, "cannot start :ssl: #{inspect(reason)}"}
    end
  end

  defp get(url, _opts, _deadline, redirects, _from) when redirects > @max_redirects,
    do: {:unavailable, "more than #{@max_redirects} redirects, the last to #{shown(url)}"}

  defp get(url, opts, deadline, redirects, from) do
    uri = URI.parse(url)
    s = %{url: url, opts: opts, deadline: deadline, socket: nil}

    with :ok <- Precompiled.url_allowed(url),
         :ok <- no_downgrade(from, url),
         {:ok, tls} <- tls_options(uri, opts),
         {:ok, socket} <- connect(s, uri, tls) do
      s = %{s | socket: socket}

      try do
        with :ok <- send_request(s, uri),
             {:ok, status, headers, rest} <- read_head(s, "") do
          respond(s, status, headers, rest)
        end
      after
        close(socket)
      end
    end
    |> case do
      {:redirect, location} -> get(location, opts, deadline, redirects + 1, url)
      other -> other
    end
  end

  defp no_downgrade(nil, _url), do: :ok

  defp no_downgrade(from, url) do
    if URI.parse(from).scheme == "https" and URI.parse(url).scheme != "https",
      do: {:refused, "#{shown(from)} redirects to #{shown(url)}, from https to plain http"},
      else: :ok
  end

  # -- connection -----------------------------------------------------------------

  defp connect(s, %URI{host: host, port: port, scheme: scheme}, tls) do
    timeout = s.opts.timeout_ms

    with {:ok, address, family} <- resolve(s, host),
         {:ok, tcp} <-
           tcp_connect(s, address, port, [family, :binary, active: false, packet: :raw], timeout) do
      if scheme == "https", do: tls_connect(s, tcp, tls, timeout), else: {:ok, {:tcp, tcp}}
    end
  end

  defp resolve(s, host) do
    name = String.to_charlist(host)

    case :inet.parse_address(name) do
      {:ok, ip} when tuple_size(ip) == 4 ->
        {:ok, ip, :inet}

      {:ok, ip} ->
        {:ok, ip, :inet6}

      {:error, _} ->
        with {:error, _} <- getaddr(name, :inet),
             {:error, reason} <- getaddr(name, :inet6) do
          {:unavailable, "cannot resolve the host of #{shown(s.url)} (#{inspect(reason)})"}
        end
    end
  end

  defp getaddr(name, family) do
    with {:ok, ip} <- :inet.getaddr(name, family), do: {:ok, ip, family}
  end

  defp tcp_connect(s, address, port, options, timeout) do
    case :gen_tcp.connect(address, port, options, timeout) do
      {:ok, socket} ->
        {:ok, socket}

      {:error, :timeout} ->
        {:unavailable, "connecting to #{shown(s.url)}: no answer for #{timeout} ms (timed out)"}

      {:error, reason} ->
        {:unavailable, "connecting to #{shown(s.url)} failed: #{inspect(reason)}"}
    end
  end

  defp tls_connect(s, tcp, tls, timeout) do
    case :ssl.connect(tcp, tls, timeout) do
      {:ok, socket} ->
        {:ok, {:ssl, socket}}

      {:error, {:tls_alert, {alert, description}}} ->
        _ = :gen_tcp.close(tcp)

        {:refused,
         "the TLS handshake with #{shown(s.url)} failed (#{alert}: " <>
           "#{description |> to_string() |> String.replace(~r/\s+/, " ") |> String.trim()})"}

      {:error, reason} ->
        _ = :gen_tcp.close(tcp)
        {:unavailable, "the TLS handshake with #{shown(s.url)} failed: #{inspect(reason)}"}
    end
  end

  defp close({:tcp, socket}), do: :gen_tcp.close(socket)
  defp close({:ssl, socket}), do: :ssl.close(socket)

  defp send_data({:tcp, socket}, data), do: :gen_tcp.send(socket, data)
  defp send_data({:ssl, socket}, data), do: :ssl.send(socket, data)

  # The next bytes, waiting at most the idle timeout and never past the deadline.
  defp recv(s) do
    left = s.deadline - System.monotonic_time(:millisecond)
    wait = min(s.opts.timeout_ms, max(left, 0))

    result =
      case s.socket do
        {:tcp, socket} -> :gen_tcp.recv(socket, 0, wait)
        {:ssl, socket} -> :ssl.recv(socket, 0, wait)
      end

    case result do
      {:ok, data} ->
        {:ok, data}

      {:error, :timeout} when wait < s.opts.timeout_ms ->
        {:unavailable,
         "downloading #{shown(s.url)}: not done within #{s.opts.timeout_ms * 20} ms (timed out)"}

      {:error, :timeout} ->
        {:unavailable,
         "downloading #{shown(s.url)}: no answer for #{s.opts.timeout_ms} ms (timed out)"}

      {:error, :closed} ->
        :closed

      {:error, reason} ->
        {:unavailable, "downloading #{shown(s.url)} failed: #{inspect(reason)}"}
    end
  end

  # -- request and response -------------------------------------------------------

  defp send_request(s, %URI{} = uri) do
    target = (uri.path || "/") <> if(uri.query, do: "?" <> uri.query, else: "")
    host = if String.contains?(uri.host, ":"), do: "[#{uri.host}]", else: uri.host
    default_port = if uri.scheme == "https", do: 443, else: 80
    host = if uri.port == default_port, do: host, else: "#{host}:#{uri.port}"

    auth =
      case uri.userinfo do
        nil -> []
        info -> ["authorization: Basic ", Base.encode64(URI.decode(info)), "\r\n"]
      end

    request = [
      "GET ",
      target,
      " HTTP/1.1\r\nhost: ",
      host,
      "\r\nuser-agent: hrw-native-compiler\r\naccept-encoding: identity\r\n",
      auth,
      "connection: close\r\n\r\n"
    ]

    case send_data(s.socket, request) do
      :ok ->
        :ok

      {:error, reason} ->
        {:unavailable, "sending the request for #{shown(s.url)} failed: #{inspect(reason)}"}
    end
  end

  defp read_head(s, buffer) do
    case :binary.match(buffer, "\r\n\r\n") do
      {at, 4} when at + 4 <= @max_head_bytes ->
        {head, rest} = split_at(buffer, at + 4)
        parse_head(s, head, rest)

      _ when byte_size(buffer) >= @max_head_bytes ->
        {:refused,
         "#{shown(s.url)} sent over #{@max_head_bytes} bytes of status line and headers"}

      :nomatch ->
        case recv(s) do
          {:ok, data} -> read_head(s, buffer <> data)
          :closed -> {:unavailable, "#{shown(s.url)} closed the connection before answering"}
          error -> error
        end
    end
  end

  defp parse_head(s, head, rest) do
    with {:ok, {:http_response, _version, status, _reason}, lines} <-
           :erlang.decode_packet(:http_bin, head, []),
         {:ok, headers} <- parse_headers(lines, []) do
      {:ok, status, headers, rest}
    else
      _ -> {:unavailable, "#{shown(s.url)} did not answer with an HTTP response"}
    end
  end

  defp parse_headers(text, acc) do
    case :erlang.decode_packet(:httph_bin, text, []) do
      {:ok, :http_eoh, _} ->
        {:ok, Enum.reverse(acc)}

      {:ok, {:http_header, _, name, _, value}, rest} ->
        parse_headers(rest, [{name |> to_string() |> String.downcase(), value} | acc])

      _ ->
        :error
    end
  end

  defp respond(s, status, headers, _rest) when status in @redirects do
    case header(headers, "location") do
      [location] ->
        {:redirect, s.url |> URI.merge(location) |> to_string()}

      _ ->
        {:unavailable, "#{shown(s.url)} answered #{status} with no single location"}
    end
  end

  defp respond(s, 200, headers, rest) do
    chunked? = Enum.any?(header(headers, "transfer-encoding"), &(&1 =~ ~r/chunked/i))

    case {chunked?, header(headers, "content-length")} do
      {true, _} ->
        chunked(s, rest, 0, [])

      {false, []} ->
        until_closed(s, rest)

      {false, values} ->
        case values |> Enum.map(&Integer.parse/1) |> Enum.uniq() do
          [{length, ""}] when length > s.opts.max_bytes -> oversized(s, length)
          [{length, ""}] when length >= 0 -> exactly(s, rest, length)
          _ -> {:refused, "#{shown(s.url)} sent a bad content-length: #{Enum.join(values, ", ")}"}
        end
    end
  end

  defp respond(s, status, _headers, _rest),
    do: {:unavailable, "#{shown(s.url)} answered HTTP #{status}"}

  defp header(headers, name), do: for({^name, value} <- headers, do: value)

  # -- bodies, each bounded by max_bytes --------------------------------------------

  defp exactly(s, body, length) when byte_size(body) >= length,
    do: {:ok, binary_part(body, 0, length), s.url}

  defp exactly(s, body, length) do
    case recv(s) do
      {:ok, data} -> exactly(s, body <> data, length)
      :closed -> truncated(s, byte_size(body), length)
      error -> error
    end
  end

  defp until_closed(s, body) when byte_size(body) > s.opts.max_bytes,
    do: oversized(s, byte_size(body))

  defp until_closed(s, body) do
    case recv(s) do
      {:ok, data} -> until_closed(s, body <> data)
      :closed -> {:ok, body, s.url}
      error -> error
    end
  end

  # Chunked transfer coding (RFC 9112, 7.1): size line, data, CRLF; a 0 size ends.
  defp chunked(s, buffer, size, acc) do
    case :binary.split(buffer, "\r\n") do
      [line, rest] ->
        case Integer.parse(line |> String.split(";") |> hd() |> String.trim(), 16) do
          {0, ""} ->
            {:ok, IO.iodata_to_binary(acc), s.url}

          {n, ""} when n > 0 and size + n > s.opts.max_bytes ->
            oversized(s, size + n)

          {n, ""} when n > 0 ->
            with {:ok, data, rest} <- take(s, rest, n + 2),
                 {chunk, "\r\n"} <- split_at(data, n) do
              chunked(s, rest, size + n, [acc | chunk])
            else
              {:truncated, got} -> truncated(s, size + got, size + n)
              error when is_tuple(error) -> error
              _ -> {:refused, "#{shown(s.url)} sent a malformed chunked body"}
            end

          _ ->
            {:refused, "#{shown(s.url)} sent a malformed chunked body"}
        end

      [_] when byte_size(buffer) > 1024 ->
        {:refused, "#{shown(s.url)} sent a malformed chunked body"}

      [_] ->
        case recv(s) do
          {:ok, data} -> chunked(s, buffer <> data, size, acc)
          :closed -> {:refused, "#{shown(s.url)} was truncated: the chunked body did not end"}
          error -> error
        end
    end
  end

  defp take(_s, buffer, n) when byte_size(buffer) >= n do
    {data, rest} = split_at(buffer, n)
    {:ok, data, rest}
  end

  defp take(s, buffer, n) do
    case recv(s) do
      {:ok, data} -> take(s, buffer <> data, n)
      :closed -> {:truncated, max(byte_size(buffer) - 2, 0)}
      error -> error
    end
  end

  defp split_at(binary, n),
    do: {binary_part(binary, 0, n), binary_part(binary, n, byte_size(binary) - n)}

  defp oversized(s, size),
    do:
      {:refused,
       "#{shown(s.url)} is at least #{size} bytes, over the #{s.opts.max_bytes}-byte limit of an archive"}

  defp truncated(s, size, length),
    do: {:refused, "#{shown(s.url)} was truncated: #{size} of its #{length} bytes arrived"}

  defp shown(url), do: Precompiled.redact(url)

  # -- TLS --------------------------------------------------------------------------

  defp tls_options(%URI{scheme: "https", host: host}, opts) do
    with {:ok, cacerts} <- cacerts(opts) do
      # The alert is in the result's message: ssl need not log it too.
      {:ok,
       [cacerts: cacerts, verify: :verify_peer, depth: 4, log_level: :none] ++ peer_check(host)}
    end
  end

  defp tls_options(_uri, _opts), do: {:ok, []}

  # A host name goes out as SNI and is matched against DNS names. An IP literal
  # must not be sent as SNI (RFC 6066, 3); with SNI disabled ssl checks no name,
  # so verify_peer_ip/3 matches the certificate's IP addresses itself.
  defp peer_check(host) do
    case :inet.parse_address(String.to_charlist(host)) do
      {:ok, ip} ->
        [server_name_indication: :disable, verify_fun: {&__MODULE__.verify_peer_ip/3, ip}]

      {:error, _} ->
        [
          server_name_indication: String.to_charlist(host),
          customize_hostname_check: [
            match_fun: :public_key.pkix_verify_hostname_match_fun(:https)
          ]
        ]
    end
  end

  @doc false
  # ssl's verify_fun for an IP-literal host: the chain's own checks as ssl's
  # default function makes them, then the peer certificate's IP addresses.
  @spec verify_peer_ip(term(), term(), :inet.ip_address()) ::
          {:valid, term()} | {:fail, term()} | {:unknown, term()}
  def verify_peer_ip(_cert, {:bad_cert, reason}, _ip), do: {:fail, reason}
  def verify_peer_ip(_cert, {:extension, _}, ip), do: {:unknown, ip}
  def verify_peer_ip(_cert, :valid, ip), do: {:valid, ip}

  def verify_peer_ip(cert, :valid_peer, ip) do
    if :public_key.pkix_verify_hostname(cert, ip: ip),
      do: {:valid, ip},
      else: {:fail, :hostname_check_failed}
  end

  defp cacerts(%{cacerts_path: path}) when is_binary(path) do
    case read_pem(path) do
      {:ok, certs} -> {:ok, certs}
      {:error, reason} -> {:refused, "HRW_NATIVE_CACERTS_PATH: #{reason}"}
    end
  end

  defp cacerts(_opts) do
    {:ok, :public_key.cacerts_get()}
  rescue
    error ->
      {:unavailable,
       "no CA certificates to verify the server with (#{Exception.message(error)}); " <>
         "set HRW_NATIVE_CACERTS_PATH to a PEM file"}
  end

  @doc false
  # The DER certificates of a PEM file of at most 16 MiB; an error naming the file
  # when it cannot be read or holds none.
  @spec read_pem(Path.t()) :: {:ok, [binary()]} | {:error, String.t()}
  def read_pem(path) do
    :ok = on_code_path([:crypto, :asn1, :public_key])

    with {:ok, text} <- Mix.HrwNative.SafeFile.read(path, 16 * 1024 * 1024),
         [_ | _] = certs <-
           for({:Certificate, der, :not_encrypted} <- safe_pem_decode(text), do: der) do
      {:ok, certs}
    else
      {:error, :enoent} -> {:error, "#{path} does not exist"}
      {:error, reason} -> {:error, reason}
      [] -> {:error, "#{path} holds no PEM certificate"}
    end
  end

  defp safe_pem_decode(text) do
    :public_key.pem_decode(text)
  rescue
    _ -> []
  end

  @doc false
  # Mix 1.15+ keeps only the project's own applications on the code path while it
  # compiles, so OTP's :ssl, :public_key and :crypto must be put back before they
  # are used (`Mix.ensure_application!/1`, which Elixir 1.14 lacks and does not need).
  @spec on_code_path([atom()]) :: :ok
  def on_code_path(apps) do
    if function_exported?(Mix, :ensure_application!, 1) do
      Enum.each(apps, &apply(Mix, :ensure_application!, [&1]))
    end

    :ok
  end
end
