# The compile task's download (Mix.HrwNative.Download, through :httpc) against a
# hostile loopback server: broken framing, bad Location and Content-Length values,
# huge bodies, error bodies and header floods, answers :httpc itself cannot read,
# and a 503 asking to retry followed by a huge 404 while a slow build runs. Each
# case runs the download from a fresh VM and prints what it answered, how long it
# took, that VM's peak RSS (VmHWM; the download runs in a process of its own, so
# GNU time's maximum RSS, when /usr/bin/time exists, is the larger of the two) and
# how many requests the server saw in all (counted when the row is printed:
# after the client VM has exited).
#
#   elixir bench/download_hostile.exs [case ...]     (default: every case)
#   elixir bench/download_hostile.exs --start-cost 21
#                      what the download's own OS process costs: the median of
#                      21 downloads of 5 bytes from loopback
#   elixir bench/download_hostile.exs --long-lived 3
#                      a 4 GiB 404 at full speed in one VM: to its end, and with
#                      its caller killed mid-download (Linux: reads /proc)
#   CACERTS=bundle.pem elixir bench/download_hostile.exs "<case>"
#                      the same over https, trusting the bundle (read once, as the
#                      compile task reads HRW_NATIVE_CACERTS_PATH)
#
# The client VMs load mix/hrw_native/*.ex as they are; nothing is compiled first.
defmodule Hostile do
  @mib 1024 * 1024

  def cases do
    ok = "HTTP/1.1 200 OK\r\n"

    busy = fn after_s ->
      "HTTP/1.1 503 No\r\nretry-after: #{after_s}\r\ncontent-length: 4\r\n\r\nbusy"
    end

    # The first request answered `first`; every later one a 404 of `gib` GiB.
    then_404 = fn first, gib ->
      raw("", fn send ->
        if :counters.get(Process.get(:counter), 1) == 1,
          do: send.(first),
          else:
            send.("HTTP/1.1 404 No\r\ncontent-length: #{gib * 1024 * @mib}\r\n\r\n") == :ok &&
              repeat(send, :binary.copy("e", @mib), gib * 1024)
      end)
    end

    [
      {"a 503 with Retry-After: 5, then a 2 GiB 404, during a 10 s build",
       {:build, 10_000, then_404.(busy.(5), 2)}},
      {"a 503 with Retry-After: 5, then a 4 GiB 404, during a 10 s build",
       {:build, 10_000, then_404.(busy.(5), 4)}},
      {"a 503 with Retry-After: 0, then a 2 GiB 404, during a 3 s build",
       {:build, 3_000, then_404.(busy.(0), 2)}},
      {"a 503 with Retry-After: -1", status_with(503, "retry-after: -1")},
      {"a 503 with Retry-After: ab", status_with(503, "retry-after: ab")},
      {"a 404 with Content-Length: abc", status_with(404, "content-length: abc")},
      {"a 302 with Content-Length: -5", status_with(302, "location: /x\r\ncontent-length: -5")},
      {"a multipart/byteranges 200",
       status_with(200, "content-type: multipart/byteranges; boundary=B")},
      {"chunked, 32 Mi chunks of 1 byte",
       raw(ok <> "transfer-encoding: chunked\r\n\r\n", fn send ->
         piece = :binary.copy("1\r\nx\r\n", 65_536)
         repeat(send, piece, 512)
       end)},
      {"chunked, 2 Mi chunks of 1 byte",
       raw(ok <> "transfer-encoding: chunked\r\n\r\n", fn send ->
         piece = :binary.copy("1\r\nx\r\n", 65_536)
         repeat(send, piece, 32)
         send.("0\r\n\r\n")
       end)},
      {"chunk data not followed by CRLF",
       raw(ok <> "transfer-encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n", nil)},
      {"Location folded over two lines (obs-fold)",
       raw(
         "HTTP/1.1 302 Found\r\nlocation: /x\r\n X-Injected: yes\r\ncontent-length: 0\r\n\r\n",
         nil
       )},
      {"Location with port 99999", redirect("http://127.0.0.1:99999/x")},
      {"Location with port -1", redirect("http://127.0.0.1:-1/x")},
      {"Location with port abc", redirect("http://127.0.0.1:abc/x")},
      {"https Location whose host is invalid UTF-8", redirect("https://\xff\xfe.example/x")},
      {"Content-Length with ESC and CR", raw(ok <> "content-length: 5\e[2J\r\n\r\nhello", nil)},
      {"Location with ESC", redirect("/x\e[2J")},
      {"signed URL answered 404 (secret in the query)",
       {:path, "/a?X-Amz-Signature=SECRET", status(404, "no")}},
      {"100 Continue before the 200",
       raw("HTTP/1.1 100 Continue\r\n\r\n" <> ok <> "content-length: 5\r\n\r\nhello", nil)},
      {"103 Early Hints before the 200",
       raw(
         "HTTP/1.1 103 Early Hints\r\nlink: </a>; rel=preload\r\n\r\n" <>
           ok <> "content-length: 5\r\n\r\nhello",
         nil
       )},
      {"duplicate, different Content-Length",
       raw(ok <> "content-length: 5\r\ncontent-length: 6\r\n\r\nhello!", nil)},
      {"Content-Length longer than the body", raw(ok <> "content-length: 100\r\n\r\nhello", nil)},
      {"Content-Length over the cap", raw(ok <> "content-length: #{200 * @mib}\r\n\r\n", :stall)},
      {"body until close, endless",
       raw(ok <> "connection: close\r\n\r\n", fn send ->
         repeat(send, :binary.copy("z", 65_536), :infinity)
       end)},
      {"chunked, endless 64 KiB chunks",
       raw(ok <> "transfer-encoding: chunked\r\n\r\n", fn send ->
         repeat(send, "10000\r\n" <> :binary.copy("z", 65_536) <> "\r\n", :infinity)
       end)},
      {"a 1 GiB 404, sent at once",
       raw("HTTP/1.1 404 No\r\ncontent-length: #{1024 * @mib}\r\n\r\n", fn send ->
         repeat(send, :binary.copy("e", @mib), 1024)
       end)},
      {"a 1 GiB chunked 404, sent at once",
       raw("HTTP/1.1 404 No\r\ntransfer-encoding: chunked\r\n\r\n", fn send ->
         repeat(send, "100000\r\n" <> :binary.copy("e", @mib) <> "\r\n", 1024)
       end)},
      {"100k headers",
       raw(ok, fn send ->
         repeat(send, :binary.copy("x-h: v\r\n", 1000), 100)
         send.("content-length: 5\r\n\r\nhello")
       end)},
      {"a 100 MB header line",
       raw(ok <> "x-big: ", fn send ->
         repeat(send, :binary.copy("v", @mib), 100)
         send.("\r\ncontent-length: 5\r\n\r\nhello")
       end)},
      {"slowloris: a header byte every 500 ms", raw(ok, fn send -> drip(send) end)},
      {"redirect loop", {:loop}},
      {"a 31 MiB body with its length (accepted)",
       raw(ok <> "content-length: #{31 * @mib}\r\n\r\n", fn send ->
         repeat(send, :binary.copy("a", @mib), 31)
       end)},
      {"a 31 MiB body in 1 MiB chunks (accepted)",
       raw(ok <> "transfer-encoding: chunked\r\n\r\n", fn send ->
         repeat(send, "100000\r\n" <> :binary.copy("a", @mib) <> "\r\n", 31)
         send.("0\r\n\r\n")
       end)}
    ]
  end

  defp raw(head, :stall), do: {:raw, fn send -> send.(head) && Process.sleep(:infinity) end}
  defp raw(head, nil), do: {:raw, fn send -> send.(head) end}
  defp raw(head, fun), do: {:raw, fn send -> send.(head) == :ok && fun.(send) end}

  defp redirect(location),
    do: raw("HTTP/1.1 302 Found\r\nlocation: #{location}\r\ncontent-length: 0\r\n\r\n", nil)

  defp status_with(code, header),
    do: raw("HTTP/1.1 #{code} X\r\n#{header}\r\ncontent-length: 4\r\n\r\nbusy", nil)

  defp status(code, body),
    do: raw("HTTP/1.1 #{code} X\r\ncontent-length: #{byte_size(body)}\r\n\r\n#{body}", nil)

  defp repeat(_send, _data, 0), do: :ok

  defp repeat(send, data, n) do
    if send.(data) == :ok, do: repeat(send, data, if(n == :infinity, do: n, else: n - 1))
  end

  defp drip(send) do
    Process.sleep(500)
    if send.("x") == :ok, do: drip(send)
  end

  # -- the server ---------------------------------------------------------------------

  # The server's port and a counter of the requests it has read.
  def serve(reply) do
    {:ok, listen} =
      :gen_tcp.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false, reuseaddr: true])

    {:ok, port} = :inet.port(listen)
    counter = :counters.new(1, [])
    spawn_link(fn -> accept(listen, reply, counter) end)
    {port, counter}
  end

  defp accept(listen, reply, counter) do
    with {:ok, socket} <- :gen_tcp.accept(listen) do
      pid = spawn(fn -> one(socket, reply, counter) end)
      :ok = :gen_tcp.controlling_process(socket, pid)
      accept(listen, reply, counter)
    end
  end

  defp one(socket, reply, counter) do
    Process.put(:counter, counter)

    with {:ok, _request} <- read_head(socket, "") do
      :counters.add(counter, 1, 1)
      answer(socket, reply)
    end

    :gen_tcp.close(socket)
  end

  defp answer(socket, reply) do
    send_fun = fn data -> :gen_tcp.send(socket, data) end

    case reply do
      {:raw, fun} -> fun.(send_fun)
      {:loop} -> send_fun.("HTTP/1.1 302 Found\r\nlocation: /again\r\ncontent-length: 0\r\n\r\n")
    end
  end

  defp read_head(socket, buffer) do
    if String.contains?(buffer, "\r\n\r\n") do
      {:ok, buffer}
    else
      with {:ok, data} <- :gen_tcp.recv(socket, 0, 60_000), do: read_head(socket, buffer <> data)
    end
  end

  # The download's modules, as mix.exs loads them.
  defp load do
    root = Path.expand("..", __DIR__)

    compiled =
      for file <- ~w(otp_apps wire proxy safe_file tls download_failure download),
          pair <- Code.require_file("mix/hrw_native/#{file}.ex", root),
          do: pair

    apply(Mix.HrwNative.Download, :keep, [compiled])
  end

  # -- the client, in its own VM ----------------------------------------------------------

  # What the boundary costs: `runs` downloads of a 5-byte 200 from loopback, one
  # after another, each in its own OS process; the milliseconds of each.
  def start_cost(runs) do
    load()
    {port, _} = serve(raw("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", nil))
    url = "http://127.0.0.1:#{port}/a"

    times =
      for _ <- 1..runs do
        started = System.monotonic_time(:microsecond)

        {:ok, "hello", _} =
          apply(Mix.HrwNative.Download, :download, [url, %{timeout_ms: 30_000, max_bytes: 100}])

        (System.monotonic_time(:microsecond) - started) / 1000
      end

    sorted = Enum.sort(times)
    median = Enum.at(sorted, div(runs, 2))

    IO.puts(
      "# #{DateTime.utc_now() |> DateTime.truncate(:second)}; OTP #{System.otp_release()}; " <>
        "Elixir #{System.version()}; #{runs} downloads"
    )

    IO.puts(
      "median #{Float.round(median, 1)} ms, min #{Float.round(hd(sorted), 1)} ms, max #{Float.round(List.last(sorted), 1)} ms"
    )
  end

  # A 4 GiB 404 at full speed in this one VM, `runs` times to its end and `runs`
  # times with its caller killed 100 ms in: each download's time and answer, its
  # process's peak RSS (VmHWM, last read while it lived), whether any of its
  # processes is left, and this VM's own peak RSS at the end.
  def long_lived(runs) do
    load()
    gib = 4 * 1024 * @mib

    huge =
      raw(
        "HTTP/1.1 404 No\r\ncontent-length: #{gib}\r\n\r\n",
        &repeat(&1, :binary.copy("e", @mib), 4096)
      )

    {port, _} = serve(huge)
    url = "http://user:secret@127.0.0.1:#{port}/a"
    opts = %{timeout_ms: 30_000, max_bytes: 32 * @mib}
    download = fn -> apply(Mix.HrwNative.Download, :download, [url, opts]) end

    for run <- 1..runs do
      started = System.monotonic_time(:millisecond)
      task = Task.async(download)
      [child] = await(&running/0)
      peak = Stream.repeatedly(fn -> Process.sleep(2) && hwm(child) end) |> Enum.take_while(& &1)
      {kind, message} = Task.await(task, :infinity)
      ms = System.monotonic_time(:millisecond) - started

      IO.puts(
        "to its end #{run}: #{kind} in #{ms} ms, its process's peak RSS #{Enum.max([0 | peak])} MiB: #{message}"
      )
    end

    for run <- 1..runs do
      caller = spawn(download)
      [_] = await(&running/0)
      Process.sleep(100)
      Process.exit(caller, :kill)
      gone = await(fn -> children() == [] end)

      IO.puts(
        "killed #{run}: its processes left 10 s later at most: #{if gone, do: 0, else: length(children())}"
      )
    end

    IO.puts("this VM: peak RSS #{hwm(System.pid())} MiB")
  end

  # fun's first truthy answer, asked every 2 ms for at most 5,000 times.
  defp await(fun),
    do:
      Stream.repeatedly(fn -> Process.sleep(2) && fun.() end)
      |> Stream.take(5000)
      |> Enum.find(& &1)

  defp running, do: with([] <- children(), do: nil)

  defp hwm(pid) do
    with {:ok, text} <- File.read("/proc/#{pid}/status"),
         [_, kb] <- Regex.run(~r/VmHWM:\s+(\d+)/, text),
         do: div(String.to_integer(kb), 1024),
         else: (_ -> nil)
  end

  # This VM's download processes: `-hrw_native_download` children of its port helper.
  defp children do
    me = System.pid()

    procs =
      for dir <- Path.wildcard("/proc/[0-9]*"),
          {:ok, stat} <- [File.read(dir <> "/stat")],
          {:ok, cmdline} <- [File.read(dir <> "/cmdline")],
          [_, rest] <- [String.split(stat, ") ", parts: 2)],
          [state, ppid | _] = String.split(rest, " "),
          state != "Z",
          do: {Path.basename(dir), ppid, cmdline}

    helpers = for {pid, ^me, _} <- procs, do: pid
    for {pid, ppid, cmdline} <- procs, ppid in helpers, cmdline =~ "-hrw_native_download", do: pid
  end

  def client(url) do
    load()

    started = System.monotonic_time(:millisecond)

    # A CA bundle (CACERTS=file.pem): read as the compile task reads it, once.
    cacerts =
      case System.get_env("CACERTS") do
        nil -> nil
        path -> with({:ok, certs} <- apply(Mix.HrwNative.TLS, :read_pem, [path]), do: certs)
      end

    result =
      apply(Mix.HrwNative.Download, :download, [
        url,
        %{
          timeout_ms: String.to_integer(System.get_env("TIMEOUT_MS", "30000")),
          max_bytes: 32 * @mib,
          cacerts: cacerts
        }
      ])

    ms = System.monotonic_time(:millisecond) - started
    # A build after a failed download (BUILD_MS): the task waits for cargo, and
    # the peak RSS below covers that wait.
    Process.sleep(String.to_integer(System.get_env("BUILD_MS", "0")))
    [_, hwm] = Regex.run(~r/VmHWM:\s+(\d+) kB/, File.read!("/proc/self/status"))

    {kind, what} =
      case result do
        {:ok, body, from} -> {:ok, "#{byte_size(body)} bytes from #{from}"}
        {kind, message} -> {kind, message}
      end

    IO.puts("#{kind}\t#{ms}\t#{div(String.to_integer(hwm), 1024)}\t#{what}")
  end
end

case System.argv() do
  ["--client", url] ->
    Hostile.client(url)

  ["--start-cost", runs] ->
    Hostile.start_cost(String.to_integer(runs))

  ["--long-lived", runs] ->
    Hostile.long_lived(String.to_integer(runs))

  names ->
    cases = for {name, _} = c <- Hostile.cases(), names == [] or name in names, do: c

    IO.puts(
      "# #{DateTime.utc_now() |> DateTime.truncate(:second)}; OTP #{System.otp_release()}; Elixir #{System.version()}"
    )

    IO.puts(
      "# case | answer | ms (the download) | VmHWM MiB | message | GNU time max RSS MiB | requests"
    )

    for {name, reply} <- cases do
      {path, build_ms, reply} =
        case reply do
          {:path, path, reply} -> {path, 0, reply}
          {:build, ms, reply} -> {"/a", ms, reply}
          reply -> {"/a", 0, reply}
        end

      {port, counter} = Hostile.serve(reply)
      scheme = if System.get_env("CACERTS"), do: "https", else: "http"
      args = [__ENV__.file, "--client", "#{scheme}://127.0.0.1:#{port}#{path}"]

      {command, args} =
        if File.exists?("/usr/bin/time"),
          do: {"/usr/bin/time", ["-f", "gnu-time %M", "elixir" | args]},
          else: {"elixir", args}

      {out, _} =
        System.cmd(command, args,
          stderr_to_stdout: true,
          env: [{"BUILD_MS", Integer.to_string(build_ms)}]
        )

      lines = String.split(out, "\n", trim: true)

      gnu =
        Enum.find_value(lines, "-", fn
          "gnu-time " <> kb -> div(String.to_integer(kb), 1024)
          _ -> nil
        end)

      line = lines |> Enum.reject(&String.starts_with?(&1, "gnu-time ")) |> List.last()
      IO.puts("#{name}\t#{line}\t#{gnu}\t#{:counters.get(counter, 1)}")
    end
end
