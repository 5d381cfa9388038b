defmodule Mix.HrwNative.DownloadTest do
  # The compile task's download (through :httpc) against hostile loopback mirrors,
  # by class: error answers, redirects and their Location values, header values,
  # 200 bodies in every framing, truncations, stalls, 1xx answers, secrets in
  # URLs, IPv6 loopback. Every failure is one Mix.Error whose message holds no
  # control character; nothing is installed that the checksum file does not name.
  # The archive is hand-made (no cargo build); a stand-in cargo shows whether the
  # task fell back to a build.
  use ExUnit.Case, async: false
  @moduletag :integration

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

  # One sentence a terminal prints as it is: no control characters.
  defp printable!(message) do
    refute message =~ ~r/[\x00-\x1f\x7f]/, "control characters in: #{inspect(message)}"
    message
  end

  defp error!(c, overrides), do: printable!(mix_error(fn -> obtain(c, overrides) end))

  test "an error status is reported by number, whatever the body's framing", c do
    for {status, framing, body} <- [
          {404, "content-length: 9", "not here!"},
          {500, "transfer-encoding: chunked", "4\r\nfail\r\n0\r\n\r\n"},
          {503, "connection: close", "busy"}
        ] do
      head = "HTTP/1.1 #{status} No\r\n#{framing}\r\n\r\n"
      base = serve(handler: fn _ -> {:raw, fn send -> send.([head, body]) end} end)

      assert error!(c, base_url: base) =~ "answered HTTP #{status}"
      refute File.exists?(c.dest)
    end

    # With cargo, an error status falls back to a build.
    base = serve(routes: %{})
    assert obtain(c, base_url: base, cargo: c.fake_cargo) == :ok
    assert File.read!(c.dest) == "built by cargo"
  end

  test "an answer that grows past its budget before its body is cut off, never held", c do
    # :httpc holds a status line, headers and any body but a 200's until they
    # end: these never do. Each is cut at the budget, long before the timeout.
    chunk = String.duplicate("e", 65_536)

    for {head, piece} <- [
          {"HTTP/1.1 404 No\r\ncontent-length: #{@gib}\r\n\r\n", chunk},
          {"HTTP/1.1 302 Found\r\nlocation: /x\r\ncontent-length: #{@gib}\r\n\r\n", chunk},
          {"HTTP/1.1 500 No\r\ntransfer-encoding: chunked\r\n\r\n", "10000\r\n#{chunk}\r\n"},
          {"HTTP/1.1 200 OK\r\nx-long: ", chunk},
          {"HTTP/1.1 200 OK\r\n", "x-many: headers\r\n"}
        ] do
      base = serve(handler: fn _ -> endless(head, piece) end)
      message = error!(c, base_url: base, cargo: c.fake_cargo)

      # The :httpc of OTP 27 and 29 cuts headers at 10 KiB itself.
      assert message =~
               ~r/sent more than a download may hold: over \d+ MiB in memory, over its 80 MiB|sent headers over the \d+-byte limit of :httpc/,
             message
    end

    assert cargo_args(c) == nil
  end

  test "a redirect is followed, and the message names where the archive came from", c do
    location = "#{c.good}/m/#{c.fixture.name}"
    base = serve(handler: fn _ -> redirect(location, 307) end)

    assert obtain(c, base_url: base <> "/m") == :ok
    assert File.read!(c.dest) == c.fixture.library
    assert_received {:mix_shell, :info, ["Installed the precompiled hrw NIF " <> said]}
    assert said =~ "from #{location}"
  end

  test "redirects are checked one by one, and at most 5 are followed", c do
    off = serve(handler: fn _ -> redirect("https://10.0.0.1:99999/m/x") end)
    message = error!(c, base_url: off, cargo: c.fake_cargo)

    assert message =~
             "redirects to a URL that is refused: it has a port that is not a number from 1 to 65535"

    refute message =~ "10.0.0.1"

    loop = serve(handler: fn path -> redirect(path <> "x") end)
    assert obtain(c, base_url: loop, cargo: c.fake_cargo) == :ok
    assert_received {:mix_shell, :info, ["No precompiled hrw NIF for " <> why]}
    assert why =~ ~r/more than 5 redirects, the last to #{loop}\/\S+x{6}\)/
    assert length(requests()) == 7
  end

  test "every Location that is not a clean URL of the same scheme is refused, unfollowed",
       c do
    for {location, said} <- [
          # folded over two lines (obs-fold): the CRLF must never reach a request
          {"/x\r\n X-Injected: yes", "holds a space, a control character or a non-ASCII byte"},
          {"/x\e[2J", "holds a space, a control character"},
          {"/a b", "holds a space"},
          {"http://127.0.0.1:99999/x", "has a port that is not a number from 1 to 65535"},
          {"http://127.0.0.1:-1/x", "has a port that is not a number from 1 to 65535"},
          {"http://127.0.0.1:abc/x", "has a port that is not a number from 1 to 65535"},
          {"http://127.0.0.1:0/x", "has a port that is not a number from 1 to 65535"},
          {"https://\xff\xfe.example/x",
           "holds a space, a control character or a non-ASCII byte"},
          {"https://bad_host.example/x", "has no valid host"},
          {"https://127.0.0.1/x", "from http to https"},
          {"ftp://127.0.0.1/x", "is not an https URL"},
          {"http://example.com/x", "plain http is allowed only to 127.0.0.1"}
        ] do
      base =
        serve(
          handler: fn _ ->
            {:raw,
             fn send ->
               send.("HTTP/1.1 302 Found\r\nlocation: #{location}\r\ncontent-length: 0\r\n\r\n")
             end}
          end
        )

      message = error!(c, base_url: base, cargo: c.fake_cargo)
      assert message =~ "refusing the precompiled hrw NIF: #{base}/", message
      assert message =~ said, message
      # The base URL came from the project, not from HRW_NATIVE_BASE_URL.
      refute message =~ "HRW_NATIVE_BASE_URL"
      # One request: the Location was neither followed nor spliced into another.
      assert [{path, headers}] = requests()
      refute path =~ "X-Injected"
      refute Map.has_key?(headers, "x-injected")
    end

    assert cargo_args(c) == nil
  end

  # :httpc keeps one value of a repeated header; OTP 25's reads "-1" as no length
  # (until the connection closes, capped), and what that frames reaches the
  # checksum, which refuses it; OTP 27 and 29's refuses "-1" itself.
  test "a bad Content-Length is refused and shown escaped", c do
    for {length, said} <- [
          {"5\e[2J", "sent a bad content-length: 5\\x1B[2J"},
          {"-1", ~r/\(5 bytes\) has sha256:|sent a bad content-length: -1/},
          {"99999999999999999999999", "sent a bad content-length: 9999"},
          {"5\r\ncontent-length: 4", "bytes) has sha256:"}
        ] do
      head = "HTTP/1.1 200 OK\r\ncontent-length: #{length}\r\n\r\nhello"
      base = serve(handler: fn _ -> {:raw, fn send -> send.(head) end} end)
      message = error!(c, base_url: base, cargo: c.fake_cargo)
      assert message =~ said, message
    end

    assert cargo_args(c) == nil
  end

  test "1xx answers before the 200 are skipped", c do
    ok = "HTTP/1.1 200 OK\r\ncontent-length: #{byte_size(c.fixture.data)}\r\n\r\n"

    for informational <- [
          "HTTP/1.1 100 Continue\r\n\r\n",
          "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n",
          "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
        ] do
      File.rm_rf!(c.cache_dir)
      File.rm_rf!(c.dest)

      base =
        serve(
          handler: fn _ -> {:raw, fn send -> send.([informational, ok, c.fixture.data]) end} end
        )

      assert obtain(c, base_url: base) == :ok, informational
      assert File.read!(c.dest) == c.fixture.library
    end
  end

  test "a 200 body is capped whatever its framing", c do
    forever = "HTTP/1.1 200 OK\r\n"
    chunk = String.duplicate("z", 65_536)

    for {head, reply} <- [
          {forever <> "content-length: #{@gib}\r\n\r\n", &stalled/1},
          {forever <> "connection: close\r\n\r\n", &endless(&1, chunk)},
          {forever <> "transfer-encoding: chunked\r\n\r\n",
           &endless(&1, "10000\r\n" <> chunk <> "\r\n")},
          # chunks of one byte: each costs a few bytes of framing, none a cons cell
          {forever <> "transfer-encoding: chunked\r\n\r\n",
           &endless(&1, String.duplicate("1\r\nz\r\n", 4096))}
        ] do
      base = serve(handler: fn _ -> reply.(head) end)
      message = error!(c, base_url: base, max_bytes: 100_000, cargo: c.fake_cargo)
      assert message =~ ~r/is at least \d+ bytes, over the 100000-byte limit/, message
      assert cargo_args(c) == nil
    end
  end

  test "a truncated or malformed transfer is refused, even with cargo", c do
    data = c.fixture.data
    half = binary_part(data, 0, div(byte_size(data), 2))
    hex = Integer.to_string(byte_size(data), 16)

    for {head, said} <- [
          {"HTTP/1.1 200 OK\r\ncontent-length: #{byte_size(data)}\r\n\r\n#{half}",
           "was truncated: the connection closed before its #{byte_size(data)} declared bytes"},
          {"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n#{hex}\r\n#{half}",
           "was truncated: the chunked body did not end"},
          # chunk data not followed by CRLF
          {"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n",
           "was truncated: the chunked body did not end"}
        ] do
      base = serve(handler: fn _ -> {:raw, fn send -> send.(head) end} end)
      message = error!(c, base_url: base, cargo: c.fake_cargo)
      assert message =~ said, message
    end

    refute File.exists?(c.dest)
    assert cargo_args(c) == nil
  end

  test "a server that stalls is given up after the timeout, one that drips at the deadline",
       c do
    base = serve(handler: fn _ -> {:raw, fn _ -> Process.sleep(:infinity) end} end)

    message = error!(c, base_url: base, timeout_ms: 300)
    assert message =~ ~r/no answer for 300 ms \(timed out\).*https:\/\/rustup.rs/s
    refute File.exists?(c.dest)
    assert obtain(c, base_url: base, timeout_ms: 300, cargo: c.fake_cargo) == :ok

    # A byte of body every 50 ms: never idle for 500 ms, stopped at 20 × 500 ms.
    drip =
      serve(
        handler: fn _ ->
          {:raw,
           fn send ->
             send.("HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n")

             Stream.repeatedly(fn -> Process.sleep(50) && send.("x") end)
             |> Enum.find(&(&1 != :ok))
           end}
        end
      )

    message = error!(c, base_url: drip, timeout_ms: 500)
    assert message =~ "not done within 10000 ms (timed out)", message
  end

  test "credentials in the URL are sent, and never shown", c do
    secret = "s3cret-#{System.unique_integer([:positive])}"
    with_user = String.replace(c.good, "http://", "http://hrw:#{secret}@")

    assert obtain(c, base_url: with_user <> "/m") == :ok
    assert [{_, %{"authorization" => "Basic " <> auth}}] = requests()
    assert Base.decode64!(auth) == "hrw:" <> secret
    assert_received {:mix_shell, :info, ["Installed the precompiled hrw NIF " <> said]}
    assert said =~ "from #{c.good}/m/"
    refute said =~ secret

    # Errors: a 404 (the cache now empty), a refused URL, a bad setting.
    File.rm_rf!(c.cache_dir)

    errors = [
      error!(c, base_url: with_user <> "/none"),
      error!(c, base_url: "http://hrw:#{secret}@example.com/m"),
      mix_error(fn ->
        Mix.Tasks.Compile.HrwNative.options(%{
          "HRW_NATIVE_BASE_URL" => "http://hrw:#{secret}@10.0.0.1/m"
        })
      end)
    ]

    for message <- errors do
      refute message =~ secret, message
      refute message =~ "hrw:", message
    end
  end

  test "a signed URL's query is sent, and never shown", c do
    token = "X-Amz-Signature=tok#{System.unique_integer([:positive])}"
    name = c.fixture.name

    signed_path = "/signed/#{name}?#{token}"

    signed =
      serve(
        handler: fn
          "/m/" <> ^name -> redirect(signed_path)
          ^signed_path -> {200, [], c.fixture.data}
          _ -> {404, [], ""}
        end
      )

    assert obtain(c, base_url: signed <> "/m") == :ok
    assert [_, {"/signed/" <> _ = asked, _}] = requests()
    assert asked =~ token
    assert_received {:mix_shell, :info, ["Installed the precompiled hrw NIF " <> said]}
    assert said =~ "from #{signed}/signed/#{name}"
    refute said =~ "Signature"

    File.rm_rf!(c.cache_dir)
    gone = serve(handler: fn _ -> redirect("/signed/#{name}?#{token}", 302) end)
    message = error!(c, base_url: gone)
    assert message =~ "more than 5 redirects"
    refute message =~ "Signature"
  end

  test "a base URL's query is kept after the archive name, its fragment never sent", c do
    token = "X-Amz-Signature=tok#{System.unique_integer([:positive])}"
    name = c.fixture.name
    signed = "/k/good/#{name}?#{token}"

    mirror =
      serve(
        handler: fn path ->
          if path == signed, do: {200, [], c.fixture.data}, else: {404, [], ""}
        end
      )

    for base <- ["#{mirror}/k/good?#{token}", "#{mirror}/k/good/?#{token}#frag"] do
      File.rm_rf!(c.cache_dir)
      File.rm_rf!(c.dest)
      assert obtain(c, base_url: base) == :ok
      assert [{^signed, _}] = requests()
      assert_received {:mix_shell, :info, ["Installed the precompiled hrw NIF " <> said]}
      assert said =~ "from #{mirror}/k/good/#{name}"
      refute said =~ "Signature"
    end

    # A failure names the archive's URL, not the query.
    File.rm_rf!(c.cache_dir)
    message = error!(c, base_url: "#{mirror}/k/other?#{token}")
    assert message =~ "#{mirror}/k/other/#{name} answered HTTP 404", message
    refute message =~ "Signature"
    refute message =~ "HRW_NATIVE_BASE_URL"
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
