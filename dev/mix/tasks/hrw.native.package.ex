defmodule Mix.Tasks.Hrw.Native.Package do
  @shortdoc "Builds the release NIF and writes its precompiled archive"
  @moduledoc """
  Builds `native/hrw_nif` with cargo in the release profile, with no test features
  (exactly what a consumer's build from source produces), and writes the archive
  the compile task downloads: `libhrw_nif-v<version>-nif-<nif>-<target>.so.tar.gz`
  (`hrw_nif-...dll.tar.gz` for Windows), holding the one library. Prints the
  archive's path and SHA-256.

      mix hrw.native.package [--target TRIPLE] [--out DIR]

    * `--target` cross-builds for a Rust target triple (`cargo build --target`);
      by default the host's, worked out as the compile task works it out.
    * `--out` is the folder for the archive (default `native/target/hrw-archives`).

  For this repository only (dev/: not compiled in `:prod`, not in the package).
  The release workflow (`.github/workflows/release.yml`) runs it once per target,
  then `mix hrw.native.checksum DIR` over the collected archives.
  """
  use Mix.Task

  alias Mix.HrwNative.Precompiled
  alias Mix.Tasks.Compile.HrwNative

  @switches [target: :string, out: :string]

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
            version: Mix.Project.config()[:version]
          )

        Mix.shell().info("#{archive}\n#{Precompiled.checksum(File.read!(archive))}")

      _ ->
        Mix.raise("usage: mix hrw.native.package [--target TRIPLE] [--out DIR]")
    end
  end

  @doc """
  Builds the library and writes its archive; returns the archive's path.
  Options: `:native` (the cargo workspace), `:out`, `:version`, `:target` (nil for
  the host), `:cargo` (default `cargo`), `:env` (extra OS variables for cargo).
  """
  @spec package(keyword()) :: Path.t()
  def package(opts) do
    {target, extra} =
      case opts[:target] do
        nil -> {host_target!(), []}
        target -> {target, ["--target", target]}
      end

    [nif | _] = Precompiled.nif_versions()
    cargo = Keyword.get(opts, :cargo, "cargo")

    library =
      HrwNative.cargo_library(
        Keyword.fetch!(opts, :native),
        :prod,
        cargo,
        extra,
        Keyword.get(opts, :env, [])
      )

    name = Precompiled.archive_name(Keyword.fetch!(opts, :version), nif, target)
    archive = Path.join(Keyword.fetch!(opts, :out), name)
    :ok = Precompiled.pack(library, archive)
    archive
  end

  defp host_target! do
    case Precompiled.host_target() do
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
