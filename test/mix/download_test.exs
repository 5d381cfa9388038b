defmodule Mix.HrwNative.DownloadTest do
  # The compile task's download against hostile loopback mirrors: bodies that never
  # end, statuses with huge bodies, truncations, stalls, credentials in the URL,
  # IPv6 loopback. The archive is hand-made (no cargo build); a stand-in cargo
  # shows whether the task fell back to a build.
  use ExUnit.Case, async: false

  import HRW.Test.NativeMirror

  @gib 1024 * 1024 * 1024

  setup do
    Mix.shell(Mix.Shell.Process)
    on_exit(fn -> Mix.shell(Mix.Shell.IO) end)
    tmp = tmp_dir!()
    fixture = archive(Path.join(tmp, "archive"))
    c = new_case(tmp)
    good = serve(routes: %{("/m/" <> fixture.name) => {200, [], fixture.data}})

    Map.merge(c, %{
      fixture: fixture,
      checksum_file: fixture.checksum_file,
      good: good,
      base_url: good <> "/m"
    })
  end

  test "an error status is decided from its head: a huge body is never read", c do
    for {status, framing} <- [
          {404, "content-length: #{@gib}"},
          {500, "content-length: #{@gib}"},
          {503, "transfer-encoding: chunked"},
          {404, "connection: close"}
        ] do
      head = "HTTP/1.1 #{status} No\r\n#{framing}\r\n\r\n"
      base = serve(handler: fn _ -> stalled(head, String.duplicate("x", 4096)) end)

      message = mix_error(fn -> obtain(c, base_url: base) end)
      assert message =~ "answered HTTP #{status}", message
      refute File.exists?(c.dest)
    end

    # With cargo, the same answers fall back to a build.
    head = "HTTP/1.1 404 No\r\ncontent-length: #{@gib}\r\n\r\n"
    base = serve(handler: fn _ -> stalled(head) end)
    assert obtain(c, base_url: base, cargo: c.fake_cargo) == :ok
    assert File.read!(c.dest) == "built by cargo"
  end

  test "a redirect is followed from its head: its huge body is never read", c do
    location = "#{c.good}/m/#{c.fixture.name}"
    head = "HTTP/1.1 302 Found\r\nlocation: #{location}\r\ncontent-length: #{@gib}\r\n\r\n"
    base = serve(handler: fn _ -> stalled(head, "x") end)

    assert obtain(c, base_url: base <> "/m") == :ok
    assert File.read!(c.dest) == c.fixture.library
    # The message names where the archive came from: the URL after the redirect.
    assert_received {:mix_shell, :info, ["Installing the precompiled hrw NIF " <> said]}
    assert said =~ "from #{location}"
  end

  test "redirects are checked one by one, and at most 5 are followed", c do
    off = serve(handler: fn _ -> redirect("http://10.0.0.1/m/x") end)
    message = mix_error(fn -> obtain(c, base_url: off, cargo: c.fake_cargo) end)
    assert message =~ "refusing to download from \"http://10.0.0.1/m/x\" is not an https URL"

    loop = serve(handler: fn path -> redirect(path <> "x") end)
    assert obtain(c, base_url: loop, cargo: c.fake_cargo) == :ok
    assert_received {:mix_shell, :info, ["No precompiled hrw NIF for " <> why]}
    assert why =~ ~r/more than 5 redirects, the last to #{loop}\/\S+x{6}\)/
    assert length(requests()) == 7
  end

  test "a 200 body is capped whatever its framing", c do
    forever = "HTTP/1.1 200 OK\r\n"
    chunk = String.duplicate("z", 65_536)

    for {head, reply} <- [
          {forever <> "content-length: #{@gib}\r\n\r\n", &stalled/1},
          {forever <> "connection: close\r\n\r\n", &endless(&1, chunk)},
          {forever <> "transfer-encoding: chunked\r\n\r\n",
           &endless(&1, "10000\r\n" <> chunk <> "\r\n")}
        ] do
      base = serve(handler: fn _ -> reply.(head) end)

      message =
        mix_error(fn -> obtain(c, base_url: base, max_bytes: 100_000, cargo: c.fake_cargo) end)

      assert message =~ ~r/is at least \d+ bytes, over the 100000-byte limit/, message
      assert cargo_args(c) == nil
    end
  end

  test "a truncated transfer is refused, even with cargo", c do
    data = c.fixture.data
    half = binary_part(data, 0, div(byte_size(data), 2))

    for head <- [
          "HTTP/1.1 200 OK\r\ncontent-length: #{byte_size(data)}\r\n\r\n#{half}",
          "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" <>
            "#{Integer.to_string(byte_size(data), 16)}\r\n#{half}"
        ] do
      base = serve(handler: fn _ -> {:raw, fn send -> send.(head) end} end)
      message = mix_error(fn -> obtain(c, base_url: base, cargo: c.fake_cargo) end)
      assert message =~ ~r/was truncated: \d+ of its #{byte_size(data)} bytes arrived/, message
    end

    refute File.exists?(c.dest)
    assert cargo_args(c) == nil
  end

  test "a server that stalls is given up after the timeout", c do
    base = serve(handler: fn _ -> {:raw, fn _ -> Process.sleep(:infinity) end} end)

    message = mix_error(fn -> obtain(c, base_url: base, timeout_ms: 500) end)
    assert message =~ ~r/no answer for 500 ms \(timed out\).*https:\/\/rustup.rs/s
    refute File.exists?(c.dest)
    assert obtain(c, base_url: base, timeout_ms: 500, cargo: c.fake_cargo) == :ok
  end

  test "credentials in the URL are sent, and never shown", c do
    secret = "s3cret-#{System.unique_integer([:positive])}"
    with_user = String.replace(c.good, "http://", "http://hrw:#{secret}@")

    assert obtain(c, base_url: with_user <> "/m") == :ok
    assert [{_, %{"authorization" => "Basic " <> auth}}] = requests()
    assert Base.decode64!(auth) == "hrw:" <> secret
    assert_received {:mix_shell, :info, ["Installing the precompiled hrw NIF " <> said]}
    assert said =~ "http://***@127.0.0.1"
    refute said =~ secret

    # Errors: a 404 (the cache now empty), a refused URL, a bad setting.
    File.rm_rf!(c.cache_dir)

    errors = [
      mix_error(fn -> obtain(c, base_url: with_user <> "/none") end),
      mix_error(fn -> obtain(c, base_url: "http://hrw:#{secret}@example.com/m") end),
      mix_error(fn ->
        Mix.Tasks.Compile.HrwNative.options(%{
          "HRW_NATIVE_BASE_URL" => "http://hrw:#{secret}@10.0.0.1/m"
        })
      end)
    ]

    for message <- errors do
      refute message =~ secret, message
      assert message =~ "***@", message
    end
  end

  test "an IPv6 loopback mirror works", c do
    fixture = c.fixture

    base =
      serve(
        ip: {0, 0, 0, 0, 0, 0, 0, 1},
        routes: %{("/" <> fixture.name) => {200, [], fixture.data}}
      )

    assert base =~ "http://[::1]:"
    assert obtain(c, base_url: base) == :ok
    assert File.read!(c.dest) == fixture.library
  end
end
