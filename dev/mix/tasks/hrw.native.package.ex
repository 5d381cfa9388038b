defmodule Mix.Tasks.Hrw.Native.Package do
  @shortdoc "Builds the release NIF and writes its precompiled archive"
  @moduledoc """
  Builds `native/hrw_nif` with cargo in the release profile, with no test features
  (exactly what a consumer's build from source produces), and writes the archive
  the compile task downloads: `libhrw_nif-v<version>-nif-<nif>-<target>.so.tar.gz`
  (`hrw_nif-...dll.tar.gz` for Windows), holding the one library. Prints the
  archive's path and SHA-256.

      mix hrw.native.package [--target TRIPLE[.GLIBC]] [--cargo CMD] [--out DIR]

    * `--target` cross-builds for a Rust target triple (`cargo build --target`);
      by default the host's, worked out as the compile task works it out. A glibc
      version after a gnu triple (`aarch64-unknown-linux-gnu.2.17`) builds with
      `cargo-zigbuild` (PyPI: `pip install ziglang cargo-zigbuild`), which links
      against that glibc's symbol versions, so the library loads on any glibc from
      that one on; the archive is named for the triple alone.
    * `--cargo` is the cargo command to run (default `cargo`, or `cargo-zigbuild`
      for a glibc-versioned target; both found on `PATH`).
    * `--out` is the folder for the archive (default `native/target/hrw-archives`).

  docs/PLATFORMS.md says which targets are built this way and tested, and where.

  For this repository only (dev/: not compiled in `:prod`, not in the package).
  The release workflow (`.github/workflows/release.yml`) runs it once per target,
  then `mix hrw.native.checksum DIR` over the collected archives.
  """
  use Mix.Task
  alias Mix.Tasks.Compile.HrwNative

  @switches [target: :string, out: :string, cargo: :string]

  @impl Mix.Task
  def run(args) do
    case OptionParser.parse(args, strict: @switches) do
      {opts, [], []} ->
        root = Path.dirname(Mix.Project.project_file())

        archive =
          package(
            native: Path.join(root, "native"),
            out: Keyword.get(opts, :out, Path.join(root, "native/target/hrw-archives")),
            target: opts[:target],
            cargo: opts[:cargo],
            version: Mix.Project.config()[:version]
          )

        Mix.shell().info("#{archive}\n#{Mix.HrwNative.Checksums.checksum(File.read!(archive))}")

      _ ->
        Mix.raise(
          "usage: mix hrw.native.package [--target TRIPLE[.GLIBC]] [--cargo CMD] [--out DIR]"
        )
    end
  end

  @doc """
  Builds the library and writes its archive; returns the archive's path.
  Options: `:native` (the cargo workspace), `:out`, `:version`, `:target` (nil for
  the host; `TRIPLE.GLIBC` for a glibc floor), `:cargo` (nil or absent: `cargo`, or
  `cargo-zigbuild` for a glibc floor), `:env` (extra OS variables for cargo).
  """
  @spec package(keyword()) :: Path.t()
  def package(opts) do
    {target, glibc, extra} =
      case opts[:target] do
        nil ->
          {host_target!(), nil, []}

        target ->
          {triple, glibc} = split_glibc(target)
          {triple, glibc, ["--target", target]}
      end

    [nif | _] = Mix.HrwNative.Target.nif_versions()
    cargo = opts[:cargo] || if(glibc, do: zigbuild!(), else: "cargo")

    library =
      HrwNative.cargo_library(
        Keyword.fetch!(opts, :native),
        :prod,
        cargo,
        extra,
        Keyword.get(opts, :env, [])
      )

    name = Mix.HrwNative.Target.archive_name(Keyword.fetch!(opts, :version), nif, target)
    archive = Path.join(Keyword.fetch!(opts, :out), name)
    :ok = Mix.HrwNative.Archive.pack(library, archive)
    archive
  end

  @doc """
  Splits a cargo-zigbuild target into the Rust triple and the glibc version it
  names (nil when none): `"aarch64-unknown-linux-gnu.2.17"` gives
  `{"aarch64-unknown-linux-gnu", "2.17"}`.

      iex> Mix.Tasks.Hrw.Native.Package.split_glibc("aarch64-unknown-linux-gnu.2.17")
      {"aarch64-unknown-linux-gnu", "2.17"}
      iex> Mix.Tasks.Hrw.Native.Package.split_glibc("x86_64-unknown-linux-musl")
      {"x86_64-unknown-linux-musl", nil}
  """
  @spec split_glibc(String.t()) :: {String.t(), String.t() | nil}
  def split_glibc(target) do
    case Regex.run(~r/\A(.+-gnu[a-z0-9]*)\.(\d+\.\d+)\z/, target) do
      [_, triple, glibc] -> {triple, glibc}
      nil -> {target, nil}
    end
  end

  defp zigbuild! do
    System.find_executable("cargo-zigbuild") ||
      Mix.raise(
        "a glibc-versioned target (TRIPLE.GLIBC) is built with cargo-zigbuild, which is " <>
          "not on PATH: pip install ziglang cargo-zigbuild"
      )
  end

  defp host_target! do
    case Mix.HrwNative.Target.host_target() do
      {:ok, target} ->
        target

      :error ->
        Mix.raise(
          "cannot work out a target triple from #{:erlang.system_info(:system_architecture)}: " <>
            "pass --target"
        )
    end
  end
end
