defmodule Mix.HrwNative.WireTest do
  # What the download takes from outside: URLs (base, Location, proxy), header
  # values, and how each is shown. Pure functions, so every member of each class
  # is listed here; download_test.exs drives the same classes over the wire.
  use ExUnit.Case, async: true

  alias Mix.HrwNative.{Proxy, Wire}

  # Modules of mix/ are loaded by mix.exs from source, with no BEAM file for
  # doctest/1 to read: the examples of their docs are checked here.
  test "the documented examples" do
    {:ok, url} = Wire.parse("https://Mirror.example/hrw?sig=1")
    assert {url.host, url.port, url.path} == {"mirror.example", 443, "/hrw"}

    assert Wire.parse("http://user:secret@example.com/hrw") ==
             {:error,
              "is not an https URL (plain http is allowed only to 127.0.0.1, localhost or [::1])"}

    assert Wire.content_length(["12", "12"]) == {:ok, 12}
    assert Wire.content_length(["12", "13"]) == {:error, "a bad content-length: 12, 13"}

    {:ok, signed} =
      Wire.parse("https://user:secret@mirror.example:8443/hrw/a.tar.gz?X-Amz-Signature=abc")

    assert Wire.show(signed) == "https://mirror.example:8443/hrw/a.tar.gz"

    assert Wire.show(%{scheme: "http", host: "127.0.0.1", port: 80, path: "/a\e[2J"}) ==
             "http://127.0.0.1/a\\x1B[2J"

    assert Wire.escape("a\r\nb") == "a\\x0D\\x0Ab"

    assert Proxy.settings(%{
             "HTTPS_PROXY" => "http://p:3128",
             "no_proxy" => "a.example, .b.example"
           }) == %{
             http: nil,
             https: {"HTTPS_PROXY", "http://p:3128"},
             no_proxy: ["a.example", "b.example"]
           }

    settings =
      Proxy.settings(%{"https_proxy" => "http://u:pw@proxy.corp:3128", "NO_PROXY" => "corp"})

    {:ok, url} = Wire.parse("https://mirror.example/a")
    {:ok, proxy} = Proxy.for_url(url, settings)
    assert {proxy.host, proxy.port, proxy.shown} == {"proxy.corp", 3128, "http://proxy.corp:3128"}
    {:ok, inside} = Wire.parse("https://files.corp/a")
    assert Proxy.for_url(inside, settings) == :direct
  end

  test "https anywhere, plain http only to loopback, every port and host checked" do
    for good <- [
          "https://github.com/o/r/releases/download/v1",
          "https://MIRROR.example:8443/x?sig=1#frag",
          "https://10.1.2.3/x",
          "https://[2001:db8::1]:9/x",
          "http://127.0.0.1:8080/x",
          "http://localhost/x",
          "http://[::1]:9/x",
          "https://user:p%40ss@mirror.example/x"
        ] do
      assert {:ok, _} = Wire.parse(good), good
    end

    for {bad, said} <- [
          {"http://example.com/x", "is not an https URL"},
          {"http://127.0.0.2/x", "is not an https URL"},
          {"http://127.0.0.1.example.com/x", "is not an https URL"},
          {"ftp://127.0.0.1/x", "is not an https URL"},
          {"file:///tmp/x", "is not an https URL"},
          {"https:///x", "has no valid host"},
          {"127.0.0.1/x", "is not a URL"},
          {"https://h.example:99999/x", "has a port that is not a number from 1 to 65535"},
          {"https://h.example:0/x", "has a port that is not a number from 1 to 65535"},
          {"https://h.example:-1/x", "has a port that is not a number from 1 to 65535"},
          {"https://h.example:abc/x", "has a port that is not a number from 1 to 65535"},
          {"https://h.example:000443/x", "has a port that is not a number from 1 to 65535"},
          # a password holding / # ? @, a quoted URL, a leading space: never echoed
          {"https://u:se/cret@h.example/x", "has a port that is not a number from 1 to 65535"},
          {"https://u:se#cret@h.example/x", "has a port that is not a number from 1 to 65535"},
          {"https://u:se@cret@h.example/x", "has a port that is not a number from 1 to 65535"},
          {"https://u:se?cret@h.example/x", "has a port that is not a number from 1 to 65535"},
          {~s("https://u:secret@h.example/x"), "is not a URL"},
          {" https://u:secret@h.example/x", "holds a space"},
          {"https://h_x.example/x", "has no valid host"},
          {"https://-h.example/x", "has no valid host"},
          {"https://#{String.duplicate("a", 64)}.example/x", "has no valid host"},
          {"https://127.1/x", "has no valid host"},
          {"https://[::g]/x", "has no valid host"},
          {"https://[::1/x", "is not a URL"},
          {"https://a@b@host/x", "is not a URL"},
          {"https://h\xff.example/x", "a control character or a non-ASCII byte"},
          {"https://h.example/a b", "holds a space"},
          {"https://h.example/a\r\nx: y", "a control character"},
          {"https://h.example/" <> String.duplicate("a", 9000), "over the 8192-byte limit"}
        ] do
      assert {:error, message} = Wire.parse(bad), bad
      assert message =~ said, "#{inspect(bad)}: #{message}"
      refute message =~ ~r/[\x00-\x1f\x7f]|h\.example|cret/
    end

    assert {:error, _} = Wire.parse(:not_a_string)
  end

  test "a parsed URL is shown as scheme, host, port and path: never its userinfo or query" do
    {:ok, parsed} = Wire.parse("https://u:p@H.example:8443/a?q=1")
    assert Wire.show(parsed) == "https://h.example:8443/a"
    assert Wire.request_url(parsed) == "https://h.example:8443/a?q=1"
    {:ok, default} = Wire.parse("https://h.example:443/a?q=1")
    assert Wire.request_url(default) == "https://h.example/a?q=1"
    assert Wire.credentials(parsed) == {"u", "p"}
    assert String.length(Wire.escape(String.duplicate("x", 1000))) == 201
  end

  test "a Location is resolved against the URL it came from, and keeps its scheme" do
    {:ok, from} = Wire.parse("http://u:p@127.0.0.1:8080/m/a.tar.gz")

    for {location, to} <- [
          {"/b/c", "http://127.0.0.1:8080/b/c"},
          {"c", "http://127.0.0.1:8080/m/c"},
          {"//localhost:9/d", "http://localhost:9/d"},
          {"http://[::1]:7/e?sig=1", "http://[::1]:7/e"}
        ] do
      assert {:ok, url} = Wire.location(from, [location]), location
      assert Wire.show(url) == to
    end

    # A relative Location keeps the credentials (same host); an absolute one not.
    assert {:ok, %{userinfo: "u:p"}} = Wire.location(from, ["/b"])
    assert {:ok, %{userinfo: nil}} = Wire.location(from, ["http://localhost/b"])
    assert {:ok, _} = Wire.location(from, ["/b", "/b"])

    for {locations, said} <- [
          {[], "redirects with no Location"},
          {["/a", "/b"], "redirects with 2 different Locations"},
          {["https://127.0.0.1/x"], "from http to https"},
          {["/x\r\n X-Injected: yes"], "a control character"},
          {["http://127.0.0.1:99999/x"], "it has a port that is not a number from 1 to 65535"}
        ] do
      assert {:error, message} = Wire.location(from, locations), inspect(locations)
      assert message =~ said, message
      refute message =~ "u:p"
    end

    {:ok, tls} = Wire.parse("https://mirror.example/a")

    assert Wire.location(tls, ["http://127.0.0.1/a"]) ==
             {:error,
              "https://mirror.example/a redirects to http://127.0.0.1/a, from https to plain http"}
  end

  test "a Content-Length is one number, repeated or not" do
    assert Wire.content_length([]) == :none
    assert Wire.content_length(["0"]) == {:ok, 0}
    assert Wire.content_length(["7", "7"]) == {:ok, 7}

    for bad <- [["7", "8"], ["-1"], ["1e3"], [" 7"], ["7\e"], [String.duplicate("9", 20)]] do
      assert {:error, message} = Wire.content_length(bad), inspect(bad)
      refute message =~ ~r/[\x00-\x1f\x7f]/
    end
  end

  test "the proxy is chosen per scheme, and NO_PROXY names hosts, suffixes, IPs or *" do
    {:ok, tls} = Wire.parse("https://mirror.example.com/a")
    {:ok, plain} = Wire.parse("http://127.0.0.1:9/a")
    {:ok, v6} = Wire.parse("http://[::1]:9/a")

    env = %{"HTTPS_PROXY" => "http://upper:3128", "https_proxy" => "lower:8080"}
    assert {:ok, %{host: "lower", port: 8080}} = Proxy.for_url(tls, Proxy.settings(env))
    # https_proxy is not used for http, nor http_proxy for https.
    assert Proxy.for_url(plain, Proxy.settings(env)) == :direct

    assert Proxy.for_url(tls, Proxy.settings(%{"HTTP_PROXY" => "http://p:1"})) == :direct

    assert {:ok, %{port: 80}} =
             Proxy.for_url(plain, Proxy.settings(%{"http_proxy" => "http://p"}))

    for {no_proxy, bypassed?} <- [
          {"*", true},
          {"example.com", true},
          {".example.com", true},
          {"mirror.example.com", true},
          {"MIRROR.Example.com.", false},
          {"other.com, example.com", true},
          {"ample.com", false},
          {"com.mirror", false},
          {"", false}
        ] do
      settings = Proxy.settings(%{"HTTPS_PROXY" => "http://p:1", "NO_PROXY" => no_proxy})
      assert Proxy.for_url(tls, settings) == :direct == bypassed?, no_proxy
    end

    http = %{"HTTP_PROXY" => "http://p:1"}

    assert Proxy.for_url(plain, Proxy.settings(Map.put(http, "no_proxy", "127.0.0.1"))) ==
             :direct

    assert Proxy.for_url(v6, Proxy.settings(Map.put(http, "no_proxy", "[::1]"))) == :direct
    assert Proxy.for_url(v6, Proxy.settings(Map.put(http, "no_proxy", "::1"))) == :direct
    assert {:ok, _} = Proxy.for_url(plain, Proxy.settings(Map.put(http, "no_proxy", "127.0.0.2")))
    # An address is matched whole, never as a suffix.
    assert {:ok, _} = Proxy.for_url(plain, Proxy.settings(Map.put(http, "no_proxy", "0.0.1")))
  end

  test "a proxy's credentials are taken from its URL and never shown" do
    {:ok, tls} = Wire.parse("https://mirror.example/a")
    env = %{"HTTPS_PROXY" => "http://al%20ice:pa%3Ass@proxy.corp:3128/"}
    assert {:ok, proxy} = Proxy.for_url(tls, Proxy.settings(env))
    assert proxy.credentials == {"al ice", "pa:ss"}
    assert proxy.shown == "http://proxy.corp:3128"

    for bad <- ["socks5://u:secret@p:1080", "https://u:secret@p:443", "http://u:secret@p:99999"] do
      assert {:error, message} = Proxy.for_url(tls, Proxy.settings(%{"HTTPS_PROXY" => bad}))
      assert message =~ "HTTPS_PROXY holds no usable proxy", message
      refute message =~ "secret", message
    end
  end
end
