defmodule Mix.HrwNative.PrecompiledInstallTest do
  # The precompiled path end to end, on loopback only: `mix hrw.native.package`
  # builds the host's archive from a copy of exactly the package's files, an OTP
  # :inets httpd on 127.0.0.1 serves it, and the compile task installs, falls
  # back or refuses. Fresh `mix new` apps with no cargo on PATH depend on the copy
  # by path. Hostile mirrors, files and settings: download_test.exs,
  # https_test.exs, cache_test.exs and settings_test.exs, beside this file.
  use ExUnit.Case, async: false
  @moduletag :integration
  alias Mix.Tasks.Compile.HrwNative
  alias Mix.Tasks.Hrw.Native.Checksum
  alias Mix.Tasks.Hrw.Native.Package

  @moduletag timeout: HRW.TestTimeouts.ms(600_000)
  @repo Path.expand("../..", __DIR__)

  # An httpd module that appends each request's path to a log, then lets mod_get
  # answer: the test reads the log to count downloads.
  defmodule RequestLog do
    @moduledoc false
    require Record
    Record.defrecordp(:mod, Record.extract(:mod, from_lib: "inets/include/httpd.hrl"))

    @doc false
    # httpd calls `do/1`, a name Elixir reserves.
    def unquote(:do)(mod(request_uri: uri, data: data)) do
      File.write!(:persistent_term.get(__MODULE__), [uri, ?\n], [:append])
      {:proceed, data}
    end
  end

  setup_all do
    # A stable place, so that cargo finds the copy's build fresh on the next run
    # (file times are kept); the shared target folder keeps the registry crates.
    root = Path.join(@repo, "_build/hrw-precompiled-test")
    package = Path.join(root, "package")
    copy_package(package)
    target_dir = System.get_env("CARGO_TARGET_DIR") || Path.join(@repo, "native/target")
    cargo_env = [{"CARGO_TARGET_DIR", target_dir}]

    tmp = Path.join(System.tmp_dir!(), "hrw-precompiled-#{System.unique_integer([:positive])}")
    File.mkdir_p!(tmp)
    on_exit(fn -> File.rm_rf!(tmp) end)

    mirror = Path.join(tmp, "mirror")
    good = Path.join(mirror, "good")

    archive =
      Package.package(
        native: Path.join(package, "native"),
        out: good,
        version: Mix.Project.config()[:version],
        env: cargo_env
      )

    name = Path.basename(archive)

    checksums =
      Checksum.write(good, Path.join(package, Mix.HrwNative.Checksums.file_name()), version())

    assert Map.keys(checksums) == [name]

    log = Path.join(tmp, "requests.log")
    File.write!(log, "")
    :persistent_term.put(RequestLog, log)
    {:ok, _} = Application.ensure_all_started(:inets)

    {:ok, httpd} =
      :inets.start(:httpd,
        port: 0,
        bind_address: {127, 0, 0, 1},
        server_name: ~c"hrw-test-mirror",
        server_root: String.to_charlist(tmp),
        document_root: String.to_charlist(mirror),
        modules: [RequestLog, :mod_get]
      )

    on_exit(fn -> :inets.stop(:httpd, httpd) end)
    [port: port] = :httpd.info(httpd, [:port])

    %{
      tmp: tmp,
      package: package,
      mirror: mirror,
      archive: archive,
      name: name,
      log: log,
      target_dir: target_dir,
      base: "http://127.0.0.1:#{port}",
      library:
        archive
        |> File.read!()
        |> Mix.HrwNative.Archive.verify(name, checksums[name], "")
        |> elem(1)
    }
  end

  defp version, do: Mix.Project.config()[:version]

  # Exactly the files `package[:files]` selects, as ./scripts/check-package copies
  # them, with their modification times (cargo compares them).
  defp copy_package(dest) do
    File.rm_rf!(dest)

    for entry <- Mix.Project.config()[:package][:files],
        path <- Path.wildcard(Path.join(@repo, entry)),
        file <- walk(path) do
      target = Path.join(dest, Path.relative_to(file, @repo))
      File.mkdir_p!(Path.dirname(target))
      File.cp!(file, target)
      File.touch!(target, File.stat!(file, time: :posix).mtime)
    end
  end

  defp walk(path) do
    if File.dir?(path),
      do: path |> File.ls!() |> Enum.flat_map(&walk(Path.join(path, &1))),
      else: [path]
  end

  defp requests(ctx), do: ctx.log |> File.read!() |> String.split("\n", trim: true)

  # -- the compile task's decision, in this VM, against loopback servers ----------

  setup ctx do
    # The task's messages come to the test process (and are asserted on).
    Mix.shell(Mix.Shell.Process)
    on_exit(fn -> Mix.shell(Mix.Shell.IO) end)

    if Map.has_key?(ctx, :tmp) do
      dir = Path.join(ctx.tmp, "case-#{System.unique_integer([:positive])}")
      File.mkdir_p!(Path.join(dir, "native"))
      # A stand-in cargo that says it built a library, and leaves a mark.
      cargo = Path.join(dir, "cargo")
      built = Path.join(dir, "built.so")
      File.write!(built, "built by cargo")

      File.write!(cargo, """
      #!/bin/sh
      touch "#{dir}/cargo-ran"
      echo '{"reason":"compiler-artifact","target":{"kind":["cdylib"],"name":"hrw_nif"},"filenames":["#{built}"]}'
      """)

      File.chmod!(cargo, 0o755)
      {:ok, case_dir: dir, fake_cargo: cargo, dest: Path.join(dir, "priv/native/libhrw_nif.so")}
    else
      :ok
    end
  end

  defp opts(ctx, overrides) do
    {:ok, target} = Mix.HrwNative.Target.host_target()

    Map.merge(
      %{
        version: version(),
        checksum_file: Path.join(ctx.package, Mix.HrwNative.Checksums.file_name()),
        base_url: ctx.base <> "/good",
        cache_dir: Path.join(ctx.case_dir, "cache"),
        target: {:ok, target},
        nif_version: {:ok, "2.16"},
        vm_nif_version: "2.16",
        architecture: "test",
        timeout_ms: 30_000,
        force_build: false,
        cargo: nil
      },
      Map.new(overrides)
    )
  end

  defp obtain(ctx, overrides),
    do: HrwNative.obtain(Path.join(ctx.case_dir, "native"), ctx.dest, :prod, opts(ctx, overrides))

  defp cargo_ran?(ctx), do: File.exists?(Path.join(ctx.case_dir, "cargo-ran"))

  # A mirror whose archive under the right name is `data`, with a checksum file
  # that lists `sum` for it (the right one for `data` unless given).
  defp bad_mirror(ctx, dir, data, sum \\ nil) do
    File.mkdir_p!(Path.join(ctx.mirror, dir))
    File.write!(Path.join([ctx.mirror, dir, ctx.name]), data)
    checksum_file = Path.join(ctx.case_dir, "checksum.exs")
    sums = %{ctx.name => sum || Mix.HrwNative.Checksums.checksum(data)}
    File.write!(checksum_file, Mix.HrwNative.Checksums.text(sums))
    [base_url: "#{ctx.base}/#{dir}", checksum_file: checksum_file]
  end

  test "a verified archive is installed, and cached for the next project", ctx do
    assert obtain(ctx, []) == :ok
    assert File.read!(ctx.dest) == ctx.library
    assert File.exists?(Path.join([ctx.case_dir, "cache", ctx.name]))
    before = length(requests(ctx))

    # Another project (another destination), the mirror unreachable: the cache serves.
    dest = Path.join(ctx.case_dir, "other/libhrw_nif.so")
    opts = opts(ctx, base_url: "http://127.0.0.1:1/none")
    assert HrwNative.obtain(ctx.case_dir, dest, :prod, opts) == :ok
    assert File.read!(dest) == ctx.library
    assert length(requests(ctx)) == before
    refute cargo_ran?(ctx)
  end

  test "a wrong checksum is refused, nothing installed, even with cargo", ctx do
    opts =
      bad_mirror(
        ctx,
        "wrong-sum",
        File.read!(ctx.archive),
        Mix.HrwNative.Checksums.checksum("other")
      )

    assert_raise Mix.Error,
                 ~r/refusing the precompiled hrw NIF: .* has sha256:.* but .* expects/s,
                 fn ->
                   obtain(ctx, [{:cargo, ctx.fake_cargo} | opts])
                 end

    refute File.exists?(ctx.dest)
    refute File.exists?(Path.join([ctx.case_dir, "cache", ctx.name]))
    refute cargo_ran?(ctx)
  end

  test "an archive holding another file beside the library is refused", ctx do
    dir = Path.join(ctx.case_dir, "extra")
    File.mkdir_p!(dir)
    library = Path.join(dir, Mix.HrwNative.Target.library_name(ctx.name))
    File.write!(library, ctx.library)
    File.write!(Path.join(dir, "README"), "surprise")
    evil = Path.join(dir, ctx.name)

    :ok =
      :erl_tar.create(
        String.to_charlist(evil),
        [
          {String.to_charlist(Path.basename(library)), String.to_charlist(library)},
          {~c"README", String.to_charlist(Path.join(dir, "README"))}
        ],
        [:compressed]
      )

    opts = bad_mirror(ctx, "extra", File.read!(evil))

    assert_raise Mix.Error,
                 ~r/must hold exactly one file, #{Regex.escape(Path.basename(library))}; it holds: .*README/,
                 fn ->
                   obtain(ctx, [{:cargo, ctx.fake_cargo} | opts])
                 end

    refute File.exists?(ctx.dest)
    refute cargo_ran?(ctx)
  end

  test "a 404 builds from source with cargo, or says how to without it", ctx do
    base = ctx.base <> "/empty"

    assert_raise Mix.Error,
                 ~r/no precompiled hrw NIF for .*-.* \(NIF 2\.16\): .* answered HTTP 404.*put cargo/s,
                 fn -> obtain(ctx, base_url: base) end

    refute File.exists?(ctx.dest)
    assert obtain(ctx, base_url: base, cargo: ctx.fake_cargo) == :ok
    assert File.read!(ctx.dest) == "built by cargo"
    assert_received {:mix_shell, :info, ["No precompiled hrw NIF for " <> why]}
    assert why =~ "answered HTTP 404): built it with cargo"
  end

  test "an unknown target names itself; cargo builds it from source", ctx do
    target = {:ok, "riscv64gc-unknown-linux-gnu"}

    assert_raise Mix.Error,
                 ~r/no precompiled hrw NIF for riscv64gc-unknown-linux-gnu \(NIF 2\.16\): no precompiled archive libhrw_nif-v.*-riscv64gc-unknown-linux-gnu.so.tar.gz is listed/,
                 fn -> obtain(ctx, target: target) end

    refute cargo_ran?(ctx)
    assert obtain(ctx, target: target, cargo: ctx.fake_cargo) == :ok
    assert File.read!(ctx.dest) == "built by cargo"
    assert requests(ctx) |> Enum.filter(&(&1 =~ "riscv64")) == []
  end

  test "plain http to anything but loopback is refused before any connection", ctx do
    for url <- ["http://example.com/hrw", "http://10.0.0.1/hrw", "ftp://127.0.0.1/hrw"] do
      assert_raise Mix.Error, ~r/refusing to download from .* is not an https URL/, fn ->
        obtain(ctx, base_url: url, cargo: ctx.fake_cargo)
      end
    end

    refute cargo_ran?(ctx)
  end

  test "a request to build from source uses cargo even when an archive exists", ctx do
    assert obtain(ctx, force_build: true, cargo: ctx.fake_cargo) == :ok
    assert File.read!(ctx.dest) == "built by cargo"

    assert_raise Mix.Error, ~r/set to build its NIF from source .* needs cargo/, fn ->
      obtain(ctx, force_build: true)
    end
  end

  # -- fresh applications, in other OS processes ----------------------------------

  # PATH without any folder that holds cargo (rustup puts it in ~/.cargo/bin).
  defp path_without_cargo do
    path =
      System.get_env("PATH")
      |> String.split(":")
      |> Enum.reject(&File.exists?(Path.join(&1, "cargo")))
      |> Enum.join(":")

    assert System.find_executable("mix")
           |> Path.dirname()
           |> then(&(&1 in String.split(path, ":")))

    path
  end

  defp app_env(ctx, extra) do
    [
      {"MIX_ENV", "prod"},
      {"PATH", path_without_cargo()},
      {"HRW_NATIVE_BASE_URL", ctx.base <> "/good"},
      {"HRW_NATIVE_CACHE_DIR", Path.join(ctx.tmp, "user-cache")},
      {"CARGO_TARGET_DIR", ctx.target_dir}
    ] ++
      Enum.map(
        ~w(HRW_NATIVE_BUILD RUSTLER_PRECOMPILED_FORCE_BUILD_ALL HRW_NATIVE_TARGET
           HRW_NATIVE_TIMEOUT_MS MIX_BUILD_PATH MIX_BUILD_ROOT MIX_DEPS_PATH MIX_EXS MIX_TARGET),
        &{&1, nil}
      ) ++ extra
  end

  defp sh!(cmd, args, dir, env) do
    {out, status} = System.cmd(cmd, args, cd: dir, env: env, stderr_to_stdout: true)
    assert status == 0, "#{cmd} #{Enum.join(args, " ")} in #{dir} exited #{status}:\n#{out}"
    out
  end

  defp new_app(ctx, name, env) do
    sh!("mix", ["new", name], ctx.tmp, env)
    dir = Path.join(ctx.tmp, name)
    mix_exs = Path.join(dir, "mix.exs")
    text = File.read!(mix_exs)

    patched =
      String.replace(
        text,
        "defp deps do\n    [",
        "defp deps do\n    [{:hrw, path: #{inspect(ctx.package)}},"
      )

    assert patched != text
    File.write!(mix_exs, patched)
    dir
  end

  @owner ~S|IO.inspect(HRW.owner("user:42", ["cache-1", "cache-2", "cache-3"]))|

  test "fresh apps without cargo get the precompiled NIF, share the cache, and can force a build",
       ctx do
    expected = inspect(HRW.owner("user:42", ["cache-1", "cache-2", "cache-3"]))
    env = app_env(ctx, [])
    before = requests(ctx)

    # 1. No cargo on PATH: compiles, releases, and the release answers.
    assert {_, status} = System.cmd("sh", ["-c", "command -v cargo"], env: env)
    assert status != 0, "cargo is still on the apps' PATH"
    one = new_app(ctx, "one", env)
    out = sh!("mix", ["release", "--quiet"], one, env)
    assert out =~ "Installed the precompiled hrw NIF #{ctx.name}"
    assert requests(ctx) -- before == ["/good/" <> ctx.name]

    assert sh!(Path.join(one, "_build/prod/rel/one/bin/one"), ["eval", @owner], one, env) ==
             expected <> "\n"

    installed =
      Path.join(one, "_build/prod/rel/one/lib/hrw-#{version()}/priv/native/libhrw_nif.so")

    assert File.read!(installed) == ctx.library

    # 2. A second project takes the archive from the cache: no request.
    two = new_app(ctx, "two", env)
    out = sh!("mix", ["run", "-e", @owner], two, env)
    assert out =~ "from " <> Path.join([ctx.tmp, "user-cache", ctx.name])
    assert String.ends_with?(out, expected <> "\n")
    assert requests(ctx) -- before == ["/good/" <> ctx.name]

    # 3. HRW_NATIVE_BUILD=1 builds with cargo although the archive is cached and served.
    shims = Path.join(ctx.tmp, "shims")
    File.mkdir_p!(shims)
    cargo_log = Path.join(ctx.tmp, "cargo.log")

    File.write!(Path.join(shims, "cargo"), """
    #!/bin/sh
    echo "$@" >> "#{cargo_log}"
    exec "#{System.find_executable("cargo")}" "$@"
    """)

    File.chmod!(Path.join(shims, "cargo"), 0o755)

    forced =
      app_env(ctx, [{"HRW_NATIVE_BUILD", "1"}, {"PATH", shims <> ":" <> path_without_cargo()}])

    out = sh!("mix", ["deps.compile", "hrw"], two, forced)
    refute out =~ "Installed the precompiled"
    assert File.read!(cargo_log) =~ "build -p hrw_nif"
    assert requests(ctx) -- before == ["/good/" <> ctx.name]
    assert String.ends_with?(sh!("mix", ["run", "-e", @owner], two, forced), expected <> "\n")
  end
end
