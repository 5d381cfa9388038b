defmodule Mix.Tasks.Compile.HrwNative do
  @shortdoc "Installs the hrw NIF (precompiled and verified, or built with cargo) into priv/native"
  @moduledoc """
  Installs the hrw NIF as `priv/native/libhrw_nif.so` (`.dll` on Windows) of the
  application's build directory, `_build/<env>/lib/hrw`: the directory
  `:code.priv_dir(:hrw)` names, also when hrw is a dependency of another project
  (then under that project's `_build`) and inside a release. Needs no Hex package.

  ## Precompiled or built from source

  When hrw is compiled in `:prod` (the environment Mix compiles a dependency in),
  the task first looks for a precompiled library (`Mix.HrwNative.Precompiled`):
  the archive for this machine's target triple and NIF version must be listed in
  the package's `checksum-Elixir.HRW.Native.exs`; it is taken from the per-user
  cache or downloaded from the base URL (`hrw_native: [base_url: ...]` in hrw's
  `mix.exs`, overridden by `HRW_NATIVE_BASE_URL`), and installed only when its
  SHA-256 is the listed one and it holds nothing but the library.

    * No archive for the target, or a failed download (no answer, an HTTP error,
      a timeout): the library is built with cargo when cargo is on `PATH`; without
      cargo the task raises, naming the target and how to build from source.
    * An archive that does not verify (checksum, truncated, oversized, other
      contents): the task raises and installs nothing, cargo or not.

  It builds from source, as below, in any other environment (the repository's own
  dev and test builds: test builds add cargo features that no archive has), when
  `HRW_NATIVE_BUILD` (or RustlerPrecompiled's `RUSTLER_PRECOMPILED_FORCE_BUILD_ALL`)
  is `1` or `true`, or with `config :hrw, build_from_source: true`.

  Environment: `HRW_NATIVE_BASE_URL` (a mirror; plain http only to a loopback
  host), `HRW_NATIVE_CACHE_DIR` (default `:filename.basedir(:user_cache, "hrw")`,
  `~/.cache/hrw` on Linux), `HRW_NATIVE_TARGET` (the triple whose archive to use),
  `HRW_NATIVE_TIMEOUT_MS` (default 30000: the longest wait for a connection or
  the next bytes; a whole download gets 20 times that), `HRW_NATIVE_CACERTS_PATH`
  (a PEM file of CA certificates instead of the OS's).

  ## Building with cargo

  The task builds the `hrw_nif` crate of `native/`. Cargo decides what to rebuild
  and says where the library is: the task reads the `compiler-artifact` message of
  `cargo build --message-format=json-render-diagnostics`, so `CARGO_TARGET_DIR`,
  `build.target-dir` and `build.target` in a cargo config are honoured. When cargo
  fails, or reports no library, the task raises saying what went wrong; it never
  installs a library it did not just get from cargo or verify.

  The library is copied next to its destination and then renamed over it, so a
  library already loaded by a running VM is never overwritten in place; an
  unchanged library is not copied at all.
  """
  use Mix.Task.Compiler

  alias Mix.HrwNative.Precompiled

  @crate "hrw_nif"

  @impl Mix.Task.Compiler
  def run(_args) do
    native = Path.expand("../../native", __DIR__)
    {obtain(native, destination(), Mix.env(), options(System.get_env())), []}
  end

  @doc false
  # The decision, with everything it depends on passed in (tests call it):
  # `opts` is `options/1`'s map. :ok when a new library was installed at `dest`,
  # :noop when it already held the same bytes.
  @spec obtain(Path.t(), Path.t(), atom(), map()) :: :ok | :noop
  def obtain(native, dest, env, opts) do
    case from_source(env, opts) do
      {:yes, _why} -> build_or_raise(native, dest, env, opts, nil)
      :no -> precompiled(native, dest, env, opts)
    end
  end

  defp precompiled(native, dest, env, opts) do
    with {:ok, target} <- opts.target,
         {:ok, nif} <- opts.nif_version,
         fetch_opts = Map.merge(opts, %{target: target, nif_version: nif}),
         {:ok, library, from} <- Precompiled.fetch(fetch_opts) do
      name = Precompiled.archive_name(opts.version, nif, target)

      Mix.shell().info(
        "Installing the precompiled hrw NIF #{name} (SHA-256 verified) from #{from}"
      )

      if install(library, dest), do: :ok, else: :noop
    else
      {:unavailable, reason} ->
        build_or_raise(native, dest, env, opts, reason)

      {:refused, reason} ->
        Mix.raise(
          "refusing the precompiled hrw NIF: #{reason}. Nothing was installed. " <>
            "If the mirror (HRW_NATIVE_BASE_URL) or the cache " <>
            "(#{opts.cache_dir}) holds a wrong file, remove it; " <>
            "HRW_NATIVE_BUILD=1 builds from source with cargo instead"
        )

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
            "PATH and compile again. Archives exist for: #{Enum.join(Precompiled.targets(), ", ")}"
        )

      {cargo, nil} ->
        build(native, dest, env, cargo)

      {cargo, reason} ->
        # Said only when a library is installed: a build that changes nothing (a
        # repository with no published archives, compiled again) stays quiet.
        with :ok <- build(native, dest, env, cargo) do
          Mix.shell().info(
            "No precompiled hrw NIF for #{describe_target(opts)} (#{reason}): built it with cargo"
          )
        end
    end
  end

  defp describe_target(opts) do
    target =
      case opts.target do
        {:ok, target} -> target
        _ -> "this machine (#{opts.architecture})"
      end

    nif =
      case opts.nif_version do
        {:ok, nif} -> nif
        _ -> opts.vm_nif_version
      end

    "#{target} (NIF #{nif})"
  end

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
    vm_nif = List.to_string(:erlang.system_info(:nif_version))
    architecture = List.to_string(:erlang.system_info(:system_architecture))

    target =
      case env["HRW_NATIVE_TARGET"] do
        t when t in [nil, ""] ->
          with :error <- Precompiled.host_target(),
               do: {:error, "its target triple cannot be worked out from #{architecture}"}

        t ->
          {:ok, t}
      end

    nif_version =
      with :error <- Precompiled.nif_version(vm_nif) do
        {:error,
         "this VM speaks NIF #{vm_nif}; archives are built for " <>
           Enum.join(Precompiled.nif_versions(), ", ")}
      end

    project = Mix.Project.config()

    %{
      version: project[:version],
      checksum_file: Path.expand("../../" <> Precompiled.checksum_file_name(), __DIR__),
      base_url: nonempty(env["HRW_NATIVE_BASE_URL"]) || project[:hrw_native][:base_url],
      cache_dir: nonempty(env["HRW_NATIVE_CACHE_DIR"]) || :filename.basedir(:user_cache, "hrw"),
      target: target,
      nif_version: nif_version,
      vm_nif_version: vm_nif,
      architecture: architecture,
      timeout_ms: timeout(env["HRW_NATIVE_TIMEOUT_MS"]),
      force_build:
        truthy?(env["HRW_NATIVE_BUILD"]) or
          truthy?(env["RUSTLER_PRECOMPILED_FORCE_BUILD_ALL"]) or
          Application.get_env(:hrw, :build_from_source, false) == true,
      cargo: System.find_executable("cargo")
    }
  end

  defp nonempty(value) when value in [nil, ""], do: nil
  defp nonempty(value), do: value

  defp truthy?(value), do: value in ["1", "true"]

  defp timeout(value) when value in [nil, ""], do: Precompiled.default_timeout_ms()

  defp timeout(value) do
    case Integer.parse(value) do
      {ms, ""} when ms > 0 ->
        ms

      _ ->
        Mix.raise(
          "HRW_NATIVE_TIMEOUT_MS must be a positive number of milliseconds, not #{inspect(value)}"
        )
    end
  end

  @doc false
  # Builds with `cargo` in `native` and installs the library at `dest`; :ok when a
  # new library was installed, :noop when `dest` already held the same bytes.
  @spec build(Path.t(), Path.t(), atom(), String.t()) :: :ok | :noop
  def build(native, dest, env, cargo) do
    unless File.exists?(dest) do
      Mix.shell().info("Building the hrw NIF with cargo (a first build takes a minute or more)")
    end

    if install(File.read!(cargo_library(native, env, cargo)), dest), do: :ok, else: :noop
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
      Mix.raise(
        "cargo build of #{@crate} failed (exit status #{status}; its errors are above). " <>
          "Command: cargo #{Enum.join(args, " ")} in #{native}"
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
  # The cargo options for a Mix environment, after `build -p hrw_nif
  # --message-format=...`: the one place to add a profile or features per env.
  # Every env builds the release profile: the NIF runs its tests and benchmarks
  # as it runs in production. A dependency is compiled in :prod. Test builds add
  # the work probes (`HRW.Native.probe/2`, test/hrw/budget_test.exs), whose stubs
  # `HRW.Native` declares under the same condition.
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
        {:ok, %{} = message} <- [decode_json(line)],
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

  # Returns true when it installed a new library, false when the same bytes were there.
  defp install(new, dest) do
    if File.read(dest) == {:ok, new} do
      false
    else
      File.mkdir_p!(Path.dirname(dest))
      tmp = dest <> ".tmp"
      File.write!(tmp, new)
      File.rename!(tmp, dest)
      true
    end
  end

  # A JSON decoder just large enough for cargo's messages: OTP 25 has no :json and
  # this task cannot depend on a Hex package. Returns {:ok, term} or :error.
  @doc false
  @spec decode_json(binary()) :: {:ok, term()} | :error
  def decode_json(text) do
    case json_value(skip(text)) do
      {value, rest} -> if skip(rest) == "", do: {:ok, value}, else: :error
    end
  catch
    :invalid_json -> :error
  end

  defp json_value("{" <> rest), do: json_object(skip(rest), %{})
  defp json_value("[" <> rest), do: json_array(skip(rest), [])
  defp json_value("\"" <> rest), do: json_string(rest, [])
  defp json_value("true" <> rest), do: {true, rest}
  defp json_value("false" <> rest), do: {false, rest}
  defp json_value("null" <> rest), do: {nil, rest}
  defp json_value(text), do: json_number(text)

  defp json_object("}" <> rest, acc) when acc == %{}, do: {acc, rest}

  defp json_object("\"" <> rest, acc) do
    {key, rest} = json_string(rest, [])

    {value, rest} =
      case skip(rest) do
        ":" <> rest -> json_value(skip(rest))
        _ -> throw(:invalid_json)
      end

    acc = Map.put(acc, key, value)

    case skip(rest) do
      "," <> rest -> json_object(skip(rest), acc)
      "}" <> rest -> {acc, rest}
      _ -> throw(:invalid_json)
    end
  end

  defp json_object(_, _), do: throw(:invalid_json)

  defp json_array("]" <> rest, []), do: {[], rest}

  defp json_array(text, acc) do
    {value, rest} = json_value(text)

    case skip(rest) do
      "," <> rest -> json_array(skip(rest), [value | acc])
      "]" <> rest -> {Enum.reverse([value | acc]), rest}
      _ -> throw(:invalid_json)
    end
  end

  defp json_string("\"" <> rest, acc), do: {IO.iodata_to_binary(Enum.reverse(acc)), rest}

  defp json_string("\\u" <> <<digits::binary-size(4), rest::binary>>, acc) do
    case {hex(digits), rest} do
      {high, "\\u" <> <<low::binary-size(4), rest::binary>>} when high in 0xD800..0xDBFF ->
        case hex(low) do
          low when low in 0xDC00..0xDFFF ->
            code = 0x10000 + (high - 0xD800) * 0x400 + (low - 0xDC00)
            json_string(rest, [<<code::utf8>> | acc])

          _ ->
            throw(:invalid_json)
        end

      {code, _} when code in 0xD800..0xDFFF ->
        throw(:invalid_json)

      {code, rest} ->
        json_string(rest, [<<code::utf8>> | acc])
    end
  end

  defp json_string(<<"\\", c, rest::binary>>, acc) do
    char =
      case c do
        ?" -> "\""
        ?\\ -> "\\"
        ?/ -> "/"
        ?b -> "\b"
        ?f -> "\f"
        ?n -> "\n"
        ?r -> "\r"
        ?t -> "\t"
        _ -> throw(:invalid_json)
      end

    json_string(rest, [char | acc])
  end

  defp json_string(<<c::utf8, rest::binary>>, acc) when c >= 0x20,
    do: json_string(rest, [<<c::utf8>> | acc])

  defp json_string(_, _), do: throw(:invalid_json)

  defp hex(digits) do
    if digits =~ ~r/\A[0-9a-fA-F]{4}\z/,
      do: String.to_integer(digits, 16),
      else: throw(:invalid_json)
  end

  defp json_number(text) do
    case Regex.run(~r/\A-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/, text) do
      [number | fraction] ->
        rest = binary_part(text, byte_size(number), byte_size(text) - byte_size(number))

        value = if fraction == [], do: String.to_integer(number), else: json_float(number)
        {value, rest}

      nil ->
        throw(:invalid_json)
    end
  end

  # A valid JSON number such as 1e400 exceeds a double: it stays text.
  defp json_float(number) do
    case Float.parse(number) do
      {float, ""} -> float
      _ -> number
    end
  rescue
    ArgumentError -> number
  end

  defp skip(<<c, rest::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: skip(rest)
  defp skip(text), do: text
end
