defmodule Mix.HrwNative.HttpClientTest do
  # OTP's :httpc as the download uses it, held to three rules against hostile
  # loopback mirrors, directly and through a proxy: it lives exactly as long as
  # one download, in its own OS process (none is left when the download
  # returns, whatever the outcome, and nothing is requested after the task has
  # given up, also while a slow build runs); nothing it reports reaches the
  # output (no secret, no stack trace); every way it fails is a sentence, never
  # a term.
  use ExUnit.Case, async: false
  @moduletag :integration

  import ExUnit.CaptureIO
  import ExUnit.CaptureLog
  import HRW.Test.NativeMirror

  alias Mix.HrwNative.Proxy

  @chunk String.duplicate("x", 65_536)

  setup do
    c = tls_case()
    Map.merge(c, %{secret: "PW#{System.unique_integer([:positive])}", name: c.fixture.name})
  end

  # Nothing of a download is left: no OS process of it, and no :httpc process in
  # this VM (the client never runs here).
  defp client_processes do
    httpc =
      for pid <- Process.list(),
          {:dictionary, dict} <- [Process.info(pid, :dictionary)],
          dict[:"$initial_call"] in [{:httpc_manager, :init, 1}, {:httpc_handler, :init, 1}],
          # (inets's own default profile, started by a test's httpd, is registered)
          Process.info(pid, :registered_name) == {:registered_name, []},
          do: pid

    httpc ++ no_download_processes()
  end

  # A mirror whose first answer is `first`, and every later one a 404 of 4 GiB
  # that never ends.
  defp once(first) do
    asked = :counters.new(1, [])

    serve(
      handler: fn _ ->
        :counters.add(asked, 1, 1)

        if :counters.get(asked, 1) == 1,
          do: first,
          else: endless("HTTP/1.1 404 No\r\ncontent-length: #{4 * 1024 ** 3}\r\n\r\n", "x")
      end
    )
  end

  defp routes(mirror, proxy, env_name) do
    case proxy do
      nil -> {mirror, Proxy.settings(%{})}
      proxy -> {mirror, Proxy.settings(%{env_name => proxy})}
    end
  end

  # Everything the task says: Mix's shell, the log and stderr.
  defp output(fun) do
    {result, log} =
      with_log(fn ->
        {result, err} = with_io(:stderr, fn -> capture_mix(fun) end)
        {result, err}
      end)

    {said, err} = result
    {said, err <> log}
  end

  defp capture_mix(fun) do
    result =
      try do
        fun.()
      rescue
        e in Mix.Error -> Exception.message(e)
      end

    shell = for {:mix_shell, _, [line]} <- said(), do: line
    Enum.join([inspect(result) | shell], "\n")
  end

  test "a 503 asking to retry is not re-sent, not even while a slow build runs; no client process is left",
       c do
    File.write!(Path.join(c.case_dir, "cargo-sleep"), "2")

    for retry_after <- ["0", "1", "-1", "5"], via <- [nil, proxy()] do
      File.rm_rf!(c.dest)
      busy = {503, [{"retry-after", retry_after}], "busy"}
      {mirror, proxies} = routes(once(busy), via, "HTTP_PROXY")

      assert obtain(c, base_url: mirror <> "/m", proxies: proxies, cargo: c.fake_cargo) == :ok
      assert File.read!(c.dest) == "built by cargo"
      assert_received {:mix_shell, :info, ["No precompiled hrw NIF for " <> why]}
      # OTP 25 drops the request to re-send it later; a newer client may stop on
      # the Retry-After value instead: either way one sentence of ours.
      assert why =~ "gave no answer to use (a 503 asking to retry later" or
               why =~ "answered HTTP 503 with a bad Retry-After",
             why

      # Nothing of the client is left to re-send: the build took 2 s, longer than
      # a Retry-After of 0 or 1, and the mirror was asked once.
      assert client_processes() == []
      assert [{"/m/" <> _, _}] = requests(), "Retry-After: #{retry_after}"
    end
  end

  test "no client process outlives a download, whatever its outcome", c do
    installed = serve(routes: c.routes)
    stalled = serve(handler: fn _ -> stalled("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n") end)

    huge =
      serve(
        handler: fn _ ->
          endless("HTTP/1.1 404 No\r\ncontent-length: 9999999999\r\n\r\n", @chunk)
        end
      )

    assert obtain(c, base_url: installed <> "/m") == :ok
    assert client_processes() == []
    assert mix_error(fn -> obtain(c, base_url: huge, cache_dir: c.dest <> ".c") end) =~ "MiB"
    assert client_processes() == []

    assert mix_error(fn ->
             obtain(c, base_url: stalled, cache_dir: c.dest <> ".d", timeout_ms: 200)
           end) =~
             "timed out"

    assert client_processes() == []
  end

  test "credentials, a signed URL and a crashing answer: the whole output holds no secret and no stack trace",
       c do
    for {scheme, env_name} <- [{:http, "HTTP_PROXY"}, {:https, "HTTPS_PROXY"}] do
      File.rm_rf!(c.dest)
      File.rm_rf!(c.cache_dir)
      signed = "/s/#{c.name}?X-Amz-Signature=SIG#{c.secret}"
      tls = if scheme == :https, do: [tls: c.certs.good], else: []

      handler = fn
        "/m/" <> _ -> redirect(signed)
        _ -> {503, [{"retry-after", "-1"}], "busy"}
      end

      mirror = serve([handler: handler] ++ tls)
      base = String.replace(mirror, "://", "://bob:MIRROR#{c.secret}@") <> "/m"
      proxy = String.replace(proxy(), "://", "://bob:PROXY#{c.secret}@")

      opts = [
        base_url: base,
        cacerts: c.certs.cacerts,
        proxies: Proxy.settings(%{env_name => proxy})
      ]

      for cargo <- [nil, c.fake_cargo] do
        {said, err} = output(fn -> obtain(c, [cargo: cargo] ++ opts) end)
        all = said <> err

        refute all =~ c.secret, all
        refute all =~ ~r/Signature|bob|\*\*|terminating|stacktrace|\.erl|#PID|Basic/, all
        assert said =~ "#{mirror}/s/#{c.name}", said
      end

      method = if scheme == :https, do: "CONNECT", else: "GET"
      assert_received {:proxy_request, ^method, _, %{"proxy-authorization" => _}}
    end
  end

  test "what :httpc cannot read is said in words, never as a term", c do
    for {head, said} <- [
          {"HTTP/1.1 503 No\r\nretry-after: ab\r\ncontent-length: 4\r\n\r\nbusy",
           ~r/answered HTTP 503 with a bad Retry-After|answered HTTP 503/},
          {"HTTP/1.1 404 No\r\ncontent-length: abc\r\n\r\nbusy", "sent a bad content-length"},
          {"HTTP/1.1 302 Found\r\nlocation: /x\r\ncontent-length: -5\r\n\r\nbusy",
           "sent a bad content-length"},
          {"HTTP/1.1 200 OK\r\ncontent-type: multipart/byteranges; boundary=B\r\n" <>
             "content-length: 4\r\n\r\nbusy", "sent a multipart/byteranges body"},
          {"HTTP/1.1 404 No\r\ncontent-type: multipart/byteranges; boundary=B\r\n" <>
             "content-length: 4\r\n\r\nbusy", "sent a multipart/byteranges body"}
        ],
        via <- [nil, proxy()] do
      reply = {:raw, fn send -> send.(head) end}
      {mirror, proxies} = routes(serve(handler: fn _ -> reply end), via, "HTTP_PROXY")
      {message, err} = output(fn -> obtain(c, base_url: mirror, proxies: proxies) end)

      assert message =~ said, message
      refute message =~ ~r/[{}\[\]]|shutdown|httpc_|badarg|#PID|#Reference/, message
      assert err == ""
    end
  end

  test "a refused IPv6 connection is named as refused", c do
    {:ok, listen} = :gen_tcp.listen(0, [:inet6, ip: {0, 0, 0, 0, 0, 0, 0, 1}])
    {:ok, port} = :inet.port(listen)
    :ok = :gen_tcp.close(listen)

    message = mix_error(fn -> obtain(c, base_url: "http://[::1]:#{port}/m") end)
    assert message =~ "connection refused (econnrefused)", message
  end
end
