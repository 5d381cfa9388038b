defmodule Mix.Tasks.Compile.HrwNativeTest do
  # The cargo compiler task, driven by a stand-in `cargo` that prints prepared JSON
  # messages: where cargo says the library is decides what is installed.
  use ExUnit.Case, async: true

  alias Mix.Tasks.Compile.HrwNative

  setup do
    dir = Path.join(System.tmp_dir!(), "hrw-compile-test-#{System.unique_integer([:positive])}")
    native = Path.join(dir, "native")
    File.mkdir_p!(native)
    on_exit(fn -> File.rm_rf!(dir) end)
    # The task says "Building the hrw NIF with cargo" through Mix.shell(), which
    # writes to this process's group leader: kept out of the test output.
    {:ok, quiet} = StringIO.open("")
    Process.group_leader(self(), quiet)

    cargo = Path.join(dir, "cargo")

    File.write!(cargo, """
    #!/bin/sh
    printf '%s\\n' "$@" > args
    cat stdout.json
    exit "$(cat status)"
    """)

    File.chmod!(cargo, 0o755)

    %{
      dir: dir,
      native: native,
      cargo: cargo,
      dest: Path.join([dir, "app", "priv", "libhrw_nif.so"])
    }
  end

  defp cargo_reports(native, status, messages) do
    File.write!(Path.join(native, "status"), Integer.to_string(status))
    File.write!(Path.join(native, "stdout.json"), Enum.join(messages, "\n") <> "\n")
  end

  defp artifact(files, name \\ "hrw_nif", kind \\ "cdylib") do
    files = Enum.map_join(files, ",", &~s("#{&1}"))

    ~s({"reason":"compiler-artifact","package_id":"x","target":{"kind":["#{kind}"],) <>
      ~s("crate_types":["#{kind}"],"name":"#{name}"},"profile":{"opt_level":"3"},) <>
      ~s("features":[],"filenames":[#{files}],"executable":null,"fresh":false})
  end

  @finished ~s({"reason":"build-finished","success":true})

  test "installs the library cargo reports, not a stale one in native/target", ctx do
    # What CARGO_TARGET_DIR or build.target-dir does: the artifact lives elsewhere.
    stale = Path.join([ctx.native, "target", "release", "libhrw_nif.so"])
    File.mkdir_p!(Path.dirname(stale))
    File.write!(stale, "stale library")
    built = Path.join([ctx.dir, "elsewhere", "release", "libhrw_nif.so"])
    File.mkdir_p!(Path.dirname(built))
    File.write!(built, "fresh library")

    other = artifact([Path.join(ctx.dir, "libhrw_core.rlib")], "hrw_core", "lib")
    cargo_reports(ctx.native, 0, [other, artifact([built]), @finished])

    assert HrwNative.build(ctx.native, ctx.dest, :test, ctx.cargo) == :ok
    assert File.read!(ctx.dest) == "fresh library"

    args = ctx.native |> Path.join("args") |> File.read!() |> String.split("\n", trim: true)
    assert ["build", "-p", "hrw_nif", "--message-format=json-render-diagnostics" | _] = args
    assert "--release" in args
  end

  test "an unchanged library is a no-op; a changed one replaces the file, never its bytes",
       ctx do
    built = Path.join(ctx.dir, "libhrw_nif.so")
    File.write!(built, "version 1")
    cargo_reports(ctx.native, 0, [artifact([built]), @finished])

    assert HrwNative.build(ctx.native, ctx.dest, :prod, ctx.cargo) == :ok
    assert HrwNative.build(ctx.native, ctx.dest, :prod, ctx.cargo) == :noop

    # A VM that loaded version 1 maps that file: it must stay as it was.
    loaded = ctx.dest <> ".loaded"
    :ok = File.ln(ctx.dest, loaded)
    File.write!(built, "version 2")

    assert HrwNative.build(ctx.native, ctx.dest, :prod, ctx.cargo) == :ok
    assert File.read!(ctx.dest) == "version 2"
    assert File.read!(loaded) == "version 1"
  end

  test "Windows' extra files next to the dll are not taken for the library", ctx do
    dll = Path.join(ctx.dir, "hrw_nif.dll")
    File.write!(dll, "dll")
    files = [dll, Path.join(ctx.dir, "hrw_nif.dll.lib"), Path.join(ctx.dir, "hrw_nif.pdb")]
    cargo_reports(ctx.native, 0, [artifact(files), @finished])

    assert HrwNative.build(ctx.native, ctx.dest, :prod, ctx.cargo) == :ok
    assert File.read!(ctx.dest) == "dll"
  end

  test "a failed cargo build raises and installs nothing", ctx do
    cargo_reports(ctx.native, 101, [~s({"reason":"build-finished","success":false})])

    assert_raise Mix.Error, ~r/cargo build of hrw_nif failed \(exit status 101/, fn ->
      HrwNative.build(ctx.native, ctx.dest, :prod, ctx.cargo)
    end

    refute File.exists?(ctx.dest)
  end

  test "no cdylib artifact in cargo's messages raises", ctx do
    cargo_reports(ctx.native, 0, ["not json", "{broken", @finished])

    assert_raise Mix.Error, ~r/reported no cdylib artifact for hrw_nif \(1 JSON messages/, fn ->
      HrwNative.build(ctx.native, ctx.dest, :prod, ctx.cargo)
    end
  end

  test "an artifact whose file is missing raises naming the path", ctx do
    missing = Path.join([ctx.dir, "gone", "libhrw_nif.so"])
    cargo_reports(ctx.native, 0, [artifact([missing]), @finished])

    assert_raise Mix.Error, ~r/at #{Regex.escape(missing)}, but there is no file there/, fn ->
      HrwNative.build(ctx.native, ctx.dest, :prod, ctx.cargo)
    end
  end

  test "an artifact with no loadable library raises listing its files", ctx do
    cargo_reports(ctx.native, 0, [artifact(["/x/libhrw_nif.rlib"]), @finished])

    assert_raise Mix.Error, ~r/found 0: \/x\/libhrw_nif.rlib/, fn ->
      HrwNative.build(ctx.native, ctx.dest, :prod, ctx.cargo)
    end
  end
end
