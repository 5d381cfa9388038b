defmodule Mix.HrwNative.Precompiled do
  @moduledoc """
  The precompiled path, with OTP alone: `Mix.HrwNative.Target` (names),
  `Mix.HrwNative.Checksums` (the trust anchor), `Mix.HrwNative.Cache`,
  `Mix.HrwNative.Download` and `Mix.HrwNative.Archive` (verify and unpack), put
  together by `fetch/1`, with RustlerPrecompiled's conventions.
  """

  alias Mix.HrwNative.{Archive, Cache, Checksums, Target}

  @default_timeout_ms 30_000

  @typedoc """
  What `fetch/1` needs; `:timeout_ms`, `:max_bytes`, `:cacerts` and `:proxies`
  are `Mix.HrwNative.Download`'s options.
  """
  @type options :: %{
          required(:version) => String.t(),
          required(:checksum_file) => Path.t(),
          required(:base_url) => String.t(),
          required(:cache_dir) => Path.t() | nil,
          required(:target) => Target.t(),
          required(:nif_version) => String.t(),
          optional(:timeout_ms) => pos_integer(),
          optional(:max_bytes) => pos_integer(),
          optional(:cacerts) => [binary()] | nil,
          optional(:proxies) => Mix.HrwNative.Proxy.settings()
        }

  @typedoc """
  `{:ok, library, from}`: verified library bytes and where they came from;
  `{:unavailable, reason}`: no archive could be had (cargo may stand in);
  `{:refused, reason}`: what was had must not be installed, nor anything built
  in its place (checksum, TLS, redirect, checksum file).
  """
  @type result ::
          {:ok, binary(), String.t()} | {:unavailable, String.t()} | {:refused, String.t()}

  @doc "The default download timeout, in milliseconds (see `t:options/0`)."
  @spec default_timeout_ms() :: pos_integer()
  def default_timeout_ms, do: @default_timeout_ms

  @doc """
  The library for `opts.target`, from the cache or downloaded and cached; every
  archive is checked against the checksum file first, and one that fails is
  refused, not replaced (see `t:result/0`).
  """
  @spec fetch(options()) :: result()
  def fetch(opts) do
    name = Target.archive_name(opts.version, opts.nif_version, opts.target)

    case Checksums.read(opts.checksum_file) do
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
               "#{opts.checksum_file} (#{Checksums.listed(checksums)})"}
        end
    end
  end

  defp from_cache_or_download(name, expected, %{cache_dir: nil} = opts),
    do: download_and_cache(name, expected, nil, opts, false)

  defp from_cache_or_download(name, expected, opts) do
    cached = Path.join(opts.cache_dir, name)

    with {:ok, archive} <- Cache.read(opts.cache_dir, cached) do
      # A cache entry that fails verification stops, as a download would: the
      # cache is written only with verified archives through exclusive temporary
      # files, so a bad entry was put there by someone else, and is kept for
      # the user to look at.
      with {:ok, library} <-
             Archive.verify(archive, name, expected, "the cache (#{cached})", opts) do
        {:ok, library, cached}
      end
    else
      {:error, :enoent} -> download_and_cache(name, expected, cached, opts, true)
      {:replace, _reason} -> download_and_cache(name, expected, cached, opts, true)
      {:untrusted, _reason} -> download_and_cache(name, expected, cached, opts, false)
      {:refused, _} = refused -> refused
    end
  end

  defp download_and_cache(name, expected, cached, opts, cache?) do
    # The name goes at the end of the base URL's path; its query (a signed
    # URL's) is kept, its fragment (never sent) dropped.
    {base, query} =
      case opts.base_url |> String.split("#", parts: 2) |> hd() |> String.split("?", parts: 2) do
        [base, query] -> {base, "?" <> query}
        [base] -> {base, ""}
      end

    url = String.trim_trailing(base, "/") <> "/" <> name <> query

    download_opts = %{
      timeout_ms: Map.get(opts, :timeout_ms, @default_timeout_ms),
      max_bytes: Map.get(opts, :max_bytes, Archive.max_archive_bytes()),
      cacerts: Map.get(opts, :cacerts),
      proxies: Map.get(opts, :proxies, Mix.HrwNative.Proxy.settings(%{}))
    }

    with {:ok, archive, from} <- Mix.HrwNative.Download.download(url, download_opts),
         {:ok, library} <- Archive.verify(archive, name, expected, from, opts) do
      # Best effort: a cache that cannot be written costs a download next time.
      if cache?, do: Mix.HrwNative.SafeFile.write(cached, archive)
      {:ok, library, from}
    end
  end
end
