defmodule Mix.Tasks.Compile.HrwNative do
  @shortdoc "Installs the hrw NIF (precompiled and verified, or built with cargo) into priv/native"
  @moduledoc """
  Installs the hrw NIF as `priv/native/libhrw_nif.so` (`.dll` on Windows) of the
  application's build directory, `_build/<env>/lib/hrw` (`:code.priv_dir(:hrw)`,
  also when hrw is a dependency, and inside a release). Needs no Hex package.

  In `:prod` (the environment Mix compiles a dependency in) it takes the
  precompiled library for this machine (`Mix.HrwNative.Precompiled`): the
  archive listed in `checksum-Elixir.HRW.Native.exs`, from the per-user cache or
  downloaded from the base URL, installed only when its SHA-256 is the listed
  one and it holds nothing but the library. No archive, or a failed download:
  cargo builds it when it is on `PATH`, else the task raises saying how to. An
  archive that does not verify, a certificate that fails, a redirect from https
  to http or a bad checksum file: the task raises and installs nothing.

  It builds with cargo in any other environment, or when `HRW_NATIVE_BUILD` (or
  `RUSTLER_PRECOMPILED_FORCE_BUILD_ALL`) is `1`/`true` or `config :hrw,
  build_from_source: true`: `cargo build --message-format=json-render-diagnostics`
  says where the library is (so `CARGO_TARGET_DIR` and cargo configs are
  honoured), and a failed build raises. The library is written to an exclusively
  created file next to its destination and renamed over it (never in place,
  never through a link); an unchanged one is not copied. Every `HRW_NATIVE_*`
  variable is checked up front (`check_settings/1`); docs/NATIVE.md has the
  table, the threat model and what the download guarantees.
  """
  use Mix.Task.Compiler

  alias Mix.HrwNative.{Precompiled, Proxy, Wire}

  @crate "hrw_nif"

  @impl Mix.Task.Compiler
  def run(_args) do
    native = Path.expand("../../native", __DIR__)
    {obtain(native, destination(), Mix.env(), options(System.get_env())), []}
  end

  @doc false
  # The decision, everything it depends on passed in (`opts`: options/1's map):
  # :ok when a new library was installed at `dest`, :noop when it was there.
  @spec obtain(Path.t(), Path.t(), atom(), map()) :: :ok | :noop
  def obtain(native, dest, env, opts) do
    case from_source(env, opts) do
      {:yes, _why} -> build_or_raise(native, dest, env, opts, nil)
      :no -> precompiled(native, dest, env, opts)
    end
  end

  defp precompiled(native, dest, env, opts) do
    with :ok <- installable(dest),
         {:ok, target} <- opts.target,
         {:ok, nif} <- opts.nif_version,
         fetch_opts = Map.merge(opts, %{target: target, nif_version: nif}),
         {:ok, library, from} <- Precompiled.fetch(fetch_opts) do
      name = Mix.HrwNative.Target.archive_name(opts.version, nif, target)
      installed = install!(library, dest)

      Mix.shell().info(
        "Installed the precompiled hrw NIF #{name} (SHA-256 verified) from #{from}" <>
          if(installed, do: "", else: " (unchanged)")
      )

      if installed, do: :ok, else: :noop
    else
      {:unavailable, reason} ->
        build_or_raise(native, dest, env, opts, reason)

      {:refused, reason} ->
        Mix.raise(
          "refusing the precompiled hrw NIF: #{reason}. Nothing was installed. " <>
            "If the mirror or the cache (#{opts.cache_dir || "none"}) holds a wrong " <>
            "file, remove it; " <>
            "HRW_NATIVE_BUILD=1 builds from source with cargo instead"
        )

      {:error, :untrusted, reason} ->
        Mix.raise("cannot install the hrw NIF: #{reason}")

      {:error, reason} ->
        build_or_raise(native, dest, env, opts, reason)
    end
  end

  defp build_or_raise(native, dest, env, opts, reason) do
    case {opts.cargo, reason} do
      {nil, nil} ->
        Mix.raise(
          "hrw is set to build its NIF from source (#{elem(from_source(env, opts), 1)}), " <>
            "which needs cargo (the Rust toolchain, https://rustup.rs); none is on PATH"
        )

      {nil, reason} ->
        Mix.raise(
          "no precompiled hrw NIF for #{describe_target(opts)}: #{reason}. To build it " <>
            "from source instead, put cargo (the Rust toolchain, https://rustup.rs) on " <>
            "PATH and compile again"
        )

      {cargo, nil} ->
        build(native, dest, env, cargo, Map.get(opts, :cross_target))

      {cargo, reason} ->
        # Said only when a library is installed: a build that changes nothing (a
        # repository with no published archives, compiled again) stays quiet.
        with :ok <- build(native, dest, env, cargo, Map.get(opts, :cross_target)) do
          Mix.shell().info(
            "No precompiled hrw NIF for #{describe_target(opts)} (#{reason}): built it with cargo"
          )
        end
    end
  end

  defp describe_target(opts) do
    target = ok_or(opts.target, "this machine (#{opts.architecture})")
    "#{target} (NIF #{ok_or(opts.nif_version, opts.vm_nif_version)})"
  end

  defp ok_or({:ok, value}, _default), do: value
  defp ok_or(_error, default), do: default

  # {:yes, why} when the library must be built with cargo, :no to try an archive.
  defp from_source(env, opts) do
    cond do
      env != :prod -> {:yes, "MIX_ENV=#{env}"}
      opts.force_build -> {:yes, "HRW_NATIVE_BUILD or config :hrw, build_from_source"}
      true -> :no
    end
  end

  @doc false
  # Everything the decision depends on, read from the environment `env` (a map of
  # OS variables), the application config and hrw's mix.exs.
  @spec options(%{String.t() => String.t()}) :: map()
  def options(env) do
    :ok = check_settings(env)
    vm_nif = List.to_string(:erlang.system_info(:nif_version))
    architecture = List.to_string(:erlang.system_info(:system_architecture))

    host =
      with :error <- Mix.HrwNative.Target.host_target(),
           do: {:error, "its target triple cannot be worked out from #{architecture}"}

    {target, cross_target} =
      case nonempty(env["HRW_NATIVE_TARGET"]) do
        nil -> {host, nil}
        t when {:ok, t} == host -> {host, nil}
        t -> {{:ok, t}, t}
      end

    nif_version =
      with :error <- Mix.HrwNative.Target.nif_version(vm_nif) do
        {:error,
         "this VM speaks NIF #{vm_nif}; archives are built for " <>
           Enum.join(Mix.HrwNative.Target.nif_versions(), ", ")}
      end

    project = Mix.Project.config()

    %{
      version: project[:version],
      checksum_file: Path.expand("../../" <> Mix.HrwNative.Checksums.file_name(), __DIR__),
      base_url: nonempty(env["HRW_NATIVE_BASE_URL"]) || project[:hrw_native][:base_url],
      cache_dir: nonempty(env["HRW_NATIVE_CACHE_DIR"]) || user_cache_dir(env),
      target: target,
      cross_target: cross_target,
      nif_version: nif_version,
      vm_nif_version: vm_nif,
      architecture: architecture,
      timeout_ms: timeout(env["HRW_NATIVE_TIMEOUT_MS"]),
      cacerts: cacerts(nonempty(env["HRW_NATIVE_CACERTS_PATH"])),
      proxies: Proxy.settings(env),
      force_build:
        truthy?(env["HRW_NATIVE_BUILD"]) or
          truthy?(env["RUSTLER_PRECOMPILED_FORCE_BUILD_ALL"]) or
          Application.get_env(:hrw, :build_from_source, false) == true,
      cargo: System.find_executable("cargo")
    }
  end

  # The per-user cache (docs/NATIVE.md). A relative XDG_CACHE_HOME is ignored, as
  # the XDG rule says (:filename.basedir/2 would take it); no absolute HOME: nil.
  defp user_cache_dir(env) do
    xdg = nonempty(env["XDG_CACHE_HOME"])
    home = nonempty(env["HOME"])

    cond do
      :os.type() != {:unix, :linux} and not match?({:unix, :freebsd}, :os.type()) ->
        :filename.basedir(:user_cache, "hrw")

      xdg && Path.type(xdg) == :absolute ->
        Path.join(xdg, "hrw")

      home && Path.type(home) == :absolute ->
        Path.join([home, ".cache", "hrw"])

      true ->
        nil
    end
  end

  # The CA bundle, read and parsed once here (the download takes the result).
  defp cacerts(nil), do: nil

  defp cacerts(path) do
    case Mix.HrwNative.TLS.read_pem(path) do
      {:ok, certs} ->
        certs

      {:error, reason} ->
        setting_error(
          "HRW_NATIVE_CACERTS_PATH",
          path,
          "a PEM file of CA certificates (#{reason})"
        )
    end
  end

  defp nonempty(value) when value in [nil, ""], do: nil
  defp nonempty(value), do: value

  defp truthy?(value), do: value in ["1", "true"]

  defp timeout(value) when value in [nil, ""], do: Precompiled.default_timeout_ms()
  defp timeout(value), do: String.to_integer(value)

  @max_timeout_ms 3_600_000
  @settings ~w(HRW_NATIVE_BASE_URL HRW_NATIVE_BUILD HRW_NATIVE_CACERTS_PATH
               HRW_NATIVE_CACHE_DIR HRW_NATIVE_TARGET HRW_NATIVE_TIMEOUT_MS)

  @doc false
  # Every HRW_NATIVE_* variable, checked before anything is done: an unknown name
  # or a bad value raises naming the variable and what it accepts. Empty is unset.
  @spec check_settings(%{String.t() => String.t()}) :: :ok
  def check_settings(env) do
    for {name, value} <- Enum.sort(env),
        String.starts_with?(name, "HRW_NATIVE_"),
        value != "" do
      case check_setting(name, value) do
        :ok ->
          :ok

        {:error, accepted} ->
          setting_error(name, value, accepted)
      end
    end

    :ok
  end

  # A URL may hold a secret: what is wrong with it is said, not what it holds.
  defp setting_error(name, value, accepted) do
    shown = if name == "HRW_NATIVE_BASE_URL", do: "", else: ", not #{inspect(Wire.escape(value))}"
    Mix.raise("#{name} must be #{accepted}#{shown}")
  end

  defp check_setting("HRW_NATIVE_BASE_URL", url) do
    case Wire.parse(url) do
      {:ok, _} ->
        :ok

      {:error, reason} ->
        {:error,
         "an https URL (plain http only to 127.0.0.1, localhost or [::1]); its value #{reason}"}
    end
  end

  defp check_setting("HRW_NATIVE_BUILD", value) do
    if value in ~w(0 1 false true), do: :ok, else: {:error, "1 or true (build), 0 or false"}
  end

  # Read and parsed once, by options/1.
  defp check_setting("HRW_NATIVE_CACERTS_PATH", _path), do: :ok

  defp check_setting("HRW_NATIVE_CACHE_DIR", dir) do
    if Path.type(dir) == :absolute and not String.contains?(dir, <<0>>),
      do: :ok,
      else: {:error, "an absolute path"}
  end

  defp check_setting("HRW_NATIVE_TARGET", target) do
    if target =~ ~r/\A[a-z0-9_]+(-[a-z0-9_.]+){1,3}\z/,
      do: :ok,
      else: {:error, "a Rust target triple such as x86_64-unknown-linux-gnu"}
  end

  defp check_setting("HRW_NATIVE_TIMEOUT_MS", value) do
    case Integer.parse(value) do
      {ms, ""} when ms >= 1 and ms <= @max_timeout_ms -> :ok
      _ -> {:error, "a whole number of milliseconds from 1 to #{@max_timeout_ms}"}
    end
  end

  defp check_setting(_name, _value),
    do: {:error, "unset: it is not a setting of hrw's (they are #{Enum.join(@settings, ", ")})"}

  @doc false
  # Builds with `cargo` in `native` and installs the library at `dest`; :ok when a
  # new library was installed, :noop when `dest` already held the same bytes.
  # With `cross_target`, cargo builds for that target (`--target`), and the library
  # is installed only if cargo put it in that target's folder.
  @spec build(Path.t(), Path.t(), atom(), String.t(), String.t() | nil) :: :ok | :noop
  def build(native, dest, env, cargo, cross_target \\ nil) do
    with {:error, :untrusted, reason} <- installable(dest) do
      Mix.raise("cannot install the hrw NIF: #{reason}")
    end

    unless File.exists?(dest) do
      Mix.shell().info("Building the hrw NIF with cargo (a first build takes a minute or more)")
    end

    extra = if cross_target, do: ["--target", cross_target], else: []
    library = cargo_library(native, env, cargo, extra)

    if cross_target && cross_target not in Path.split(library) do
      Mix.raise(
        "cargo was asked to build for #{cross_target} but reported #{library}, which is " <>
          "not in a #{cross_target} folder: nothing was installed"
      )
    end

    case Mix.HrwNative.SafeFile.read(library, Mix.HrwNative.Archive.max_library_bytes()) do
      {:ok, bytes} -> if install!(bytes, dest), do: :ok, else: :noop
      {:error, :enoent} -> Mix.raise("cannot read the library cargo built: #{library} is gone")
      {:error, reason} -> Mix.raise("cannot read the library cargo built: #{reason}")
    end
  end

  @doc false
  # Runs `cargo build` for `env` (plus `extra` arguments, such as `--target T`) in
  # `native` with the OS environment `cmd_env` added, and returns the path of the
  # library cargo reports. Raises when cargo fails or reports no single library.
  @spec cargo_library(Path.t(), atom(), String.t(), [String.t()], [{String.t(), String.t()}]) ::
          Path.t()
  def cargo_library(native, env, cargo, extra \\ [], cmd_env \\ []) do
    args = ["build", "-p", @crate, "--message-format=json-render-diagnostics"]
    args = args ++ cargo_options(env) ++ extra

    # stdout carries cargo's JSON messages; its stderr (progress, warnings, errors
    # rendered for people) goes straight to ours.
    {output, status} = System.cmd(cargo, args, cd: native, env: cmd_env)

    if status != 0 do
      hint =
        case extra do
          ["--target", target | _] ->
            " Nothing was installed. A build for #{target} needs its standard library " <>
              "(rustup target add #{target}) and a linker for it."

          _ ->
            ""
        end

      Mix.raise(
        "cargo build of #{@crate} failed (exit status #{status}; its errors are above). " <>
          "Command: cargo #{Enum.join(args, " ")} in #{native}." <> hint
      )
    end

    library(messages(output), native)
  end

  @impl Mix.Task.Compiler
  def clean do
    _ = File.rm(destination())
    :ok
  end

  @doc false
  # The cargo options per Mix environment: the release profile everywhere (tests
  # and benchmarks run the NIF as production does); test builds add the work
  # probes (test/support/native_probe.ex), which HRW.Native declares from this list.
  @spec cargo_options(atom()) :: [String.t()]
  def cargo_options(:test), do: cargo_options(:prod) ++ ["--features", "hrw_nif/work-probes"]
  def cargo_options(_env), do: ["--release", "--quiet"]

  # Where :code.priv_dir(:hrw) looks: the build directory's priv/, not the source
  # tree's (which, for a dependency, may be shared by projects and environments).
  defp destination do
    extension = if match?({:win32, _}, :os.type()), do: ".dll", else: ".so"
    Path.join([Mix.Project.app_path(), "priv", "native", "libhrw_nif" <> extension])
  end

  defp messages(output) do
    for line <- String.split(output, "\n"),
        String.starts_with?(line, "{"),
        {:ok, %{} = message} <- [Mix.HrwNative.JSON.decode(line)],
        do: message
  end

  # The cdylib that cargo reports for the crate: exactly one artifact, with exactly
  # one loadable library among its files (Windows adds an import library and a pdb).
  defp library(messages, native) do
    artifacts =
      for %{"reason" => "compiler-artifact", "target" => %{"name" => @crate} = target} = message <-
            messages,
          "cdylib" in List.wrap(target["kind"]),
          do: message

    case artifacts do
      [%{"filenames" => files}] when is_list(files) ->
        case Enum.filter(files, &(is_binary(&1) and Path.extname(&1) in ~w(.so .dylib .dll))) do
          [file] ->
            if File.regular?(file) do
              file
            else
              Mix.raise(
                "cargo reported the #{@crate} library at #{file}, but there is no file there"
              )
            end

          libraries ->
            Mix.raise(
              "expected one loadable library among the files cargo reported for " <>
                "#{@crate}, found #{length(libraries)}: #{Enum.join(files, ", ")}"
            )
        end

      [] ->
        Mix.raise(
          "cargo build succeeded in #{native} but reported no cdylib artifact for #{@crate} " <>
            "(#{length(messages)} JSON messages read; is the crate's crate-type still cdylib?)"
        )

      _ ->
        Mix.raise(
          "cargo reported #{length(artifacts)} cdylib artifacts for #{@crate}, expected one"
        )
    end
  end

  # :ok when the folder of `dest` may be written (Mix.HrwNative.SafeFile.trusted_dir/1).
  defp installable(dest) do
    case Mix.HrwNative.SafeFile.trusted_dir(Path.dirname(dest)) do
      :ok -> :ok
      {:error, reason} -> {:error, :untrusted, reason}
    end
  end

  # Returns true when it installed a new library, false when the same bytes were
  # there. Written through an exclusive temporary file renamed over `dest`.
  defp install!(new, dest) do
    if Mix.HrwNative.SafeFile.read_own(dest, byte_size(new)) == {:ok, new} do
      false
    else
      case Mix.HrwNative.SafeFile.write(dest, new) do
        :ok ->
          true

        {:error, reason} ->
          Mix.raise("cannot install the hrw NIF at #{dest}: #{:file.format_error(reason)}")
      end
    end
  end
end
