defmodule Mix.HrwNative.CacheTest do
  # The files the compile task reads and writes: the archive cache, the install
  # into _build, the checksum file, and what an archive inflates to. Folders that
  # others can write, links planted at the names of temporary files, huge or
  # tampered cache entries, a decompression bomb whose checksum matches.
  use ExUnit.Case, async: false
  @moduletag :integration

  import HRW.Test.NativeMirror

  # The user the folders of "another user" belong to.
  @nobody 65_534

  setup do
    Mix.shell(Mix.Shell.Process)
    on_exit(fn -> Mix.shell(Mix.Shell.IO) end)
    tmp = tmp_dir!()
    fixture = archive(Path.join(tmp, "archive"))
    path = "/m/" <> fixture.name
    base_url = serve(routes: %{path => {200, [], fixture.data}}) <> "/m"

    tmp
    |> new_case()
    |> Map.merge(%{fixture: fixture, checksum_file: fixture.checksum_file, base_url: base_url})
  end

  defp cached(c), do: Path.join(c.cache_dir, c.fixture.name)
  defp down, do: "http://127.0.0.1:1/none"

  # A folder anyone can write, owned by another user. Only root can make one: the
  # tests that need it are tagged :needs_root, which test_helper.exs excludes (and
  # says so) when the suite runs as another user.
  defp others_folder(dir) do
    File.mkdir_p!(dir)
    File.chmod!(dir, 0o777)
    File.chown!(dir, @nobody)
  end

  # A bound far above the work, for a loaded machine.
  @tag timeout: HRW.TestTimeouts.ms(300_000)
  test "temporary files are never written through a link planted at their name", c do
    victim = Path.join(c.case_dir, "victim")
    File.write!(victim, "precious")
    File.mkdir_p!(c.cache_dir)
    File.mkdir_p!(Path.dirname(c.dest))

    # Links at every name a counter-based temporary name could take next. Made with
    # :prim_file, not through the VM's one file server, where they would queue
    # behind the async tests' file operations.
    first = System.unique_integer([:positive])

    for n <- first..(first + 20_000) do
      :ok = :prim_file.make_symlink(victim, "#{cached(c)}.#{n}.tmp")
    end

    File.ln_s!(victim, c.dest <> ".tmp")

    assert obtain(c, []) == :ok
    assert File.read!(victim) == "precious"
    assert File.read!(c.dest) == c.fixture.library
    assert File.read!(cached(c)) == c.fixture.data
    assert File.lstat!(c.dest).type == :regular
  end

  @tag :needs_root
  test "a cache folder that others can write and that is not ours is neither read nor written",
       c do
    others_folder(c.cache_dir)
    # An entry planted there, valid or not, is not taken.
    File.write!(cached(c), c.fixture.data)
    assert obtain(c, []) == :ok
    assert_received {:mix_shell, :info, ["Installed the precompiled hrw NIF " <> said]}
    assert said =~ "from #{c.base_url}/"
    assert_received {:mix_shell, :error, [warning]}
    assert warning =~ "not using the archive cache: #{c.cache_dir}"
    assert warning =~ "belongs to user 65534, not to this one: it is not used"
    assert File.ls!(c.cache_dir) == [c.fixture.name]
  end

  test "a cache folder of ours that others can write is neither read nor written", c do
    for mode <- [0o1777, 0o777, 0o775] do
      File.rm_rf!(c.cache_dir)
      File.rm_rf!(c.dest)
      File.mkdir_p!(c.cache_dir)
      # chmod(1): :file.change_mode/2 may drop the sticky bit.
      {_, 0} = System.cmd("chmod", [Integer.to_string(mode, 8), c.cache_dir])
      # A planted entry is never read (it would fail verification and stop).
      File.write!(cached(c), "planted")
      assert obtain(c, []) == :ok
      assert_received {:mix_shell, :error, [warning]}
      assert warning =~ "can be written by other users (mode #{Integer.to_string(mode, 8)})"
      assert File.read!(cached(c)) == "planted"
      assert File.read!(c.dest) == c.fixture.library
    end
  end

  test "a read-only cache (entries 0444, folder 0500) is read as it is, also by a user who cannot write it",
       c do
    File.mkdir_p!(c.cache_dir)
    File.write!(cached(c), c.fixture.data)
    File.chmod!(cached(c), 0o444)
    File.chmod!(c.cache_dir, 0o500)
    on_exit(fn -> File.chmod(c.cache_dir, 0o700) end)

    # Root may open anything: as root, the task runs as user 65534, who owns the
    # cache and the case's folders.
    if root?() do
      {_, 0} = System.cmd("chown", ["-R", "#{@nobody}:#{@nobody}", c.case_dir])
    end

    said = run_task(c, [base_url: down()], if(root?(), do: @nobody))

    assert said =~
             ~r/\AInstalled the precompiled hrw NIF .* from #{Regex.escape(cached(c))}\n:ok\z/

    assert File.read!(c.dest) == c.fixture.library
    assert File.read!(cached(c)) == c.fixture.data
  end

  test "when this process's user id cannot be learnt, the reason says so", c do
    key = {Mix.HrwNative.SafeFile, :uid}

    :persistent_term.put(
      key,
      {:error, "no file can be created in /nowhere (no space left on device)"}
    )

    on_exit(fn -> :persistent_term.erase(key) end)
    assert obtain(c, []) == :ok
    assert_received {:mix_shell, :error, [warning]}

    assert warning =~ "hrw: not using the archive cache: #{c.cache_dir} belongs to user "

    assert warning =~
             ", which cannot be told to be this one (no file can be created in /nowhere " <>
               "(no space left on device)): it is not used"

    refute warning =~ "not to this one"
  end

  test "an install folder of ours that others can write is closed to them, and the task says so",
       c do
    native = Path.dirname(c.dest)
    priv = Path.dirname(native)

    for {folders, mode} <- [{[native], 0o777}, {[priv, native], 0o777}, {[priv], 0o1777}] do
      File.rm_rf!(priv)
      File.mkdir_p!(native)

      for folder <- folders,
          do: {_, 0} = System.cmd("chmod", [Integer.to_string(mode, 8), folder])

      assert obtain(c, []) == :ok
      said = for {:mix_shell, :info, ["hrw: " <> line]} <- said(), do: line

      assert said ==
               for(
                 folder <- Enum.sort(folders),
                 do:
                   "#{folder} could be written by other users (mode #{Integer.to_string(mode, 8)}): " <>
                     "it is now #{Integer.to_string(Bitwise.band(mode, 0o7755), 8)}"
               )

      assert Bitwise.band(File.stat!(native).mode, 0o022) == 0
      assert Bitwise.band(File.stat!(priv).mode, 0o022) == 0
      assert File.read!(c.dest) == c.fixture.library
    end
  end

  test "a cache folder it creates is this user's alone", c do
    assert obtain(c, []) == :ok
    assert Bitwise.band(File.stat!(c.cache_dir).mode, 0o777) == 0o700
    assert File.read!(cached(c)) == c.fixture.data
  end

  # The task's files, in mix.exs's order.
  defp task_files do
    root = Path.expand("../..", __DIR__)

    files = ~w(json otp_apps safe_file wire proxy tls download_failure download target checksums
         archive cache precompiled)

    Enum.map(files, &Path.join(root, "mix/hrw_native/#{&1}.ex")) ++
      [Path.join(root, "mix/tasks/compile.hrw_native.ex")]
  end

  # Copies of the task's files that another user can read: a checkout may sit in a
  # folder closed to them (under /root, say).
  defp readable_copies(files, dir) do
    copies = Path.join(dir, "task_files")
    File.mkdir_p!(copies)
    File.chmod!(copies, 0o755)

    for file <- files do
      copy = Path.join(copies, Path.basename(file))
      File.cp!(file, copy)
      File.chmod!(copy, 0o644)
      copy
    end
  end

  defp root?, do: System.cmd("id", ["-u"]) |> elem(0) |> String.trim() == "0"

  # The compile task's decision in a fresh VM (as `user`, when given), with the
  # task's own files: what it printed, then its result.
  defp run_task(c, overrides, user) do
    files = if user, do: readable_copies(task_files(), c.case_dir), else: task_files()
    args = Path.join(c.case_dir, "args")
    native = Path.join(c.case_dir, "native")
    File.write!(args, :erlang.term_to_binary({native, c.dest, opts(c, overrides)}))
    File.chmod!(args, 0o644)

    script = """
    Mix.start()
    files = #{inspect(files)}
    Mix.HrwNative.Download.keep(for f <- files, pair <- Code.require_file(f), do: pair)
    {native, dest, opts} = :erlang.binary_to_term(File.read!(#{inspect(args)}))
    IO.write(inspect(Mix.Tasks.Compile.HrwNative.obtain(native, dest, :prod, opts)))
    """

    as =
      if user, do: ["setpriv", "--reuid=#{user}", "--regid=#{user}", "--clear-groups"], else: []

    [cmd | rest] = as ++ ["elixir", "-e", script]
    {said, 0} = System.cmd(cmd, rest, env: [{"HOME", c.case_dir}], cd: c.case_dir)
    said
  end

  test "under umask 000, every folder the task creates and the library get explicit modes", c do
    # The task's own files (mix.exs's list) in a VM started with umask 000.
    files = task_files()

    cache = Path.join([c.case_dir, "x", "y", "cache"])
    args = Path.join(c.case_dir, "args")
    native = Path.join(c.case_dir, "native")
    File.write!(args, :erlang.term_to_binary({native, c.dest, opts(c, cache_dir: cache)}))

    script = """
    Mix.start()
    Mix.HrwNative.Download.keep(for f <- #{inspect(files)}, pair <- Code.require_file(f), do: pair)
    {native, dest, opts} = :erlang.binary_to_term(File.read!(#{inspect(args)}))
    IO.write(inspect(Mix.Tasks.Compile.HrwNative.obtain(native, dest, :prod, opts)))
    """

    assert {said, 0} = System.cmd("sh", ["-c", "umask 000 && exec elixir -e \"$0\"", script])
    assert said =~ ~r/\AInstalled the precompiled hrw NIF .*\n:ok\z/

    modes =
      for path <-
            [c.dest, Path.dirname(c.dest), Path.join(c.case_dir, "priv")] ++
              [
                cache,
                Path.dirname(cache),
                Path.join(c.case_dir, "x"),
                cached(%{c | cache_dir: cache})
              ],
          do: {Path.relative_to(path, c.case_dir), Bitwise.band(File.stat!(path).mode, 0o777)}

    assert modes == [
             {"priv/native/libhrw_nif.so", 0o644},
             {"priv/native", 0o755},
             {"priv", 0o755},
             {"x/y/cache", 0o700},
             {"x/y", 0o700},
             {"x", 0o700},
             {"x/y/cache/#{c.fixture.name}", 0o644}
           ]
  end

  test "without an absolute HOME or XDG_CACHE_HOME there is no cache, and the download works",
       c do
    assert Mix.Tasks.Compile.HrwNative.options(%{"HOME" => "relative"}).cache_dir == nil
    assert obtain(c, cache_dir: nil) == :ok
    assert File.read!(c.dest) == c.fixture.library
  end

  @tag :needs_root
  test "an entry of another user's in our cache folder is not read, and is replaced", c do
    File.mkdir_p!(c.cache_dir)
    File.chmod!(c.cache_dir, 0o700)
    File.write!(cached(c), "planted by another user")
    File.chown!(cached(c), @nobody)

    assert obtain(c, []) == :ok
    assert_received {:mix_shell, :error, [warning]}
    assert warning =~ "not reading the cache entry #{cached(c)} belongs to user 65534"
    assert File.read!(cached(c)) == c.fixture.data
    assert File.read!(c.dest) == c.fixture.library
  end

  test "what is opened is checked as opened: a FIFO or device swapped in never blocks", c do
    File.mkdir_p!(c.cache_dir)
    regular = Path.join(c.cache_dir, "regular")
    File.write!(regular, "entry")
    fifo = Path.join(c.cache_dir, "fifo")
    {_, 0} = System.cmd("mkfifo", [fifo])
    seen = File.lstat!(regular)
    alias Mix.HrwNative.SafeFile

    # lstat saw a regular file; a FIFO or a device is there when it is opened.
    assert SafeFile.read_opened(fifo, seen, 100) == {:error, :changed}
    assert SafeFile.read_opened("/dev/null", seen, 100) == {:error, :changed}
    # The same inode, but not a regular file after all.
    as_if_regular = %{File.lstat!(fifo) | type: :regular}

    assert SafeFile.read_opened(fifo, as_if_regular, 100) ==
             {:error, "#{fifo} is a FIFO, socket or device, not a regular file"}

    assert SafeFile.read_opened(regular, seen, 100) == {:ok, "entry"}

    # Planted at the entry's name, lstat already refuses them.
    for planted <- [fifo] do
      File.rename!(planted, cached(c))
      message = mix_error(fn -> obtain(c, cargo: c.fake_cargo) end)

      assert message =~
               "the cache entry #{cached(c)} is a FIFO, socket or device, not a regular file",
             message
    end
  end

  test "a relative XDG_CACHE_HOME is ignored; an absolute one is used" do
    options = &Mix.Tasks.Compile.HrwNative.options/1

    assert options.(%{"XDG_CACHE_HOME" => "relcache", "HOME" => "/home/u"}).cache_dir ==
             "/home/u/.cache/hrw"

    assert options.(%{"XDG_CACHE_HOME" => "/var/xdg", "HOME" => "/home/u"}).cache_dir ==
             "/var/xdg/hrw"

    assert options.(%{"HOME" => "/home/u"}).cache_dir == "/home/u/.cache/hrw"

    assert options.(%{"XDG_CACHE_HOME" => "rel", "HRW_NATIVE_CACHE_DIR" => "/c"}).cache_dir ==
             "/c"
  end

  test "an archive that ends before its gzip trailer is refused, whatever its checksum", c do
    data = c.fixture.data

    for cut <- [4, 8, div(byte_size(data), 2)] do
      truncated = binary_part(data, 0, byte_size(data) - cut)
      sums = %{c.fixture.name => Mix.HrwNative.Checksums.checksum(truncated)}
      File.write!(c.checksum_file, Mix.HrwNative.Checksums.text(sums))
      mirror = serve(routes: %{("/" <> c.fixture.name) => {200, [], truncated}})
      File.rm_rf!(c.cache_dir)
      message = mix_error(fn -> obtain(c, base_url: mirror, cargo: c.fake_cargo) end)

      assert message =~ "#{c.fixture.name} is truncated or corrupt" or
               message =~ "is not a gzipped tar archive",
             message
    end

    refute File.exists?(c.dest)
    assert cargo_args(c) == nil
  end

  test "a failed install says why in words", c do
    # The destination is a folder with something in it: the rename over it fails.
    File.mkdir_p!(Path.join(c.dest, "inside"))
    message = mix_error(fn -> obtain(c, []) end)
    assert message =~ "cannot install the hrw NIF at #{c.dest}: ", message
    refute message =~ ~r/:e[a-z]+\b/, message
  end

  @tag :needs_root
  test "an install folder that others can write and that is not ours is refused", c do
    others_folder(Path.dirname(c.dest))

    for overrides <- [[], [force_build: true, cargo: c.fake_cargo]] do
      message = mix_error(fn -> obtain(c, overrides) end)
      assert message =~ "cannot install the hrw NIF: #{Path.dirname(c.dest)} can be written"
    end

    assert File.ls!(Path.dirname(c.dest)) == []
  end

  test "a cache entry over the size limit, or not a regular file, is refused unread", c do
    File.mkdir_p!(c.cache_dir)
    # Sparse: 100 MiB that take no disk and must never be read.
    {:ok, fd} = :file.open(cached(c), [:write, :raw])
    {:ok, _} = :file.position(fd, 100 * 1024 * 1024)
    :ok = :file.write(fd, "x")
    :ok = :file.close(fd)

    message = mix_error(fn -> obtain(c, cargo: c.fake_cargo) end)
    assert message =~ "the cache entry #{cached(c)} is 104857601 bytes, over the"
    assert File.exists?(cached(c))

    File.rm!(cached(c))
    File.ln_s!(c.fixture.archive, cached(c))
    message = mix_error(fn -> obtain(c, cargo: c.fake_cargo) end)
    assert message =~ "the cache entry #{cached(c)} is a symlink, not a regular file"
    refute File.exists?(c.dest)
    assert cargo_args(c) == nil
  end

  test "a tampered cache entry stops the build, mirror down or not, and is kept", c do
    File.mkdir_p!(c.cache_dir)
    File.write!(cached(c), "tampered")

    for base <- [down(), c.base_url] do
      message = mix_error(fn -> obtain(c, base_url: base, cargo: c.fake_cargo) end)
      assert message =~ "#{c.fixture.name} from the cache (#{cached(c)}) (8 bytes) has sha256:"
      assert message =~ "but the checksum file #{c.checksum_file} expects"
    end

    assert File.read!(cached(c)) == "tampered"
    refute File.exists?(c.dest)
    assert cargo_args(c) == nil
  end

  @library_limit 64 * 1024 * 1024

  test "an archive inflating past the library limit is refused while inflating", c do
    size = @library_limit + 1024 * 1024
    bomb = bomb(Mix.HrwNative.Target.library_name(c.fixture.name), size)
    assert byte_size(bomb) < Mix.HrwNative.Archive.max_archive_bytes()
    sums = %{c.fixture.name => Mix.HrwNative.Checksums.checksum(bomb)}
    File.write!(c.checksum_file, Mix.HrwNative.Checksums.text(sums))
    mirror = serve(routes: %{("/" <> c.fixture.name) => {200, [], bomb}})

    # Downloaded, then from the cache.
    for base <- [mirror, down()] do
      if base == down(), do: File.write!(cached(c), bomb)
      message = mix_error(fn -> obtain(c, base_url: base, cargo: c.fake_cargo) end)
      assert message =~ "#{c.fixture.name} inflates to more than", message
      assert message =~ "over the #{@library_limit}-byte limit"
    end

    assert cargo_args(c) == nil
    assert Mix.HrwNative.Archive.max_library_bytes() == @library_limit
  end

  test "a checksum file with a duplicate key, or that is not one, is refused by name", c do
    sum = Mix.HrwNative.Checksums.checksum(c.fixture.data)
    other = Mix.HrwNative.Checksums.checksum("other")

    File.write!(c.checksum_file, """
    %{#{inspect(c.fixture.name)} => #{inspect(sum)}, #{inspect(c.fixture.name)} => #{inspect(other)}}
    """)

    message = mix_error(fn -> obtain(c, cargo: c.fake_cargo) end)

    assert message =~
             "the checksum file #{c.checksum_file} lists #{inspect(c.fixture.name)} more than once"

    File.write!(c.checksum_file, "%{")
    message = mix_error(fn -> obtain(c, cargo: c.fake_cargo) end)
    assert message =~ "the checksum file #{c.checksum_file} is not a map"

    File.write!(c.checksum_file, Mix.HrwNative.Checksums.text(%{}))
    File.rm_rf!(c.dest)
    assert obtain(c, cargo: c.fake_cargo) == :ok
    assert_received {:mix_shell, :info, ["No precompiled hrw NIF for " <> why]}

    assert why =~
             "is listed in the checksum file #{c.checksum_file} (it lists none: no archive " <>
               "is published for this version)"

    refute File.exists?(cached(c))

    # A target it does not list: the message names those it does.
    sums = %{c.fixture.name => Mix.HrwNative.Checksums.checksum(c.fixture.data)}
    File.write!(c.checksum_file, Mix.HrwNative.Checksums.text(sums))
    {:ok, host} = Mix.HrwNative.Target.host_target()
    other = {:ok, "riscv64gc-unknown-linux-gnu"}
    message = mix_error(fn -> obtain(c, target: other) end)
    assert message =~ "(it lists archives for #{host} (NIF 2.16))", message
  end
end
