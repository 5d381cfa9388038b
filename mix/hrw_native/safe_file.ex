defmodule Mix.HrwNative.SafeFile do
  @moduledoc """
  The compile task's file writes and reads, safe where someone else could act:
  writes through a new folder of ours renamed into place; reads capped, of
  regular files only, checked as opened (`read_own/2`); folders checked for
  who can write them (`private_dir/1`, `trusted_dir/1`).
  """

  import Bitwise

  @doc """
  Writes `data` to `path` through a file created exclusively in a temporary folder
  of its own beside `path` (closed to others before the file exists, so that the
  file, created with the umask's mode, is never open to them), then renamed over
  `path`. `{:error, reason}` on any failure; the temporary folder is removed.
  """
  @spec write(Path.t(), iodata()) :: :ok | {:error, term()}
  def write(path, data) do
    dir = temp_name(path)
    tmp = Path.join(dir, "file")

    result =
      with :ok <- :file.make_dir(dir),
           :ok <- :file.change_mode(dir, 0o700),
           {:ok, fd} <- :file.open(tmp, [:write, :exclusive, :binary, :raw]) do
        written =
          with :ok <- :file.change_mode(tmp, 0o644),
               :ok <- :file.write(fd, data),
               do: :file.sync(fd)

        :ok = :file.close(fd)
        with :ok <- written, do: :file.rename(tmp, path)
      end

    _ = File.rm_rf(dir)
    result
  end

  @doc """
  A name next to `path` that nobody can predict: `.<basename>.<32 hex digits>.tmp`.
  """
  @spec temp_name(Path.t()) :: Path.t()
  def temp_name(path) do
    :ok = Mix.HrwNative.OTPApps.on_code_path([:crypto])
    random = Base.encode16(:crypto.strong_rand_bytes(16), case: :lower)
    Path.join(Path.dirname(path), ".#{Path.basename(path)}.#{random}.tmp")
  end

  @doc """
  Reads the regular file `path` (not a link, a device or a FIFO) if it holds at
  most `max` bytes. `{:error, :enoent}` when there is none; `{:error, message}`
  for anything else, without reading a larger file.
  """
  @spec read(Path.t(), non_neg_integer()) :: {:ok, binary()} | {:error, :enoent | String.t()}
  def read(path, max) do
    with {:ok, _stat} <- regular(path, max) do
      # The file may grow or be swapped after lstat: read one byte past the cap.
      case :file.open(path, [:read, :binary, :raw]) do
        {:ok, fd} ->
          try do
            read_fd(fd, path, max)
          after
            :ok = :file.close(fd)
          end

        {:error, reason} ->
          open_error(path, reason)
      end
    end
  end

  @doc """
  Reads the file `path` that this user owns, a regular file of at most `max`
  bytes, so that nothing swapped in can block or mislead the read: opened for
  reading and writing when its owner may write it (which never waits, as a
  read-only open of a FIFO does), else (a read-only cache, a read-only
  filesystem) for reading, then checked as opened: a regular file, the one
  `lstat` saw. `{:error, :enoent | :changed | {:not_ours, message} | message}`.
  """
  @spec read_own(Path.t(), non_neg_integer()) ::
          {:ok, binary()} | {:error, :enoent | :changed | {:not_ours, String.t()} | String.t()}
  def read_own(path, max) do
    with {:ok, seen} <- regular(path, max),
         :ok <- ours(path, seen),
         do: read_opened(path, seen, max)
  end

  @doc false
  # read_own/2 from the open on, `seen` being what lstat saw at `path` (tests
  # hand it something else, as a swap between the two would).
  @spec read_opened(Path.t(), File.Stat.t(), non_neg_integer()) ::
          {:ok, binary()} | {:error, :enoent | :changed | String.t()}
  def read_opened(path, seen, max) do
    with {:ok, fd} <- open_own(path, seen) do
      try do
        with {:ok, opened} <- :file.read_file_info(fd, time: :posix),
             :ok <- same(path, seen, File.Stat.from_record(opened)) do
          read_fd(fd, path, max)
        end
      after
        :ok = :file.close(fd)
      end
    end
  end

  defp regular(path, max) do
    case File.lstat(path) do
      {:ok, %File.Stat{type: :regular, size: size}} when size > max ->
        {:error, "#{path} is #{size} bytes, over the #{max}-byte limit"}

      {:ok, %File.Stat{type: :regular} = stat} ->
        {:ok, stat}

      {:ok, %File.Stat{type: type}} ->
        {:error, "#{path} is #{kind(type)}, not a regular file"}

      {:error, :enoent} ->
        {:error, :enoent}

      {:error, reason} ->
        {:error, "#{path} cannot be read (#{:file.format_error(reason)})"}
    end
  end

  defp ours(path, %File.Stat{uid: uid}) do
    case windows?() or our_uid() do
      true -> :ok
      {:ok, ^uid} -> :ok
      _ -> {:error, {:not_ours, "#{path} belongs to user #{uid}, #{whose(uid)}"}}
    end
  end

  defp open_own(path, %File.Stat{mode: mode}) when (mode &&& 0o200) == 0,
    do:
      with(
        {:error, reason} <- :file.open(path, [:read, :binary, :raw]),
        do: open_error(path, reason)
      )

  defp open_own(path, _seen) do
    case :file.open(path, [:read, :write, :binary, :raw]) do
      {:ok, fd} ->
        {:ok, fd}

      {:error, :erofs} ->
        with {:error, reason} <- :file.open(path, [:read, :binary, :raw]),
             do: open_error(path, reason)

      {:error, reason} ->
        open_error(path, reason)
    end
  end

  defp open_error(_path, :enoent), do: {:error, :enoent}

  defp open_error(path, reason),
    do: {:error, "#{path} cannot be opened (#{:file.format_error(reason)})"}

  defp same(path, seen, opened) do
    cond do
      {opened.inode, opened.major_device} != {seen.inode, seen.major_device} ->
        # Opening created an empty file if the entry had just been removed:
        # entries are never empty, so that one is ours to take away.
        if opened.size == 0 and opened.type == :regular, do: _ = File.rm(path)
        {:error, :changed}

      opened.type != :regular ->
        {:error, "#{path} is #{kind(opened.type)}, not a regular file"}

      true ->
        :ok
    end
  end

  defp read_fd(fd, path, max) do
    case :file.read(fd, max + 1) do
      {:ok, data} when byte_size(data) > max -> {:error, "#{path} is over the #{max}-byte limit"}
      {:ok, data} -> {:ok, data}
      :eof -> {:ok, ""}
      {:error, reason} -> {:error, "#{path} cannot be read (#{:file.format_error(reason)})"}
    end
  end

  @doc """
  `:ok` when the folder `dir` (created `0700` if missing) is this user's and
  nobody else can write to it; `{:error, message}` naming it otherwise. Not
  checked on Windows.
  """
  @spec private_dir(Path.t()) :: :ok | {:error, String.t()}
  def private_dir(dir) do
    with :ok <- mkdir(dir, 0o700),
         {:ok, %File.Stat{uid: uid, mode: mode}} <- stat(dir) do
      cond do
        windows?() ->
          :ok

        our_uid() != {:ok, uid} ->
          {:error, "#{dir} belongs to user #{uid}, #{whose(uid)}: it is not used"}

        (mode &&& 0o022) != 0 ->
          {:error,
           "#{dir} can be written by other users (mode #{Integer.to_string(mode &&& 0o7777, 8)}): " <>
             "it is not used"}

        true ->
          :ok
      end
    end
  end

  defp kind(:directory), do: "a folder"
  defp kind(:symlink), do: "a symlink"
  defp kind(:regular), do: "a regular file"
  defp kind(_other), do: "a FIFO, socket or device"

  defp windows?, do: match?({:win32, _}, :os.type())

  @doc """
  `:ok` when the folder `dir` (created if missing) and its parent may be
  written: nobody but their owner can write to them. One of ours that others can
  write (0777, as an earlier version could leave it) is closed to them first,
  and the task says so. `{:error, message}` naming it when it is another user's
  that others can write, or cannot be closed. Not checked on Windows.
  """
  @spec trusted_dir(Path.t()) :: :ok | {:error, String.t()}
  def trusted_dir(dir) do
    with :ok <- mkdir(dir, 0o755) do
      Enum.find_value([Path.dirname(dir), dir], :ok, fn folder ->
        with {:ok, stat} <- stat(folder), :ok <- check_owner(folder, stat), do: nil
      end)
    end
  end

  # Like `mkdir -p`, each folder it creates given `mode`, whatever the umask.
  defp mkdir(dir, mode) do
    parent = Path.dirname(dir)

    with :ok <- if(parent == dir or File.dir?(parent), do: :ok, else: mkdir(parent, mode)) do
      case with(:ok <- File.mkdir(dir), do: File.chmod(dir, mode)) do
        {:error, reason} when reason != :eexist ->
          {:error, "#{dir} cannot be created (#{:file.format_error(reason)})"}

        _ ->
          :ok
      end
    end
  end

  defp stat(dir) do
    case File.stat(dir) do
      {:ok, %File.Stat{type: :directory} = stat} -> {:ok, stat}
      {:ok, %File.Stat{type: type}} -> {:error, "#{dir} is #{kind(type)}, not a folder"}
      {:error, reason} -> {:error, "#{dir} cannot be read (#{:file.format_error(reason)})"}
    end
  end

  defp check_owner(dir, %File.Stat{uid: uid, mode: mode}) do
    {shown, closed} = {Integer.to_string(mode &&& 0o7777, 8), mode &&& 0o7755}

    cond do
      windows?() or (mode &&& 0o022) == 0 ->
        :ok

      our_uid() == {:ok, uid} ->
        with {:error, reason} <- :file.change_mode(dir, closed) do
          {:error,
           "#{dir} can be written by other users (mode #{shown}) and its mode cannot be " <>
             "changed (#{:file.format_error(reason)})"}
        else
          :ok ->
            Mix.shell().info(
              "hrw: #{dir} could be written by other users (mode #{shown}): it is now " <>
                Integer.to_string(closed, 8)
            )
        end

      true ->
        {:error,
         "#{dir} can be written by other users (mode #{shown}) and belongs to user #{uid}, " <>
           "#{whose(uid)}: it is not used"}
    end
  end

  defp whose(uid) do
    case our_uid() do
      {:ok, ^uid} -> "this one"
      {:ok, _} -> "not to this one"
      {:error, why} -> "which cannot be told to be this one (#{why})"
    end
  end

  # This process's user id (OTP has no getuid/0): the owner of /proc/self on
  # Linux, else of a file it creates; {:error, why} when neither can be had.
  defp our_uid do
    with nil <- :persistent_term.get({__MODULE__, :uid}, nil) do
      uid =
        case File.stat("/proc/self") do
          {:ok, %File.Stat{uid: uid}} -> {:ok, uid}
          {:error, _} -> probe_uid(System.tmp_dir() || ".")
        end

      if match?({:ok, _}, uid), do: :persistent_term.put({__MODULE__, :uid}, uid)
      uid
    end
  end

  defp probe_uid(tmp) do
    probe = temp_name(Path.join(tmp, "hrw-uid"))

    with {:ok, fd} <- :file.open(probe, [:write, :exclusive, :raw]),
         :ok <- :file.close(fd),
         {:ok, %File.Stat{uid: uid}} <- File.lstat(probe) do
      _ = File.rm(probe)
      {:ok, uid}
    else
      {:error, reason} ->
        {:error,
         "its user id is learnt from a file it creates, and none can be created in " <>
           "#{tmp} (#{:file.format_error(reason)})"}
    end
  end
end
