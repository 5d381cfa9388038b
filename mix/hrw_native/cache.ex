defmodule Mix.HrwNative.Cache do
  @moduledoc """
  The per-user cache of archives: read only from a folder that is ours and closed
  to others, and only entries that are ours (`Mix.HrwNative.SafeFile`); written
  only with verified archives, through exclusive temporary files. The caller
  verifies what it reads here as it verifies a download.
  """

  @typedoc """
  What `read/2` found: the archive; `{:error, :enoent}` (none); `{:replace,
  reason}` (another user's entry: download, and write over it); `{:untrusted,
  reason}` (a folder not to use: download, write nothing); `{:refused, reason}` (an
  entry that is no archive we could take: stop).
  """
  @type read_result ::
          {:ok, binary()}
          | {:error, :enoent}
          | {:replace, String.t()}
          | {:untrusted, String.t()}
          | {:refused, String.t()}

  @doc "The archive cached at `path` in the folder `dir` (see `t:read_result/0`)."
  @spec read(Path.t(), Path.t()) :: read_result()
  def read(dir, path) do
    with :ok <- usable_cache(dir), do: read_cached(path)
  end

  defp usable_cache(dir) do
    case Mix.HrwNative.SafeFile.private_dir(dir) do
      :ok ->
        :ok

      {:error, reason} ->
        Mix.shell().error("hrw: not using the archive cache: #{reason}")
        {:untrusted, reason}
    end
  end

  # Another user's entry in our own folder is not read; a verified download
  # takes its place (the folder is ours, so the rename is too).
  defp not_ours(reason) do
    Mix.shell().error("hrw: not reading the cache entry #{reason}: downloading it again")
    {:replace, reason}
  end

  # An entry replaced while it was opened (another compile's rename) is read
  # again; one that keeps changing is left alone, and the archive downloaded.
  defp read_cached(path, tries \\ 3) do
    case Mix.HrwNative.SafeFile.read_own(path, Mix.HrwNative.Archive.max_archive_bytes()) do
      {:ok, archive} -> {:ok, archive}
      {:error, :enoent} -> {:error, :enoent}
      {:error, :changed} when tries > 1 -> read_cached(path, tries - 1)
      {:error, :changed} -> {:untrusted, "#{path} keeps changing"}
      {:error, {:not_ours, reason}} -> not_ours(reason)
      {:error, reason} -> {:refused, "the cache entry #{reason}"}
    end
  end
end
