defmodule HRW.Test.NativeMirror do
  @moduledoc false
  # Loopback HTTP and HTTPS servers, test certificates and hand-made archives for
  # the tests of the compile task's download (test/mix/). A server answers each
  # request with its handler's reply and tells the test process which paths were
  # asked for, with their headers: {:mirror_request, path, headers}.

  # :ssl and :public_key are not applications of hrw's: they are put on the code
  # path at run time (Mix.HrwNative.OTPApps.on_code_path/1), and Elixir 1.15+
  # compiles this file without them.
  @compile {:no_warn_undefined, [:ssl, :public_key]}

  @typedoc """
  What a handler returns for a request: a response (status, headers, body), or
  `{:raw, fun}` where `fun.(send)` writes whatever it likes with `send.(iodata)`.
  """
  @type reply :: {pos_integer(), [{String.t(), String.t()}], iodata()} | {:raw, function()}

  @doc """
  Starts a server on an ephemeral loopback port, stopped when the test ends, and
  returns its base URL. Options: `:ip` (`{127, 0, 0, 1}`, or `{0, 0, 0, 0, 0, 0, 0, 1}`
  for `[::1]`), `:host` (the URL's host, `localhost` for instance), `:tls` (ssl
  server options: a certificate and key), `:routes` (path => reply) or
  `:handler` (`fn path -> reply end`).
  """
  def serve(opts) do
    ip = Keyword.get(opts, :ip, {127, 0, 0, 1})
    tls = Keyword.get(opts, :tls)
    routes = Keyword.get(opts, :routes, %{})
    handler = Keyword.get(opts, :handler, &Map.get(routes, &1, {404, [], "not here"}))
    family = if tuple_size(ip) == 8, do: :inet6, else: :inet
    tcp_opts = [family, :binary, ip: ip, active: false, reuseaddr: true]

    {listen, port} =
      if tls do
        ensure_started()
        {:ok, listen} = ssl().listen(0, tcp_opts ++ [log_level: :none] ++ tls)
        {:ok, {_, port}} = ssl().sockname(listen)
        {{:ssl, listen}, port}
      else
        {:ok, listen} = :gen_tcp.listen(0, tcp_opts)
        {:ok, port} = :inet.port(listen)
        {{:tcp, listen}, port}
      end

    parent = self()
    pid = spawn(fn -> accept_loop(listen, handler, parent) end)
    ExUnit.Callbacks.on_exit(fn -> Process.exit(pid, :kill) end)

    host =
      Keyword.get_lazy(opts, :host, fn ->
        if family == :inet6, do: "[::1]", else: "127.0.0.1"
      end)

    scheme = if tls, do: "https", else: "http"
    "#{scheme}://#{host}:#{port}"
  end

  defp accept_loop(listen, handler, parent) do
    case accept(listen) do
      {:ok, socket} ->
        pid = spawn(fn -> serve_one(socket, handler, parent) end)
        _ = transfer(socket, pid)
        send(pid, :go)
        accept_loop(listen, handler, parent)

      {:error, :closed} ->
        :ok

      {:error, _handshake_failed} ->
        accept_loop(listen, handler, parent)
    end
  end

  defp accept({:tcp, listen}) do
    with {:ok, socket} <- :gen_tcp.accept(listen), do: {:ok, {:tcp, socket}}
  end

  defp accept({:ssl, listen}) do
    with {:ok, socket} <- ssl().transport_accept(listen),
         {:ok, socket} <- ssl().handshake(socket, 60_000) do
      {:ok, {:ssl, socket}}
    end
  end

  defp transfer({:tcp, socket}, pid), do: :gen_tcp.controlling_process(socket, pid)
  defp transfer({:ssl, socket}, pid), do: ssl().controlling_process(socket, pid)

  defp serve_one(socket, handler, parent) do
    receive do
      :go -> :ok
    end

    case read_request(socket, "") do
      {:ok, path, headers} ->
        send(parent, {:mirror_request, path, headers})
        send_fun = fn data -> send_data(socket, data) end

        case handler.(path) do
          {:raw, fun} ->
            fun.(send_fun)

          {status, headers, body} ->
            send_fun.([
              "HTTP/1.1 #{status} Whatever\r\n",
              Enum.map(headers, fn {k, v} -> [k, ": ", v, "\r\n"] end),
              "content-length: #{IO.iodata_length(body)}\r\nconnection: close\r\n\r\n",
              body
            ])
        end

      :error ->
        :ok
    end

    close(socket)
  end

  defp read_request(socket, buffer) do
    case :binary.split(buffer, "\r\n\r\n") do
      [head, _] ->
        [request_line | lines] = String.split(head, "\r\n")
        [_, path, _] = String.split(request_line, " ")

        headers =
          for line <- lines, [k, v] = String.split(line, ":", parts: 2), into: %{} do
            {String.downcase(k), String.trim(v)}
          end

        {:ok, path, headers}

      [_] ->
        case recv(socket) do
          {:ok, data} -> read_request(socket, buffer <> data)
          _ -> :error
        end
    end
  end

  defp recv({:tcp, socket}), do: :gen_tcp.recv(socket, 0, 60_000)
  defp recv({:ssl, socket}), do: ssl().recv(socket, 0, 60_000)
  defp send_data({:tcp, socket}, data), do: :gen_tcp.send(socket, data)
  defp send_data({:ssl, socket}, data), do: ssl().send(socket, data)
  defp close({:tcp, socket}), do: :gen_tcp.close(socket)
  defp close({:ssl, socket}), do: ssl().close(socket)

  @doc """
  Starts a loopback HTTP proxy, stopped when the test ends, and returns its URL
  (`http://127.0.0.1:<port>`). It tells the test process of every request:
  `{:proxy_request, method, target, headers}`. A `CONNECT host:port` is answered
  200 and then relayed both ways (https through the proxy); an absolute-form
  request (`GET http://host:port/path`) is sent on to that origin in origin form,
  without the proxy's headers, and its answer relayed back. With `refuse:
  status`, every request is answered with that status instead.
  """
  def proxy(opts \\ []) do
    {:ok, listen} =
      :gen_tcp.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false, reuseaddr: true])

    {:ok, port} = :inet.port(listen)
    parent = self()
    pid = spawn(fn -> proxy_loop(listen, parent, opts[:refuse]) end)
    ExUnit.Callbacks.on_exit(fn -> Process.exit(pid, :kill) end)
    "http://127.0.0.1:#{port}"
  end

  defp proxy_loop(listen, parent, refuse) do
    with {:ok, client} <- :gen_tcp.accept(listen) do
      pid = spawn(fn -> proxy_one(client, parent, refuse) end)
      :ok = :gen_tcp.controlling_process(client, pid)
      send(pid, :go)
      proxy_loop(listen, parent, refuse)
    end
  end

  defp proxy_one(client, parent, refuse) do
    receive do
      :go -> :ok
    end

    with {:ok, head, rest} <- proxy_head(client, "") do
      [request_line | lines] = String.split(head, "\r\n")
      [method, target, _version] = String.split(request_line, " ")
      headers = for line <- lines, [k, v] <- [String.split(line, ":", parts: 2)], do: {k, v}
      names = Map.new(headers, fn {k, v} -> {String.downcase(k), String.trim(v)} end)
      send(parent, {:proxy_request, method, target, names})

      cond do
        refuse ->
          :gen_tcp.send(client, "HTTP/1.1 #{refuse} No\r\ncontent-length: 0\r\n\r\n")

        method == "CONNECT" ->
          [host, port] = String.split(target, ":")
          {:ok, upstream} = upstream(host, port)
          :ok = :gen_tcp.send(client, "HTTP/1.1 200 Connection established\r\n\r\n")
          :ok = :gen_tcp.send(upstream, rest)
          relay(client, upstream)

        true ->
          %URI{host: host, port: port, path: path, query: query} = URI.parse(target)
          {:ok, upstream} = upstream(host, Integer.to_string(port))
          path = if query, do: "#{path}?#{query}", else: path

          kept =
            for {k, v} <- headers,
                not String.starts_with?(String.downcase(k), "proxy-"),
                do: [k, ":", v, "\r\n"]

          :ok = :gen_tcp.send(upstream, ["#{method} #{path} HTTP/1.1\r\n", kept, "\r\n", rest])
          relay(client, upstream)
      end
    end

    :gen_tcp.close(client)
  end

  defp upstream(host, port),
    do:
      :gen_tcp.connect(String.to_charlist(host), String.to_integer(port), [:binary, active: false])

  defp proxy_head(socket, buffer) do
    case :binary.split(buffer, "\r\n\r\n") do
      [head, rest] ->
        {:ok, head, rest}

      [_] ->
        with {:ok, data} <- :gen_tcp.recv(socket, 0, 60_000),
             do: proxy_head(socket, buffer <> data)
    end
  end

  # Bytes both ways; when either side closes, so does the other.
  defp relay(client, upstream) do
    spawn(fn -> pump(upstream, client) end)
    pump(client, upstream)
  end

  defp pump(from, to) do
    with {:ok, data} <- :gen_tcp.recv(from, 0),
         :ok <- :gen_tcp.send(to, data) do
      pump(from, to)
    else
      _ -> :gen_tcp.close(to)
    end
  end

  @doc "A response that redirects to `location`."
  def redirect(location, status \\ 302), do: {status, [{"location", location}], ""}

  @doc """
  A reply that sends `head` (a status line and headers, ending in an empty line),
  then `prefix`, then nothing more until the client closes: whoever waits for the
  rest of the body waits forever.
  """
  def stalled(head, prefix \\ "") do
    {:raw,
     fn send ->
       _ = send.([head, prefix])
       Process.sleep(:infinity)
     end}
  end

  @doc "A reply that sends `head`, then `chunk` again and again until the client goes."
  def endless(head, chunk) do
    {:raw,
     fn send ->
       if send.(head) == :ok, do: repeat(send, chunk)
     end}
  end

  defp repeat(send, chunk) do
    if send.(chunk) == :ok, do: repeat(send, chunk)
  end

  # -- certificates ---------------------------------------------------------------

  @doc """
  A test CA and leaf certificates signed by it, made once per run: `:good` names
  `localhost`, 127.0.0.1 and ::1; `:wrong` names `other.example` and 127.0.0.2;
  `:untrusted` names what `:good` names but is signed by another CA. Each is ssl
  server options; `:ca_file` is the CA's PEM file (for HRW_NATIVE_CACERTS_PATH).
  """
  # SHA-256 signatures: TLS 1.3 servers on OTP 27+ refuse a chain signed with
  # :public_key's default digest (unable_to_supply_acceptable_cert).
  def certs(dir) do
    key = {__MODULE__, :certs}

    certs =
      case :persistent_term.get(key, nil) do
        nil ->
          ensure_started()

          ca =
            public_key().pkix_test_root_cert(~c"hrw test CA",
              key: {:namedCurve, :secp256r1},
              digest: :sha256
            )

          other =
            public_key().pkix_test_root_cert(~c"other CA",
              key: {:namedCurve, :secp256r1},
              digest: :sha256
            )

          good = [{:dNSName, ~c"localhost"}, {:iPAddress, <<127, 0, 0, 1>>}, {:iPAddress, ipv6()}]
          wrong = [{:dNSName, ~c"other.example"}, {:iPAddress, <<127, 0, 0, 2>>}]

          certs = %{
            ca: ca.cert,
            good: leaf(ca, good),
            wrong: leaf(ca, wrong),
            untrusted: leaf(other, good)
          }

          :persistent_term.put(key, certs)
          certs

        certs ->
          certs
      end

    ca_file = Path.join(dir, "ca.pem")
    File.mkdir_p!(dir)
    File.write!(ca_file, public_key().pem_encode([{:Certificate, certs.ca, :not_encrypted}]))
    certs |> Map.put(:ca_file, ca_file) |> Map.put(:cacerts, [certs.ca])
  end

  defp ipv6, do: <<0::120, 1>>

  defp leaf(root, names) do
    # public_key's #'Extension'{extnID, critical, extnValue}: subjectAltName.
    san = {:Extension, {2, 5, 29, 17}, false, names}

    conf =
      public_key().pkix_test_data(%{
        root: root,
        intermediates: [],
        peer: [key: {:namedCurve, :secp256r1}, digest: :sha256, extensions: [san]]
      })

    Keyword.take(conf, [:cert, :key])
  end

  defp ensure_started do
    Mix.HrwNative.OTPApps.on_code_path([:crypto, :asn1, :public_key, :ssl, :inets])
    {:ok, _} = Application.ensure_all_started(:ssl)
  end

  # -- archives ---------------------------------------------------------------------

  @doc """
  An archive for the host target holding `library` (bytes), written in `dir`,
  and a checksum file listing it: `%{name, archive, data, checksum_file, library}`.
  """
  def archive(dir, library \\ "a library, for tests only") do
    {:ok, target} = Mix.HrwNative.Target.host_target()
    name = Mix.HrwNative.Target.archive_name(version(), "2.16", target)
    File.mkdir_p!(dir)
    lib = Path.join(dir, Mix.HrwNative.Target.library_name(name))
    File.write!(lib, library)
    path = Path.join(dir, name)
    :ok = Mix.HrwNative.Archive.pack(lib, path)
    data = File.read!(path)
    checksum_file = Path.join(dir, "checksum.exs")

    File.write!(
      checksum_file,
      Mix.HrwNative.Checksums.text(%{name => Mix.HrwNative.Checksums.checksum(data)})
    )

    %{name: name, archive: path, data: data, checksum_file: checksum_file, library: library}
  end

  @doc """
  A gzipped tar whose one member, named `member`, claims and holds `size` zero
  bytes: a few hundred KiB that inflate to `size`, made without holding it.
  """
  def bomb(member, size) do
    header = tar_header(member, size)
    z = :zlib.open()
    :ok = :zlib.deflateInit(z, 9, :deflated, 31, 9, :default)
    zeros = :binary.copy(<<0>>, 1024 * 1024)
    first = :zlib.deflate(z, header)
    body = for _ <- 1..div(size, byte_size(zeros)), do: :zlib.deflate(z, zeros)
    last = :zlib.deflate(z, :binary.copy(<<0>>, 1024), :finish)
    :ok = :zlib.deflateEnd(z)
    :zlib.close(z)
    IO.iodata_to_binary([first, body, last])
  end

  defp tar_header(name, size) do
    field = fn value, width -> String.pad_trailing(value, width, <<0>>) end

    octal = fn n, width ->
      field.(String.pad_leading(Integer.to_string(n, 8), width - 1, "0"), width)
    end

    blank =
      field.(name, 100) <>
        octal.(0o644, 8) <>
        octal.(0, 8) <>
        octal.(0, 8) <>
        octal.(size, 12) <>
        octal.(0, 12) <>
        String.duplicate(" ", 8) <>
        "0" <> field.("", 100) <> field.("ustar", 6) <> "00" <> field.("", 247)

    sum = blank |> :binary.bin_to_list() |> Enum.sum()
    <<before::binary-size(148), _::binary-size(8), rest::binary>> = blank
    before <> field.(String.pad_leading(Integer.to_string(sum, 8), 6, "0") <> <<0>>, 8) <> rest
  end

  # -- one test's folder: a stand-in cargo, a destination, the task's options ----------

  @doc "A fresh folder for one test, removed when it ends."
  def tmp_dir! do
    dir = Path.join(System.tmp_dir!(), "hrw-mix-test-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    ExUnit.Callbacks.on_exit(fn -> File.rm_rf!(dir) end)
    dir
  end

  @doc """
  A fresh folder under `tmp` for one test: `:case_dir`, `:dest` (where the library
  is installed), `:cache_dir` and `:fake_cargo`, a stand-in that records its
  arguments in `cargo-args`, exits with the status in `cargo-status` (0 if none)
  and reports the library at the path in `cargo-artifact` (`built.so`, holding
  "built by cargo", if none), after sleeping the seconds in `cargo-sleep` (none if
  none).
  """
  def new_case(tmp) do
    dir = Path.join(tmp, "case-#{System.unique_integer([:positive])}")
    File.mkdir_p!(Path.join(dir, "native"))
    cargo = Path.join(dir, "cargo")
    File.write!(Path.join(dir, "built.so"), "built by cargo")

    File.write!(cargo, """
    #!/bin/sh
    d="#{dir}"
    printf '%s\\n' "$@" > "$d/cargo-args"
    [ -f "$d/cargo-sleep" ] && sleep "$(cat "$d/cargo-sleep")"
    artifact="$d/built.so"
    [ -f "$d/cargo-artifact" ] && artifact="$(cat "$d/cargo-artifact")"
    echo '{"reason":"compiler-artifact","target":{"kind":["cdylib"],"name":"hrw_nif"},"filenames":["'"$artifact"'"]}'
    [ -f "$d/cargo-status" ] && exit "$(cat "$d/cargo-status")"
    exit 0
    """)

    File.chmod!(cargo, 0o755)

    %{
      case_dir: dir,
      fake_cargo: cargo,
      cache_dir: Path.join(dir, "cache"),
      dest: Path.join(dir, "priv/native/libhrw_nif.so")
    }
  end

  @doc """
  `new_case/1` for the TLS tests, with Mix's shell captured: a fresh folder, the
  host's archive (`:fixture`, its `:checksum_file`), `:certs` and the `:routes`
  that serve the archive at `/m/<name>`.
  """
  def tls_case do
    Mix.shell(Mix.Shell.Process)
    ExUnit.Callbacks.on_exit(fn -> Mix.shell(Mix.Shell.IO) end)
    tmp = tmp_dir!()
    fixture = archive(Path.join(tmp, "archive"))

    tmp
    |> new_case()
    |> Map.merge(%{
      fixture: fixture,
      certs: certs(Path.join(tmp, "certs")),
      routes: %{("/m/" <> fixture.name) => {200, [], fixture.data}},
      checksum_file: fixture.checksum_file
    })
  end

  @doc "The compile task's options (`options/1`'s map) for a test folder, with `overrides`."
  def opts(c, overrides) do
    {:ok, target} = Mix.HrwNative.Target.host_target()

    Map.merge(
      %{
        version: version(),
        checksum_file: c[:checksum_file],
        base_url: c[:base_url],
        cache_dir: c.cache_dir,
        target: {:ok, target},
        cross_target: nil,
        nif_version: {:ok, "2.16"},
        vm_nif_version: "2.16",
        architecture: "test",
        timeout_ms: 30_000,
        cacerts: nil,
        proxies: Mix.HrwNative.Proxy.settings(%{}),
        force_build: false,
        cargo: nil
      },
      Map.new(overrides)
    )
  end

  @doc "Runs the compile task's decision for the test folder `c`."
  def obtain(c, overrides) do
    Mix.Tasks.Compile.HrwNative.obtain(
      Path.join(c.case_dir, "native"),
      c.dest,
      :prod,
      opts(c, overrides)
    )
  end

  @doc "Whether the stand-in cargo ran, and with which arguments."
  def cargo_args(c) do
    case File.read(Path.join(c.case_dir, "cargo-args")) do
      {:ok, text} -> String.split(text, "\n", trim: true)
      {:error, :enoent} -> nil
    end
  end

  @doc "The message of the Mix.Error that `fun` raises (flunks if it returns)."
  def mix_error(fun) do
    result = fun.()
    ExUnit.Assertions.flunk("expected a Mix.Error, got #{inspect(result)}")
  rescue
    e in Mix.Error -> Exception.message(e)
  end

  @doc """
  The `Mix.Shell.Process` messages received so far, `{:mix_shell, kind, [line]}`,
  in order (taken from the mailbox).
  """
  def said(acc \\ []) do
    receive do
      {:mix_shell, _, _} = message -> said([message | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  @doc "The paths requested from the mirrors so far, in order (from the mailbox)."
  def requests(acc \\ []) do
    receive do
      {:mirror_request, path, headers} -> requests([{path, headers} | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  @doc """
  The OS pids of this VM's download processes (`Mix.HrwNative.Download`) alive
  now: the `erl -hrw_native_download` children of its port helper. Linux only
  (read from /proc).
  """
  def download_processes do
    me = System.pid()

    procs =
      for dir <- Path.wildcard("/proc/[0-9]*"),
          {:ok, stat} <- [File.read(dir <> "/stat")],
          {:ok, cmdline} <- [File.read(dir <> "/cmdline")] do
        [_, after_comm] = String.split(stat, ") ", parts: 2)
        [state, ppid | _] = String.split(after_comm, " ")
        {Path.basename(dir), ppid, state, cmdline}
      end

    helpers = for {pid, ^me, _, _} <- procs, do: pid

    for {pid, ppid, state, cmdline} <- procs,
        ppid in helpers,
        state != "Z",
        cmdline =~ "-hrw_native_download",
        do: pid
  end

  @doc "Waits until this VM has no download process, at most `ms`; what is left then."
  def no_download_processes(ms \\ 10_000) do
    deadline = System.monotonic_time(:millisecond) + ms

    Stream.repeatedly(fn ->
      left = download_processes()
      if left != [] and System.monotonic_time(:millisecond) < deadline, do: Process.sleep(20)
      left
    end)
    |> Enum.find(&(&1 == [] or System.monotonic_time(:millisecond) >= deadline))
  end

  defp version, do: Mix.Project.config()[:version]

  # Called through a function, for Elixir 1.14's check of application dependencies.
  defp ssl, do: :ssl
  defp public_key, do: :public_key
end
