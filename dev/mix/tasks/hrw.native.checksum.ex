defmodule Mix.Tasks.Hrw.Native.Checksum do
  @shortdoc "Writes checksum-Elixir.HRW.Native.exs from a folder of NIF archives"
  @moduledoc """
  Writes the checksum file that the package ships, `checksum-Elixir.HRW.Native.exs`
  at the project root: the SHA-256 of every precompiled archive in `DIR`, by name.

      mix hrw.native.checksum DIR [--output FILE]

  Every `*.tar.gz` in `DIR` must be an hrw NIF archive of this version (as
  `mix hrw.native.package` names them) that holds exactly its library: a stray or
  stale archive stops the task rather than being listed or silently left out.

  For this repository only (dev/: not compiled in `:prod`, not in the package).
  """
  use Mix.Task

  @impl Mix.Task
  def run(args) do
    case OptionParser.parse(args, strict: [output: :string]) do
      {opts, [dir], []} ->
        root = Path.dirname(Mix.Project.project_file())
        default = Path.join(root, Mix.HrwNative.Checksums.file_name())
        output = Keyword.get(opts, :output, default)
        checksums = write(dir, output, Mix.Project.config()[:version])
        Mix.shell().info("Wrote #{map_size(checksums)} checksums to #{output}")

      _ ->
        Mix.raise("usage: mix hrw.native.checksum DIR [--output FILE]")
    end
  end

  @doc """
  Writes the checksum file `output` for the archives of hrw `version` in `dir`;
  returns the map written. Raises when `dir` holds no archive, or any `*.tar.gz`
  that is not a verifiable archive of this version.
  """
  @spec write(Path.t(), Path.t(), String.t()) :: %{String.t() => String.t()}
  def write(dir, output, version) do
    archives = dir |> Path.join("*.tar.gz") |> Path.wildcard() |> Enum.sort()

    if archives == [] do
      Mix.raise("no *.tar.gz archive in #{dir}: run mix hrw.native.package first")
    end

    names = expected_names(version)

    checksums =
      Map.new(archives, fn path ->
        name = Path.basename(path)

        unless name in names do
          Mix.raise(
            "#{path} is not an hrw #{version} NIF archive (expected names like " <>
              "#{hd(names)}); remove it or package this version"
          )
        end

        data =
          case Mix.HrwNative.SafeFile.read(path, Mix.HrwNative.Archive.max_archive_bytes()) do
            {:ok, data} -> data
            {:error, reason} -> Mix.raise("#{path}: #{inspect(reason)}")
          end

        sum = Mix.HrwNative.Checksums.checksum(data)

        case Mix.HrwNative.Archive.verify(data, name, sum, path) do
          {:ok, _library} -> {name, sum}
          {:refused, reason} -> Mix.raise("#{path}: #{reason}")
        end
      end)

    case Mix.HrwNative.SafeFile.write(output, Mix.HrwNative.Checksums.text(checksums)) do
      :ok -> checksums
      {:error, reason} -> Mix.raise("cannot write #{output}: #{inspect(reason)}")
    end
  end

  defp expected_names(version) do
    for nif <- Mix.HrwNative.Target.nif_versions(),
        target <- Mix.HrwNative.Target.targets(),
        do: Mix.HrwNative.Target.archive_name(version, nif, target)
  end
end
