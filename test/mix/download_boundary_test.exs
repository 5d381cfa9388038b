defmodule Mix.HrwNative.DownloadBoundaryTest do
  # The download runs in an OS process of its own (Mix.HrwNative.Download), so:
  # nothing of it outlives its caller, however the caller ends; its memory cap
  # counts its own bytes, whatever the calling VM allocates or frees; any number
  # of downloads run in one VM, one after another or at once, each ending in one
  # of our sentences; no crash dump, command line, environment or file holds a
  # credential, a SIGUSR1 to it included.
  use ExUnit.Case, async: false
  @moduletag :integration

  import HRW.Test.NativeMirror

  @mib 1024 * 1024

  setup do
    Mix.shell(Mix.Shell.Process)
    on_exit(fn -> Mix.shell(Mix.Shell.IO) end)
    tmp = tmp_dir!()
    fixture = archive(Path.join(tmp, "archive"))
    good = serve(routes: %{("/m/" <> fixture.name) => {200, [], fixture.data}})

    tmp
    |> new_case()
    |> Map.merge(%{tmp: tmp, fixture: fixture, checksum_file: fixture.checksum_file})
    |> Map.put(:good, good <> "/m")
  end

  # A 200 that sends a byte every 10 ms: a download that stays under way.
  defp dripping do
    serve(
      handler: fn _ ->
        {:raw,
         fn send ->
           send.("HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n")
           Stream.repeatedly(fn -> Process.sleep(10) && send.("x") end) |> Enum.find(&(&1 != :ok))
         end}
      end
    )
  end

  defp httpc_processes do
    for pid <- Process.list(),
        {:dictionary, dict} <- [Process.info(pid, :dictionary)],
        dict[:"$initial_call"] in [{:httpc_manager, :init, 1}, {:httpc_handler, :init, 1}],
        # (inets's own default profile, started by a test's httpd, is registered)
        Process.info(pid, :registered_name) == {:registered_name, []},
        do: pid
  end

  defp await_download_process do
    Stream.repeatedly(fn -> download_processes() end)
    |> Stream.take(500)
    |> Enum.find(&(&1 != [] or (Process.sleep(20) && false)))
  end

  test "a caller killed, shut down, crashed or timed out mid-download leaves nothing; the next compile answers",
       c do
    drip = dripping()
    filters = :logger.get_primary_config().filters

    start = fn -> obtain(c, base_url: drip, cache_dir: nil, timeout_ms: 60_000) end

    stop = fn reason ->
      pid = spawn(start)
      assert await_download_process() != nil
      Process.exit(pid, reason)
    end

    endings = [
      kill: fn -> stop.(:kill) end,
      shutdown: fn -> stop.(:shutdown) end,
      # The process running the compile is linked to one that raises.
      raised: fn ->
        spawn(fn ->
          spawn_link(fn -> Process.sleep(1_000) && raise "boom" end)
          start.()
        end)
      end,
      # A tool that runs the compile in a Task and gives up waiting for it.
      task_timeout: fn -> spawn(fn -> Task.async(start) |> Task.await(1_500) end) end
    ]

    for {ending, fun} <- endings do
      ExUnit.CaptureLog.capture_log(fn ->
        fun.()
        # Those that end by themselves: wait for the ending (the child may or
        # may not have started by then; either way none is left).
        if ending in [:raised, :task_timeout], do: Process.sleep(1_600)
        assert no_download_processes() == [], "#{ending}"
      end)

      assert httpc_processes() == []
      assert :logger.get_primary_config().filters == filters
    end

    # The next compile in this VM: installs, or falls back to cargo in a sentence.
    assert obtain(c, base_url: c.good) == :ok
    assert File.read!(c.dest) == c.fixture.library
    File.rm!(c.dest)
    assert obtain(c, base_url: c.good <> "/none", cache_dir: nil, cargo: c.fake_cargo) == :ok
    assert_received {:mix_shell, :info, ["No precompiled hrw NIF for " <> why]}
    assert why =~ "answered HTTP 404): built it with cargo"
  end

  test "a calling VM killed outright (SIGKILL) leaves no download process", c do
    drip = dripping()
    root = Path.expand("../..", __DIR__)

    script = """
    compiled =
      for file <- ~w(otp_apps safe_file wire proxy tls download_failure download),
          pair <- Code.require_file("mix/hrw_native/\#{file}.ex", #{inspect(root)}),
          do: pair

    Mix.HrwNative.Download.keep(compiled)
    Mix.HrwNative.Download.download(#{inspect(drip)}, %{timeout_ms: 60_000, max_bytes: 100_000})
    """

    vm =
      Port.open({:spawn_executable, System.find_executable("elixir")}, [
        :binary,
        args: ["-e", script],
        cd: c.case_dir
      ])

    {:os_pid, vm_pid} = Port.info(vm, :os_pid)
    # Mid-download: the request has reached the mirror.
    assert_receive {:mirror_request, _, _}, 60_000
    [child] = children_of(children_of(Integer.to_string(vm_pid)))
    assert File.read!("/proc/#{child}/cmdline") =~ "-hrw_native_download"

    {_, 0} = System.cmd("kill", ["-KILL", Integer.to_string(vm_pid)])

    gone = fn ->
      not File.exists?("/proc/#{child}") or File.read!("/proc/#{child}/stat") =~ ") Z "
    end

    assert Stream.repeatedly(fn -> gone.() or (Process.sleep(20) && false) end)
           |> Stream.take(500)
           |> Enum.any?()
  end

  # The OS processes whose parent is one of `pids` (a pid or a list of them).
  defp children_of(pids) do
    pids = List.wrap(pids)

    for dir <- Path.wildcard("/proc/[0-9]*"),
        {:ok, stat} <- [File.read(dir <> "/stat")],
        [_, rest] <- [String.split(stat, ") ", parts: 2)],
        Enum.at(String.split(rest, " "), 1) in pids,
        do: Path.basename(dir)
  end

  test "the download's own timeout ends it, and nothing is left", c do
    stalled = serve(handler: fn _ -> stalled("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n") end)
    message = mix_error(fn -> obtain(c, base_url: stalled, timeout_ms: 300) end)
    assert message =~ "no answer for 300 ms (timed out)"
    assert no_download_processes() == []
  end

  test "a busy VM installs a good download; one that frees memory cannot hide a hostile one",
       c do
    # The archive in pieces over about a second, while this VM allocates and
    # drops 20 MiB binaries every 50 ms.
    data = c.fixture.data
    pieces = for <<piece::binary-size(64) <- data>>, do: piece
    rest = binary_part(data, 64 * length(pieces), byte_size(data) - 64 * length(pieces))

    slow =
      serve(
        handler: fn _ ->
          {:raw,
           fn send ->
             send.("HTTP/1.1 200 OK\r\ncontent-length: #{byte_size(data)}\r\n\r\n")
             step = max(div(1_000, max(length(pieces), 1)), 1)
             for piece <- pieces ++ [rest], do: Process.sleep(step) && send.(piece)
           end}
        end
      )

    busy =
      spawn_link(fn ->
        Stream.iterate([], fn held ->
          Process.sleep(50)
          Enum.take([:binary.copy(<<1>>, 20 * @mib) | held], 3)
        end)
        |> Stream.run()
      end)

    assert obtain(c, base_url: slow, cache_dir: nil) == :ok
    assert File.read!(c.dest) == c.fixture.library
    Process.unlink(busy)
    Process.exit(busy, :kill)

    # 200 MiB held, then freed while a 1 GiB 404 arrives at full speed: refused
    # by the download's own count all the same. This VM's memory does not grow.
    hostile =
      serve(
        handler: fn _ ->
          endless(
            "HTTP/1.1 404 No\r\ncontent-length: #{1024 * @mib}\r\n\r\n",
            :binary.copy("e", @mib)
          )
        end
      )

    :erlang.garbage_collect()
    before = :erlang.memory(:total)
    me = self()

    hog =
      spawn(fn ->
        big = :binary.copy(<<2>>, 200 * @mib)
        send(me, :held)
        receive do: (:free -> byte_size(big))
      end)

    assert_receive :held
    Process.send_after(hog, :free, 300)

    message =
      mix_error(fn -> obtain(c, base_url: hostile, cache_dir: nil, cargo: c.fake_cargo) end)

    assert message =~ ~r/sent more than a download may hold: over \d+ MiB in memory/, message
    assert :erlang.memory(:total) - before < 64 * @mib
    assert cargo_args(c) == nil
  end

  test "downloads one after another and at once, in one VM, each end in a sentence", c do
    hostile =
      serve(
        handler: fn _ ->
          endless(
            "HTTP/1.1 404 No\r\ncontent-length: #{1024 * @mib}\r\n\r\n",
            :binary.copy("e", @mib)
          )
        end
      )

    cases = [
      {c.good, nil, :installed},
      {c.good <> "/none", :cargo, :built},
      {hostile, :cargo, :refused},
      {c.good, nil, :installed},
      {c.good <> "/none", nil, :no_cargo},
      {c.good, nil, :installed}
    ]

    run = fn {base, cargo, _} ->
      one = new_case(c.tmp)
      opts = [base_url: base, cache_dir: nil]
      opts = if cargo, do: [cargo: one.fake_cargo] ++ opts, else: opts

      result =
        try do
          obtain(Map.merge(c, Map.take(one, [:case_dir, :dest, :fake_cargo])), opts)
        rescue
          e in Mix.Error -> {:error, Exception.message(e)}
        end

      {result, File.read(one.dest)}
    end

    expect = fn
      :installed, {:ok, {:ok, library}} -> library == c.fixture.library
      :built, {:ok, {:ok, "built by cargo"}} -> true
      :refused, {{:error, m}, {:error, :enoent}} -> m =~ "sent more than a download may hold"
      :no_cargo, {{:error, m}, {:error, :enoent}} -> m =~ "answered HTTP 404"
      _, _ -> false
    end

    # One after another, then all at once.
    for {_, _, outcome} = one <- cases, do: assert(expect.(outcome, run.(one)), "#{outcome}")

    results = Task.async_stream(cases, run, timeout: :infinity, max_concurrency: length(cases))

    for {{_, _, outcome}, {:ok, result}} <- Enum.zip(cases, results),
        do: assert(expect.(outcome, result), "#{outcome}: #{inspect(result)}")

    assert no_download_processes() == []
  end

  test "no crash dump, command line, environment or file holds a credential, SIGUSR1 included",
       c do
    secret = "PW#{System.unique_integer([:positive])}"
    base = String.replace(dripping(), "://", "://bob:MIRROR#{secret}@")

    proxies =
      Mix.HrwNative.Proxy.settings(%{"HTTP_PROXY" => "http://al:PROXY#{secret}@127.0.0.1:9"})

    # no_proxy keeps the loopback mirror direct; the proxy's credentials still go to the child.
    proxies = %{proxies | no_proxy: ["127.0.0.1"]}

    caller =
      Task.async(fn ->
        obtain(c, base_url: base, proxies: proxies, cargo: c.fake_cargo, cache_dir: nil)
      end)

    [pid] = await_download_process()
    # Mid-download: the request has reached the mirror.
    assert_receive {:mirror_request, _, %{"authorization" => _}}

    for file <- ~w(cmdline environ) do
      {:ok, text} = File.read("/proc/#{pid}/#{file}")
      refute text =~ secret, file
    end

    {_, 0} = System.cmd("kill", ["-USR1", pid])
    # Mix.Shell.Process tells the task's caller: this process.
    assert Task.await(caller, 30_000) == :ok
    said = Enum.join(for({:mix_shell, _, [line]} <- said(), do: line), "\n")

    assert said =~
             ~r/No precompiled hrw NIF .* stopped (\(status \d+\) )?before it answered\): built it with cargo/,
           said

    refute said =~ secret
    assert no_download_processes() == []

    for dir <- Enum.uniq(["/", File.cwd!(), c.case_dir, System.tmp_dir!()]) do
      refute File.exists?(Path.join(dir, "erl_crash.dump")), dir
    end

    {found, _} = System.cmd("grep", ["-rl", secret, c.tmp])
    assert found == ""
  end
end
