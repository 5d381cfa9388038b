defmodule Mix.HrwNative.Precompiled do
  @moduledoc """
  Precompiled hrw NIFs: naming, verification, download and cache, with OTP alone
  (`:httpc`, `:ssl`, `:public_key`, `:crypto`, `:erl_tar`; no Hex package).

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
  @default_timeout_ms 30_000
  @loopback ["127.0.0.1", "localhost", "::1"]

  @typedoc "A Rust target triple, such as `x86_64-unknown-linux-gnu`."
  @type target :: String.t()

  @typedoc """
  What `fetch/1` needs: `:version` (hrw's), `:checksum_file`, `:base_url`,
  `:cache_dir`, `:target`, `:nif_version`, and optionally `:timeout_ms` (the longest
  wait for a connection or for the next bytes; the whole download gets 20×) and
  `:max_bytes` (the archive's size limit).
  """
  @type options :: %{
          required(:version) => String.t(),
          required(:checksum_file) => Path.t(),
          required(:base_url) => String.t(),
          required(:cache_dir) => Path.t(),
          required(:target) => target(),
          required(:nif_version) => String.t(),
          optional(:timeout_ms) => pos_integer(),
          optional(:max_bytes) => pos_integer()
        }

  @typedoc """
  `{:ok, library, from}`: verified library bytes and where the archive came from;
  `{:unavailable, reason}`: no archive could be had (no entry for the target, or
  the download failed), so a build from source may stand in;
  `{:refused, reason}`: an archive was had and is not the one the checksum file
  names (or the checksum file is unreadable): nothing may be installed.
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
    :ok = Mix.HrwNative.Download.on_code_path([:crypto])
    "sha256:" <> Base.encode16(:crypto.hash(:sha256, data), case: :lower)
  end

  @doc """
  Reads a checksum file: a literal map of archive names to `"sha256:<hex>"`. It is
  parsed, never evaluated. `{:error, :enoent}` when there is no file.
  """
  @spec read_checksums(Path.t()) :: {:ok, %{String.t() => String.t()}} | {:error, term()}
  def read_checksums(path) do
    with {:ok, text} <- File.read(path),
         {:ok, {:%{}, _, pairs}} <- Code.string_to_quoted(text),
         true <- Enum.all?(pairs, &valid_entry?/1) do
      {:ok, Map.new(pairs)}
    else
      {:error, :enoent} -> {:error, :enoent}
      _ -> {:error, "#{path} is not a map of archive names to \"sha256:<64 hex digits>\""}
    end
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
  Checks that `url` may be downloaded from: `https`, or plain `http` only to a
  loopback host (`127.0.0.1`, `localhost`, `::1`), for tests and local mirrors.
  """
  @spec check_url(String.t()) :: :ok | {:error, String.t()}
  def check_url(url) do
    case URI.parse(url) do
      %URI{scheme: "https", host: host} when is_binary(host) and host != "" ->
        :ok

      %URI{scheme: "http", host: host} when host in @loopback ->
        :ok

      _ ->
        {:error,
         "#{inspect(url)} is not an https URL (plain http is allowed only to " <>
           "127.0.0.1, localhost or [::1])"}
    end
  end

  @doc """
  Gets the library for `opts.target`: from the cache when a verified archive is
  there, else downloaded from `opts.base_url` and cached. Every archive is checked
  against the checksum file before anything is returned. See `t:result/0`.
  """
  @spec fetch(options()) :: result()
  def fetch(opts) do
    name = archive_name(opts.version, opts.nif_version, opts.target)

    case read_checksums(opts.checksum_file) do
      {:error, :enoent} ->
        {:unavailable, "the package has no #{@checksum_file}"}

      {:error, reason} ->
        {:refused, reason}

      {:ok, checksums} ->
        case Map.fetch(checksums, name) do
          {:ok, expected} ->
            from_cache_or_download(name, expected, opts)

          :error ->
            {:unavailable,
             "no precompiled archive #{name} is listed in #{@checksum_file} (it lists " <>
               "#{map_size(checksums)} archives)"}
        end
    end
  end

  defp from_cache_or_download(name, expected, opts) do
    cached = Path.join(opts.cache_dir, name)

    with {:ok, archive} <- File.read(cached),
         {:ok, library} <- verify(archive, name, expected, "the cache (#{cached})") do
      {:ok, library, cached}
    else
      {:error, :enoent} ->
        download_and_cache(name, expected, cached, opts)

      _unreadable_or_refused ->
        # A damaged cache entry is dropped and fetched again: the cache is never
        # trusted, only the checksum file is.
        _ = File.rm(cached)
        download_and_cache(name, expected, cached, opts)
    end
  end

  defp download_and_cache(name, expected, cached, opts) do
    url = String.trim_trailing(opts.base_url, "/") <> "/" <> name
    timeout = Map.get(opts, :timeout_ms, @default_timeout_ms)
    max = Map.get(opts, :max_bytes, @max_archive_bytes)

    with :ok <- url_allowed(url),
         {:ok, archive} <- Mix.HrwNative.Download.download(url, timeout, max),
         {:ok, library} <- verify(archive, name, expected, url) do
      cache(cached, archive)
      {:ok, library, url}
    end
  end

  @doc false
  # check_url/1 as a fetch result: a URL that is not allowed refuses the archive.
  @spec url_allowed(String.t()) :: :ok | {:refused, String.t()}
  def url_allowed(url) do
    case check_url(url) do
      :ok -> :ok
      {:error, reason} -> {:refused, "refusing to download from " <> reason}
    end
  end

  # Best effort: a cache that cannot be written costs a download next time.
  defp cache(path, archive) do
    tmp = "#{path}.#{System.unique_integer([:positive])}.tmp"

    with :ok <- File.mkdir_p(Path.dirname(path)),
         :ok <- File.write(tmp, archive),
         :ok <- File.rename(tmp, path) do
      :ok
    else
      _ -> _ = File.rm(tmp)
    end
  end

  @doc """
  Verifies an archive against its checksum (`"sha256:<hex>"`) and returns the one
  library it holds. `from` says where it came from, for the message. Refused: a
  digest that differs, anything that is not a gzipped tar holding exactly the one
  regular file `library_name(name)`, or a library over the size limit.
  """
  @spec verify(binary(), String.t(), String.t(), String.t()) ::
          {:ok, binary()} | {:refused, String.t()}
  def verify(archive, name, expected, from) do
    library = library_name(name)
    actual = checksum(archive)

    cond do
      actual != expected ->
        {:refused,
         "#{name} from #{from} (#{byte_size(archive)} bytes) has #{actual}, but " <>
           "#{@checksum_file} expects #{expected}"}

      true ->
        unpack(archive, name, library)
    end
  end

  defp unpack(archive, name, library) do
    case :erl_tar.table({:binary, archive}, [:compressed, :verbose]) do
      {:ok, [{member, :regular, size, _, _, _, _}]} when size <= @max_library_bytes ->
        with true <- List.to_string(member) == library,
             {:ok, [{_, bytes}]} when byte_size(bytes) == size <-
               :erl_tar.extract({:binary, archive}, [:compressed, :memory]) do
          {:ok, bytes}
        else
          _ -> {:refused, "#{name} holds #{inspect(List.to_string(member))}, not #{library}"}
        end

      {:ok, members} ->
        listed = Enum.map_join(members, ", ", &describe_member/1)
        {:refused, "#{name} must hold exactly one file, #{library}; it holds: #{listed}"}

      {:error, reason} ->
        {:refused, "#{name} is not a gzipped tar archive (#{inspect(reason)})"}
    end
  end

  defp describe_member({member, type, size, _, _, _, _}),
    do: "#{List.to_string(member)} (#{type}, #{size} bytes)"

  @doc """
  Writes the archive `archive_path` holding `library_path` as the one file
  `library_name(Path.basename(archive_path))` (the producer side).
  """
  @spec pack(Path.t(), Path.t()) :: :ok
  def pack(library_path, archive_path) do
    member = archive_path |> Path.basename() |> library_name()
    File.mkdir_p!(Path.dirname(archive_path))
    tmp = archive_path <> ".tmp"

    :ok =
      :erl_tar.create(
        String.to_charlist(tmp),
        [{String.to_charlist(member), String.to_charlist(library_path)}],
        [:compressed]
      )

    File.rename!(tmp, archive_path)
  end
end
