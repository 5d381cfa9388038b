defmodule Mix.HrwNative.Precompiled do
  @moduledoc """
  Precompiled hrw NIFs: naming, verification and cache, with OTP alone (`:crypto`,
  `:zlib`, `:erl_tar`; no Hex package); the download is `Mix.HrwNative.Download`'s.

  The conventions are RustlerPrecompiled's, so that moving to it later changes little:

    * an archive is named `libhrw_nif-v<version>-nif-<nif>-<target>.so.tar.gz`
      (`hrw_nif-...-<target>.dll.tar.gz` on Windows) and holds exactly one file, the
      library, named as the archive without `.tar.gz`;
    * `checksum-Elixir.HRW.Native.exs`, shipped in the package, maps each published
      archive's name to `"sha256:<hex>"`. It is the trust anchor: an archive whose
      SHA-256 differs is refused, wherever it came from (mirror or cache).

  `<nif>` is the NIF version the library was *built against* (rustler feature
  `nif_version_2_16`), which is the oldest a VM may speak: a VM loads a library
  built for an older minor version of the same major NIF version. OTP 25 to 29
  speak 2.16 to 2.18 and all load the 2.16 build, so it is the one we publish; a
  VM picks the newest published version it can load.

  `Mix.Tasks.Compile.HrwNative` decides when to use this (and when to build
  from source); the producer tasks of `dev/` (`mix hrw.native.package`, `mix
  hrw.native.checksum`) use the same names.
  """

  @crate "hrw_nif"
  @nif_versions ["2.16"]
  @targets ~w(
    aarch64-apple-darwin x86_64-apple-darwin
    aarch64-unknown-linux-gnu aarch64-unknown-linux-musl
    x86_64-unknown-linux-gnu x86_64-unknown-linux-musl
    x86_64-pc-windows-msvc
  )
  @checksum_file "checksum-Elixir.HRW.Native.exs"

  # The library is about 1 MB; an archive or library 32× that is not ours.
  @max_archive_bytes 32 * 1024 * 1024
  @max_library_bytes 64 * 1024 * 1024
  # A tar of one file: a 512-byte header, the data padded to 512 bytes, two zero
  # blocks, padding to a 10240-byte record; pax or long-name headers add a few more.
  @max_tar_bytes @max_library_bytes + 64 * 1024
  @max_checksum_file_bytes 1024 * 1024
  @default_timeout_ms 30_000

  @typedoc "A Rust target triple, such as `x86_64-unknown-linux-gnu`."
  @type target :: String.t()

  @typedoc """
  What `fetch/1` needs: `:version` (hrw's), `:checksum_file`, `:base_url`,
  `:cache_dir`, `:target`, `:nif_version`, and optionally `:timeout_ms` (the longest
  wait for a connection or for the next bytes; the whole download gets 20×),
  `:max_bytes` (the archive's size limit) and `:cacerts_path` (a PEM file of CA
  certificates instead of the OS's).
  """
  @type options :: %{
          required(:version) => String.t(),
          required(:checksum_file) => Path.t(),
          required(:base_url) => String.t(),
          required(:cache_dir) => Path.t(),
          required(:target) => target(),
          required(:nif_version) => String.t(),
          optional(:timeout_ms) => pos_integer(),
          optional(:max_bytes) => pos_integer(),
          optional(:cacerts_path) => Path.t() | nil
        }

  @typedoc """
  `{:ok, library, from}`: verified library bytes and where the archive came from;
  `{:unavailable, reason}`: no archive could be had (no entry for the target, or
  the download failed), so a build from source may stand in;
  `{:refused, reason}`: an archive was had (downloaded or in the cache) and is not
  the one the checksum file names, the server failed TLS verification or
  redirected from https to http, or the checksum file is unreadable: nothing may
  be installed, and nothing may be built in its place.
  """
  @type result ::
          {:ok, binary(), String.t()} | {:unavailable, String.t()} | {:refused, String.t()}

  @doc "The targets the release workflow builds."
  @spec targets() :: [target()]
  def targets, do: @targets

  @doc "The NIF versions archives are built for (rustler's `nif_version_*` feature)."
  @spec nif_versions() :: [String.t()]
  def nif_versions, do: @nif_versions

  @doc "The checksum file's name, at the root of the package."
  @spec checksum_file_name() :: String.t()
  def checksum_file_name, do: @checksum_file

  @doc "The default download timeout, in milliseconds (see `t:options/0`)."
  @spec default_timeout_ms() :: pos_integer()
  def default_timeout_ms, do: @default_timeout_ms

  @doc "The default size limit of a downloaded archive, in bytes."
  @spec max_archive_bytes() :: pos_integer()
  def max_archive_bytes, do: @max_archive_bytes

  @doc "The size limit of the library an archive holds, in bytes."
  @spec max_library_bytes() :: pos_integer()
  def max_library_bytes, do: @max_library_bytes

  @doc """
  The running VM's target triple, normalized as Rust names targets, from
  `:erlang.system_info(:system_architecture)` (for example `x86_64-pc-linux-gnu`
  becomes `x86_64-unknown-linux-gnu`, `aarch64-apple-darwin23.4.0` becomes
  `aarch64-apple-darwin`). `:error` when it cannot be worked out.
  """
  @spec host_target() :: {:ok, target()} | :error
  def host_target do
    host_target(
      List.to_string(:erlang.system_info(:system_architecture)),
      :os.type(),
      :erlang.system_info(:wordsize)
    )
  end

  @doc false
  @spec host_target(String.t(), {atom(), atom()}, pos_integer()) :: {:ok, target()} | :error
  def host_target(_arch, {:win32, _}, 8), do: {:ok, "x86_64-pc-windows-msvc"}
  def host_target(_arch, {:win32, _}, _), do: :error

  def host_target(arch, _os, _wordsize) do
    case String.split(arch, "-") do
      [cpu, _vendor, "linux", abi] -> linux(cpu, abi)
      [cpu, _vendor, "linux"] -> linux(cpu, "gnu")
      [cpu, "apple", "darwin" <> _] -> {:ok, "#{darwin_cpu(cpu)}-apple-darwin"}
      [cpu, _vendor, "freebsd" <> _] -> {:ok, "#{cpu(cpu)}-unknown-freebsd"}
      _ -> :error
    end
  end

  defp linux(cpu, abi), do: {:ok, "#{cpu(cpu)}-unknown-linux-#{abi}"}

  defp darwin_cpu("arm"), do: "aarch64"
  defp darwin_cpu("arm64"), do: "aarch64"
  defp darwin_cpu(cpu), do: cpu(cpu)

  defp cpu("amd64"), do: "x86_64"
  defp cpu("arm64"), do: "aarch64"
  defp cpu(cpu), do: cpu

  @doc """
  The newest published NIF version (`nif_versions/0`) that a VM speaking `vm`
  (`:erlang.system_info(:nif_version)`) loads: same major version, minor not above
  the VM's. `:error` when none is.
  """
  @spec nif_version(String.t()) :: {:ok, String.t()} | :error
  def nif_version(vm) do
    with [major, minor] <- parse_nif(vm) do
      @nif_versions
      |> Enum.filter(fn built ->
        match?([^major, m] when m <= minor, parse_nif(built))
      end)
      |> Enum.max_by(&parse_nif/1, fn -> nil end)
      |> case do
        nil -> :error
        built -> {:ok, built}
      end
    end
  end

  defp parse_nif(version) do
    case Regex.run(~r/\A(\d+)\.(\d+)\z/, version) do
      [_, major, minor] -> [String.to_integer(major), String.to_integer(minor)]
      nil -> :error
    end
  end

  @doc """
  The archive's name: `libhrw_nif-v0.3.0-nif-2.16-x86_64-unknown-linux-gnu.so.tar.gz`,
  or without `lib` and with `.dll` for a Windows target.
  """
  @spec archive_name(String.t(), String.t(), target()) :: String.t()
  def archive_name(version, nif_version, target) do
    {prefix, extension} =
      if String.contains?(target, "windows"), do: {"", "dll"}, else: {"lib", "so"}

    "#{prefix}#{@crate}-v#{version}-nif-#{nif_version}-#{target}.#{extension}.tar.gz"
  end

  @doc "The one file an archive holds: its name without `.tar.gz`."
  @spec library_name(String.t()) :: String.t()
  def library_name(archive_name), do: String.replace_suffix(archive_name, ".tar.gz", "")

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
  @spec read_checksums(Path.t()) :: {:ok, %{String.t() => String.t()}} | {:error, term()}
  def read_checksums(path) do
    with {:ok, text} <- Mix.HrwNative.SafeFile.read(path, @max_checksum_file_bytes),
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
  @spec checksum_file_text(%{String.t() => String.t()}) :: String.t()
  def checksum_file_text(checksums) do
    literal =
      checksums
      |> Enum.sort()
      |> Enum.map_join(", ", fn {name, sum} -> "#{inspect(name)} => #{inspect(sum)}" end)

    "# Written by `mix hrw.native.checksum DIR`: the SHA-256 of every precompiled hrw NIF\n" <>
      "# archive. The compile task installs only an archive whose digest is listed here.\n" <>
      IO.iodata_to_binary(Code.format_string!("%{" <> literal <> "}")) <> "\n"
  end

  @doc """
  Gets the library for `opts.target`: from the cache when an archive is there,
  else downloaded from `opts.base_url` and cached. Every archive, cached or
  downloaded, is checked against the checksum file before anything is returned,
  and one that fails is refused, not replaced (see `t:result/0`). A cache folder
  that other users can write and that is not ours is neither read nor written.
  """
  @spec fetch(options()) :: result()
  def fetch(opts) do
    name = archive_name(opts.version, opts.nif_version, opts.target)

    case read_checksums(opts.checksum_file) do
      {:error, :enoent} ->
        {:unavailable, "the package has no checksum file (#{opts.checksum_file})"}

      {:error, reason} ->
        {:refused, reason}

      {:ok, checksums} ->
        case Map.fetch(checksums, name) do
          {:ok, expected} ->
            from_cache_or_download(name, expected, opts)

          :error ->
            {:unavailable,
             "no precompiled archive #{name} is listed in the checksum file " <>
               "#{opts.checksum_file} (#{listed(checksums)})"}
        end
    end
  end

  defp listed(checksums) do
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

  defp from_cache_or_download(name, expected, opts) do
    cached = Path.join(opts.cache_dir, name)

    with :ok <- usable_cache(opts.cache_dir),
         {:ok, archive} <- read_cached(cached) do
      # A cache entry that fails verification stops, as a download would: the
      # cache is written only with verified archives through exclusive temporary
      # files, so a bad entry was put there by someone else, and is kept for
      # the user to look at.
      with {:ok, library} <- verify(archive, name, expected, "the cache (#{cached})", opts) do
        {:ok, library, cached}
      end
    else
      {:error, :enoent} -> download_and_cache(name, expected, cached, opts, true)
      {:replace, _reason} -> download_and_cache(name, expected, cached, opts, true)
      {:untrusted, _reason} -> download_and_cache(name, expected, cached, opts, false)
      {:refused, _} = refused -> refused
    end
  end

  defp usable_cache(dir) do
    case Mix.HrwNative.SafeFile.private_dir(dir) do
      :ok ->
        :ok

      {:error, reason} ->
        Mix.shell().error("hrw: not using the archive cache (HRW_NATIVE_CACHE_DIR): #{reason}")
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
    case Mix.HrwNative.SafeFile.read_own(path, @max_archive_bytes) do
      {:ok, archive} -> {:ok, archive}
      {:error, :enoent} -> {:error, :enoent}
      {:error, :changed} when tries > 1 -> read_cached(path, tries - 1)
      {:error, :changed} -> {:untrusted, "#{path} keeps changing"}
      {:error, {:not_ours, reason}} -> not_ours(reason)
      {:error, reason} -> {:refused, "the cache entry #{reason}"}
    end
  end

  defp download_and_cache(name, expected, cached, opts, cache?) do
    url = String.trim_trailing(opts.base_url, "/") <> "/" <> name

    download_opts = %{
      timeout_ms: Map.get(opts, :timeout_ms, @default_timeout_ms),
      max_bytes: Map.get(opts, :max_bytes, @max_archive_bytes),
      cacerts: Map.get(opts, :cacerts),
      proxies: Map.get(opts, :proxies, Mix.HrwNative.Proxy.settings(%{}))
    }

    with {:ok, archive, from} <- Mix.HrwNative.Download.download(url, download_opts),
         {:ok, library} <- verify(archive, name, expected, from, opts) do
      # Best effort: a cache that cannot be written costs a download next time.
      if cache?, do: _ = Mix.HrwNative.SafeFile.write(cached, archive)
      {:ok, library, from}
    end
  end

  @doc """
  Verifies an archive against its checksum (`"sha256:<hex>"`) and returns the one
  library it holds. `from` says where it came from, and `opts.checksum_file`
  (when given) which checksum file spoke, for the message. Refused: a digest that
  differs, anything that is not a gzipped tar holding exactly the one regular
  file `library_name(name)`, or a library over the size limit (found while
  inflating: an archive is never inflated past it).
  """
  @spec verify(binary(), String.t(), String.t(), String.t(), map()) ::
          {:ok, binary()} | {:refused, String.t()}
  def verify(archive, name, expected, from, opts \\ %{}) do
    actual = checksum(archive)

    if actual != expected do
      file = Map.get(opts, :checksum_file, @checksum_file)

      {:refused,
       "#{name} from #{from} (#{byte_size(archive)} bytes) has #{actual}, but the " <>
         "checksum file #{file} expects #{expected}"}
    else
      with {:ok, tar} <- inflate(archive, name) do
        unpack(tar, name, library_name(name))
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
    member = archive_path |> Path.basename() |> library_name()
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
