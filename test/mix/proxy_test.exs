defmodule Mix.HrwNative.ProxyTest do
  # The download through a loopback proxy, as behind a corporate one: https
  # tunnelled with CONNECT, plain http sent to the proxy in absolute form,
  # NO_PROXY going around it, the proxy's credentials sent to the proxy alone and
  # never printed, and a proxy that refuses or a setting that is no proxy.
  use ExUnit.Case, async: false
  @moduletag :integration

  import HRW.Test.NativeMirror

  alias Mix.HrwNative.Proxy

  setup do
    Map.put(tls_case(), :secret, "pw#{System.unique_integer([:positive])}")
  end

  defp through(c, base, env, overrides \\ []),
    do:
      obtain(
        c,
        [base_url: base <> "/m", cacerts: c.certs.cacerts, proxies: Proxy.settings(env)] ++
          overrides
      )

  defp proxy_requests(acc \\ []) do
    receive do
      {:proxy_request, method, target, headers} ->
        proxy_requests([{method, target, headers} | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  defp port(url), do: URI.parse(url).port

  test "https goes through HTTPS_PROXY in a CONNECT tunnel, with the proxy's credentials",
       c do
    mirror = serve(tls: c.certs.good, routes: c.routes)
    proxy = proxy()
    with_user = String.replace(proxy, "http://", "http://corp:#{c.secret}@")

    assert through(c, mirror, %{"HTTPS_PROXY" => with_user}) == :ok
    assert File.read!(c.dest) == c.fixture.library

    assert [{"CONNECT", target, headers}] = proxy_requests()
    assert target == "127.0.0.1:#{port(mirror)}"
    assert headers["proxy-authorization"] == "Basic " <> Base.encode64("corp:" <> c.secret)

    # The origin saw the request inside the tunnel, without the proxy's header.
    assert [{_path, origin_headers}] = requests()
    refute Map.has_key?(origin_headers, "proxy-authorization")

    assert_received {:mix_shell, :info, ["Installed the precompiled hrw NIF " <> said]}
    assert said =~ "from #{mirror}/m/"
    refute said =~ c.secret
  end

  test "plain http goes through HTTP_PROXY (lowercase first) in absolute form", c do
    mirror = serve(routes: c.routes)
    proxy = proxy()
    env = %{"http_proxy" => proxy, "HTTP_PROXY" => "http://127.0.0.1:1"}

    assert through(c, mirror, env) == :ok
    assert File.read!(c.dest) == c.fixture.library
    assert [{"GET", target, _}] = proxy_requests()
    assert target == "#{mirror}/m/#{c.fixture.name}"
    assert [{"/m/" <> _, _}] = requests()
  end

  test "NO_PROXY goes around the proxy: a host, a suffix, an address or *", c do
    mirror = serve(tls: c.certs.good, routes: c.routes, host: "localhost")
    proxy = proxy()

    for no_proxy <- ["localhost", ".localhost", "other.example, localhost", "*"] do
      File.rm_rf!(c.cache_dir)
      File.rm_rf!(c.dest)
      env = %{"HTTPS_PROXY" => proxy, "NO_PROXY" => no_proxy}
      assert through(c, mirror, env) == :ok, no_proxy
      assert proxy_requests() == [], no_proxy
    end

    plain = serve(routes: c.routes)
    File.rm_rf!(c.cache_dir)
    File.rm_rf!(c.dest)
    assert through(c, plain, %{"HTTP_PROXY" => proxy, "no_proxy" => "127.0.0.1"}) == :ok
    assert proxy_requests() == []
  end

  test "a proxy that refuses, or is down, falls back like a mirror that is down; never shows its password",
       c do
    mirror = serve(tls: c.certs.good, routes: c.routes)

    for {proxy, said} <- [
          {proxy(refuse: 407), "answered HTTP 407 to the CONNECT for #{mirror}/m/"},
          {"http://127.0.0.1:1", "connecting to #{mirror}/m/"}
        ] do
      with_user = String.replace(proxy, "http://", "http://corp:#{c.secret}@")
      env = %{"HTTPS_PROXY" => with_user}
      message = mix_error(fn -> through(c, mirror, env) end)
      assert message =~ said, message
      refute message =~ c.secret, message
      assert through(c, mirror, env, cargo: c.fake_cargo) == :ok
      assert File.read!(c.dest) == "built by cargo"
      File.rm!(c.dest)
    end

    # A plain-http proxy's 407 is its own answer, not the mirror's.
    plain = serve(routes: c.routes)
    proxy = proxy(refuse: 407)
    message = mix_error(fn -> through(c, plain, %{"HTTP_PROXY" => proxy}) end)

    assert message =~
             "the proxy #{proxy} answered HTTP 407 (it asks for credentials) to the request for #{plain}/m/",
           message
  end

  test "a proxy setting that is no http:// proxy is named, and nothing is downloaded", c do
    mirror = serve(tls: c.certs.good, routes: c.routes)

    for value <- [
          "socks5://corp:#{c.secret}@127.0.0.1:1080",
          "http://127.0.0.1:99999",
          "http://corp:#{c.secret}/x@127.0.0.1:3128",
          "http://corp:#{c.secret}@x@127.0.0.1:3128",
          ~s("http://corp:#{c.secret}@127.0.0.1:3128"),
          " http://corp:#{c.secret}@127.0.0.1:3128"
        ],
        name <- ["HTTPS_PROXY", "https_proxy"] do
      message = mix_error(fn -> through(c, mirror, %{name => value}) end)
      assert message =~ "#{name} holds no usable proxy: its value ", message
      refute message =~ ~r/#{c.secret}|corp|127\.0\.0\.1:(1080|3128)/, message
    end

    assert requests() == []
  end

  test "NO_PROXY matches an IP address in any notation, and only as an address" do
    settings = Proxy.settings(%{"HTTP_PROXY" => "http://p:1", "NO_PROXY" => "0:0:0:0:0:0:0:1"})
    {:ok, v6} = Mix.HrwNative.Wire.parse("http://[::1]:9/x")
    assert Proxy.for_url(v6, settings) == :direct

    settings = Proxy.settings(%{"HTTP_PROXY" => "http://p:1", "NO_PROXY" => "0.1"})
    {:ok, v4} = Mix.HrwNative.Wire.parse("http://127.0.0.1:9/x")
    assert {:ok, _} = Proxy.for_url(v4, settings)
  end

  test "the compile task reads the proxy variables from the environment" do
    options =
      Mix.Tasks.Compile.HrwNative.options(%{
        "HTTPS_PROXY" => "http://p.corp:3128",
        "no_proxy" => "corp,localhost"
      })

    assert options.proxies == %{
             http: nil,
             https: {"HTTPS_PROXY", "http://p.corp:3128"},
             no_proxy: ["corp", "localhost"]
           }
  end
end
