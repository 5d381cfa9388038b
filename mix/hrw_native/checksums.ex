defmodule Mix.HrwNative.Checksums do
  @max_file_bytes 1024 * 1024

  @moduledoc """
  The checksum file, `checksum-Elixir.HRW.Native.exs`, shipped in the package: a
  literal map of each published archive's name to `"sha256:<hex>"`, parsed and
  never evaluated. It is the trust anchor: an archive whose SHA-256 differs is
  refused, wherever it came from (mirror or cache).
  """

  @file_name "checksum-Elixir.HRW.Native.exs"

  @doc "The checksum file's name, at the root of the package."
  @spec file_name() :: String.t()
  def file_name, do: @file_name

  @doc "`\"sha256:<lowercase hex>\"` of `data`, as the checksum file writes it."
  @spec checksum(iodata()) :: String.t()
  def checksum(data) do
    :ok = Mix.HrwNative.OTPApps.on_code_path([:crypto])
    "sha256:" <> Base.encode16(:crypto.hash(:sha256, data), case: :lower)
  end

  @doc """
  Reads a checksum file: a literal map of archive names to `"sha256:<hex>"`. It is
  parsed, never evaluated. `{:error, :enoent}` when there is no file.
  """
  @spec read(Path.t()) :: {:ok, %{String.t() => String.t()}} | {:error, term()}
  def read(path) do
    with {:ok, text} <- Mix.HrwNative.SafeFile.read(path, @max_file_bytes),
         {:ok, {:%{}, _, pairs}} <- Code.string_to_quoted(text),
         true <- Enum.all?(pairs, &valid_entry?/1),
         [] <- duplicates(pairs) do
      {:ok, Map.new(pairs)}
    else
      {:error, :enoent} ->
        {:error, :enoent}

      {:error, message} when is_binary(message) ->
        {:error, "the checksum file: #{message}"}

      [_ | _] = names ->
        {:error, "the checksum file #{path} lists #{Enum.join(names, ", ")} more than once"}

      _ ->
        {:error,
         "the checksum file #{path} is not a map of archive names to \"sha256:<64 hex digits>\""}
    end
  end

  defp duplicates(pairs) do
    pairs
    |> Enum.frequencies_by(&elem(&1, 0))
    |> Enum.filter(fn {_, n} -> n > 1 end)
    |> Enum.map(&inspect(elem(&1, 0)))
    |> Enum.sort()
  end

  defp valid_entry?({name, "sha256:" <> hex}) when is_binary(name),
    do: hex =~ ~r/\A[0-9a-f]{64}\z/

  defp valid_entry?(_), do: false

  @doc """
  The checksum file's text for `checksums` (archive name => `"sha256:..."`), sorted
  by name, formatted as `mix format` would.
  """
  @spec text(%{String.t() => String.t()}) :: String.t()
  def text(checksums) do
    literal =
      checksums
      |> Enum.sort()
      |> Enum.map_join(", ", fn {name, sum} -> "#{inspect(name)} => #{inspect(sum)}" end)

    "# Written by `mix hrw.native.checksum DIR`: the SHA-256 of every precompiled hrw NIF\n" <>
      "# archive. The compile task installs only an archive whose digest is listed here.\n" <>
      IO.iodata_to_binary(Code.format_string!("%{" <> literal <> "}")) <> "\n"
  end

  @doc """
  What a checksum file lists, for a message: the targets (and NIF versions) of its
  archives, or that it lists none.
  """
  @spec listed(%{String.t() => String.t()}) :: String.t()
  def listed(checksums) do
    case checksums |> Map.keys() |> Enum.map(&archive_target/1) |> Enum.uniq() |> Enum.sort() do
      [] -> "it lists none: no archive is published for this version"
      targets -> "it lists archives for #{Enum.join(targets, ", ")}"
    end
  end

  # The target and NIF version an archive's name is for, as shown.
  defp archive_target(name) do
    case Regex.run(~r/-nif-([0-9.]+)-(.+)\.(so|dll)\.tar\.gz\z/, name) do
      [_, nif, target, _] -> "#{target} (NIF #{nif})"
      nil -> Mix.HrwNative.Wire.escape(name)
    end
  end
end
