defmodule Mix.HrwNative.Archive do
  # The library is about 1 MB; an archive or library 32× that is not ours.
  @max_archive_bytes 32 * 1024 * 1024
  @max_library_bytes 64 * 1024 * 1024
  # A tar of one file: a 512-byte header, the data padded to 512 bytes, two zero
  # blocks, padding to a 10240-byte record; pax or long-name headers add a few more.
  @max_tar_bytes @max_library_bytes + 64 * 1024

  @moduledoc """
  An archive: checked against its checksum, inflated (never past the library's
  size limit, and to the end of its gzip trailer), unpacked to the one library it
  holds; and, on the producer side, packed.
  """

  alias Mix.HrwNative.{Checksums, Target}

  @doc "The default size limit of a downloaded archive, in bytes."
  @spec max_archive_bytes() :: pos_integer()
  def max_archive_bytes, do: @max_archive_bytes

  @doc "The size limit of the library an archive holds, in bytes."
  @spec max_library_bytes() :: pos_integer()
  def max_library_bytes, do: @max_library_bytes

  @doc """
  The one library an archive holds, if its digest is `expected` and it is a
  gzipped tar of exactly the regular file `Target.library_name(name)`, never
  inflated past the size limit. `from` and `opts.checksum_file` are for the message.
  """
  @spec verify(binary(), String.t(), String.t(), String.t(), map()) ::
          {:ok, binary()} | {:refused, String.t()}
  def verify(archive, name, expected, from, opts \\ %{}) do
    actual = Checksums.checksum(archive)

    if actual != expected do
      file = Map.get(opts, :checksum_file, Checksums.file_name())

      {:refused,
       "#{name} from #{from} (#{byte_size(archive)} bytes) has #{actual}, but the " <>
         "checksum file #{file} expects #{expected}"}
    else
      with {:ok, tar} <- inflate(archive, name) do
        unpack(tar, name, Target.library_name(name))
      end
    end
  end

  # Gunzips at most @max_tar_bytes, a chunk at a time, and gives up past that.
  defp inflate(archive, name) do
    :ok = Mix.HrwNative.OTPApps.on_code_path([:kernel])
    z = :zlib.open()

    try do
      # 16 + 15: a gzip stream with a 32 KiB window.
      :ok = :zlib.inflateInit(z, 31)
      inflate_chunks(z, :zlib.safeInflate(z, archive), name, 0, [])
    rescue
      error ->
        {:refused, "#{name} is not a gzipped tar archive (#{Exception.message(error)})"}
    after
      :zlib.close(z)
    end
  end

  defp inflate_chunks(z, {state, output}, name, size, acc) do
    size = size + :erlang.iolist_size(output)

    cond do
      size > @max_tar_bytes ->
        {:refused,
         "#{name} inflates to more than #{@max_tar_bytes} bytes: its library would be " <>
           "over the #{@max_library_bytes}-byte limit"}

      state == :continue ->
        inflate_chunks(z, :zlib.safeInflate(z, <<>>), name, size, [acc | output])

      state == :finished ->
        # All input read; inflateEnd raises unless the gzip stream also ended,
        # its trailer (CRC-32 and length) checked.
        try do
          :ok = :zlib.inflateEnd(z)
          {:ok, IO.iodata_to_binary([acc | output])}
        rescue
          _ -> {:refused, "#{name} is truncated or corrupt: its gzip stream does not end"}
        end
    end
  end

  defp unpack(tar, name, library) do
    case :erl_tar.table({:binary, tar}, [:verbose]) do
      {:ok, [{member, :regular, size, _, _, _, _}]} when size <= @max_library_bytes ->
        with true <- List.to_string(member) == library,
             {:ok, [{_, bytes}]} when byte_size(bytes) == size <-
               :erl_tar.extract({:binary, tar}, [:memory]) do
          {:ok, bytes}
        else
          _ -> {:refused, "#{name} holds #{shown(member)}, not #{library}"}
        end

      {:ok, [{_member, :regular, size, _, _, _, _}]} ->
        {:refused,
         "#{name}'s library is #{size} bytes, over the #{@max_library_bytes}-byte limit"}

      {:ok, members} ->
        listed = Enum.map_join(members, ", ", &describe_member/1)
        {:refused, "#{name} must hold exactly one file, #{library}; it holds: #{listed}"}

      {:error, reason} ->
        {:refused,
         "#{name} is not a gzipped tar archive (#{Mix.HrwNative.Wire.escape(inspect(reason))})"}
    end
  end

  defp describe_member({member, type, size, _, _, _, _}),
    do: "#{shown(member)} (#{type}, #{size} bytes)"

  # A member's name as the archive wrote it, escaped.
  defp shown(member) do
    case :unicode.characters_to_binary(member) do
      name when is_binary(name) -> Mix.HrwNative.Wire.escape(name)
      _ -> Mix.HrwNative.Wire.escape(inspect(member))
    end
  end

  @doc """
  Writes the archive `archive_path` holding `library_path` as the one file
  `library_name(Path.basename(archive_path))` (the producer side), through an
  exclusively created temporary file.
  """
  @spec pack(Path.t(), Path.t()) :: :ok
  def pack(library_path, archive_path) do
    member = archive_path |> Path.basename() |> Target.library_name()
    File.mkdir_p!(Path.dirname(archive_path))
    tmp = Mix.HrwNative.SafeFile.temp_name(archive_path)

    try do
      {:ok, fd} = :file.open(tmp, [:write, :exclusive, :binary, :compressed])
      {:ok, tar} = :erl_tar.init(fd, :write, &tar_file/2)

      :ok = :erl_tar.add(tar, String.to_charlist(library_path), String.to_charlist(member), [])

      :ok = :erl_tar.close(tar)
      File.rename!(tmp, archive_path)
    after
      _ = File.rm(tmp)
    end
  end

  # erl_tar's access to an open file (`:erl_tar.init/3`).
  defp tar_file(:write, {fd, data}), do: :file.write(fd, data)
  defp tar_file(:position, {fd, position}), do: :file.position(fd, position)
  defp tar_file(:read2, {fd, size}), do: :file.read(fd, size)
  defp tar_file(:close, fd), do: :file.close(fd)
end
