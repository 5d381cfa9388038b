defmodule Mix.HrwNative.SettingsTest do
  # The HRW_NATIVE_* settings, checked before anything is done, and
  # HRW_NATIVE_TARGET: a library for another target is built for it with
  # `cargo build --target`, or nothing is installed.
  use ExUnit.Case, async: false
  @moduletag :cpu_dependent

  import HRW.Test.NativeMirror

  alias Mix.HrwNative.Precompiled
  alias Mix.Tasks.Compile.HrwNative

  # A target other than this machine's, on every CPU: HRW_NATIVE_TARGET naming the
  # host's own triple is no cross build (options/1 then treats it as unset).
  @cross (case Mix.HrwNative.Target.host_target() do
            {:ok, "aarch64-unknown-linux-gnu"} -> "x86_64-unknown-linux-gnu"
            _ -> "aarch64-unknown-linux-gnu"
          end)

  setup do
    Mix.shell(Mix.Shell.Process)
    on_exit(fn -> Mix.shell(Mix.Shell.IO) end)
    :ok
  end

  test "a bad value raises naming its variable and what it accepts" do
    tmp = tmp_dir!()
    not_pem = Path.join(tmp, "not.pem")
    File.write!(not_pem, "hello")

    for {name, value, accepted} <- [
          {"HRW_NATIVE_TIMEOUT_MS", "5000000000",
           "a whole number of milliseconds from 1 to 3600000"},
          {"HRW_NATIVE_TIMEOUT_MS", "0", "from 1 to 3600000"},
          {"HRW_NATIVE_TIMEOUT_MS", "soon", "from 1 to 3600000"},
          {"HRW_NATIVE_BASE_URL", "http://example.com/hrw", "an https URL (plain http only to"},
          {"HRW_NATIVE_BASE_URL", "ftp://127.0.0.1/hrw", "an https URL"},
          {"HRW_NATIVE_BASE_URL", "http://127.0.0.1:99999/hrw", "not a number from 1 to 65535"},
          {"HRW_NATIVE_BASE_URL", "https://mirror.example:-1/hrw",
           "its value has a port that is not a number from 1 to 65535"},
          {"HRW_NATIVE_BASE_URL", "https://u:MIRROR@PW@mirror.example/hrw",
           "its value has a port"},
          {"HRW_NATIVE_BASE_URL", "https://u:PW/x@mirror.example/hrw",
           "its value has a port that is not a number from 1 to 65535"},
          {"HRW_NATIVE_BASE_URL", "https://\xff.example/hrw", "a non-ASCII byte"},
          {"HRW_NATIVE_BASE_URL", "https://mirror.example/\e[2J", "a control character"},
          {"HRW_NATIVE_CACHE_DIR", "relative/cache", "an absolute path"},
          {"HRW_NATIVE_CACERTS_PATH", Path.join(tmp, "none.pem"), "does not exist"},
          {"HRW_NATIVE_CACERTS_PATH", not_pem, "holds no PEM certificate"},
          {"HRW_NATIVE_TARGET", "x86_64 linux", "a Rust target triple"},
          {"HRW_NATIVE_BUILD", "yes", "1 or true (build), 0 or false"},
          {"HRW_NATIVE_TIMEOUT", "5000", "not a setting of hrw's (they are HRW_NATIVE_BASE_URL,"}
        ] do
      message = mix_error(fn -> HrwNative.options(%{name => value}) end)
      assert message =~ "#{name} must be ", message
      assert message =~ accepted, message
      if name == "HRW_NATIVE_BASE_URL", do: refute(message =~ ~r/PW|mirror\.example|hrw"/)
    end

    # Empty is unset.
    assert HrwNative.options(%{"HRW_NATIVE_TIMEOUT_MS" => ""}).timeout_ms ==
             Precompiled.default_timeout_ms()
  end

  test "good values are read" do
    refute HrwNative.options(%{}).force_build
    assert HrwNative.options(%{"HRW_NATIVE_BUILD" => "1"}).force_build
    assert HrwNative.options(%{"HRW_NATIVE_BUILD" => "true"}).force_build
    refute HrwNative.options(%{"HRW_NATIVE_BUILD" => "0"}).force_build
    assert HrwNative.options(%{"RUSTLER_PRECOMPILED_FORCE_BUILD_ALL" => "1"}).force_build

    Application.put_env(:hrw, :build_from_source, true)

    try do
      assert HrwNative.options(%{}).force_build
    after
      Application.delete_env(:hrw, :build_from_source)
    end

    opts =
      HrwNative.options(%{
        "HRW_NATIVE_BASE_URL" => "http://[::1]:9/m",
        "HRW_NATIVE_TIMEOUT_MS" => "3600000",
        "HRW_NATIVE_TARGET" => @cross,
        "HRW_NATIVE_CACHE_DIR" => "/var/cache/hrw"
      })

    assert {opts.base_url, opts.timeout_ms, opts.target, opts.cache_dir} ==
             {"http://[::1]:9/m", 3_600_000, {:ok, @cross}, "/var/cache/hrw"}

    {:ok, host} = Mix.HrwNative.Target.host_target()
    assert host != @cross
    assert HrwNative.options(%{"HRW_NATIVE_TARGET" => host})[:cross_target] == nil
    assert HrwNative.options(%{}).base_url == Mix.Project.config()[:hrw_native][:base_url]
  end

  # The compile task's options for HRW_NATIVE_TARGET=@cross, as options/1 reads
  # them, with no archive listed for it.
  defp cross_opts(c, overrides) do
    tmp = Path.dirname(c.case_dir)
    checksum_file = Path.join(tmp, "checksum.exs")
    File.write!(checksum_file, Mix.HrwNative.Checksums.text(%{}))

    %{"HRW_NATIVE_TARGET" => @cross}
    |> HrwNative.options()
    |> Map.merge(%{checksum_file: checksum_file, cache_dir: c.cache_dir, cargo: c.fake_cargo})
    |> Map.merge(Map.new(overrides))
  end

  defp cross_obtain(c, overrides \\ []),
    do: HrwNative.obtain(Path.join(c.case_dir, "native"), c.dest, :prod, cross_opts(c, overrides))

  test "another target is built for with cargo --target, or nothing is installed" do
    c = new_case(tmp_dir!())

    # Cargo cannot build for it (no standard library for the target): a clear error.
    File.write!(Path.join(c.case_dir, "cargo-status"), "101")
    message = mix_error(fn -> cross_obtain(c) end)
    assert message =~ "cargo build of hrw_nif failed (exit status 101"
    assert message =~ "--target #{@cross}"
    assert message =~ "Nothing was installed. A build for #{@cross} needs its standard library"
    assert ["--target", @cross] -- cargo_args(c) == []
    refute File.exists?(c.dest)

    # A cargo that ignores --target and reports a host library: refused.
    File.rm!(Path.join(c.case_dir, "cargo-status"))
    message = mix_error(fn -> cross_obtain(c) end)
    assert message =~ "cargo was asked to build for #{@cross} but reported"
    refute File.exists?(c.dest)

    # Where cargo puts a library for the target: installed.
    built = Path.join([c.case_dir, "target", @cross, "release", "libhrw_nif.so"])
    File.mkdir_p!(Path.dirname(built))
    File.write!(built, "built for #{@cross}")
    File.write!(Path.join(c.case_dir, "cargo-artifact"), built)
    assert cross_obtain(c) == :ok
    assert File.read!(c.dest) == "built for #{@cross}"

    # HRW_NATIVE_BUILD=1 takes the same path.
    File.rm!(c.dest)
    assert cross_obtain(c, force_build: true) == :ok
    assert ["--target", @cross] -- cargo_args(c) == []
  end

  # The real cargo, in the real crate: where rustc has no standard library for the
  # target (rustup cannot add one here), cargo fails early. Skipped, with its reason,
  # where that case cannot be made (the emulated legs of scripts/test-matrix run a
  # cross-building cargo wrapper and have no rustc).
  @real_cargo_skip (cond do
                      is_nil(System.find_executable("cargo")) or
                          is_nil(System.find_executable("rustc")) ->
                        "needs cargo and rustc on PATH"

                      true ->
                        {sysroot, 0} = System.cmd("rustc", ["--print", "sysroot"])
                        std = Path.join([String.trim(sysroot), "lib/rustlib", @cross, "lib"])
                        File.dir?(std) && "rustc has a standard library for #{@cross}"
                    end)

  if @real_cargo_skip, do: @tag(skip: @real_cargo_skip)
  @tag timeout: HRW.TestTimeouts.ms(600_000)
  test "the real cargo, asked for a target it lacks, fails and installs nothing" do
    c = new_case(tmp_dir!())
    native = Path.expand("../../native", __DIR__)
    # The task lets cargo's errors through to the terminal: here they go to a file,
    # so a passing run prints none.
    errors = Path.join(c.case_dir, "cargo-errors")
    cargo = Path.join(c.case_dir, "cargo-quiet")

    File.write!(
      cargo,
      "#!/bin/sh\nexec '#{System.find_executable("cargo")}' \"$@\" 2>'#{errors}'\n"
    )

    File.chmod!(cargo, 0o755)
    opts = cross_opts(c, cargo: cargo)
    message = mix_error(fn -> HrwNative.obtain(native, c.dest, :prod, opts) end)
    assert message =~ "cargo build of hrw_nif failed"
    assert message =~ "--target #{@cross}"
    assert File.read!(errors) =~ @cross
    refute File.exists?(c.dest)
  end
end
