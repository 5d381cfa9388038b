defmodule Mix.Tasks.Compile.HrwNative do
  @shortdoc "Builds the hrw NIF with cargo and installs it into priv/native"
  @moduledoc """
  Builds `native/hrw_nif` in release mode with cargo and installs the library as
  `priv/native/libhrw_nif.so`. Needs only cargo (no rustler Mix package, no Hex).

  The library is copied next to its destination and then renamed over it, so a
  library already loaded by a running VM is never overwritten in place.
  """
  use Mix.Task.Compiler

  @impl Mix.Task.Compiler
  def run(_args) do
    root = Path.expand("../..", __DIR__)
    native = Path.join(root, "native")

    unless System.find_executable("cargo") do
      Mix.raise("hrw needs cargo (the Rust toolchain) to build its NIF; none is on PATH")
    end

    {_, status} =
      System.cmd("cargo", ["build", "--release", "--quiet", "-p", "hrw_nif"] ++ features(),
        cd: native,
        into: IO.stream(:stdio, :line),
        stderr_to_stdout: true
      )

    if status != 0, do: Mix.raise("cargo build of native/hrw_nif failed (exit #{status})")

    built = Path.join([native, "target", "release", library_name()])
    dest = Path.join([root, "priv", "native", "libhrw_nif.so"])
    install(built, dest)
    # On a clean first build priv/ did not exist when Mix linked the app's build
    # directory; link it now so :code.priv_dir(:hrw) finds the library.
    Mix.Project.build_structure()
    {:ok, []}
  end

  # Test builds add the work probes (`HRW.Native.probe/2`, test/hrw/budget_test.exs);
  # `HRW.Native` declares their stubs under the same condition.
  defp features do
    if Mix.env() == :test, do: ["--features", "hrw_nif/work-probes"], else: []
  end

  defp library_name do
    case :os.type() do
      {:unix, :darwin} -> "libhrw_nif.dylib"
      {:win32, _} -> "hrw_nif.dll"
      _ -> "libhrw_nif.so"
    end
  end

  defp install(built, dest) do
    new = File.read!(built)

    if File.read(dest) != {:ok, new} do
      File.mkdir_p!(Path.dirname(dest))
      tmp = dest <> ".tmp"
      File.write!(tmp, new)
      File.rename!(tmp, dest)
    end
  end
end
