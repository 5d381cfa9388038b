defmodule Mix.Tasks.Compile.HrwNative do
  @shortdoc "Builds the hrw NIF with cargo and installs it into the app's priv/native"
  @moduledoc """
  Builds the `hrw_nif` crate of `native/` with cargo and installs the library as
  `priv/native/libhrw_nif.so` (`.dll` on Windows) of the application's build
  directory, `_build/<env>/lib/hrw`: the directory `:code.priv_dir(:hrw)` names,
  also when hrw is a dependency of another project (then under that project's
  `_build`) and inside a release. Needs only cargo (no rustler Mix package, no Hex).

  Cargo decides what to rebuild and says where the library is: the task reads the
  `compiler-artifact` message of `cargo build --message-format=json-render-diagnostics`,
  so `CARGO_TARGET_DIR`, `build.target-dir` and `build.target` in a cargo config are
  honoured. When cargo fails, or reports no library, the task raises saying what
  went wrong; it never installs a library it did not just get from cargo.

  The library is copied next to its destination and then renamed over it, so a
  library already loaded by a running VM is never overwritten in place; an
  unchanged library is not copied at all.
  """
  use Mix.Task.Compiler

  @crate "hrw_nif"

  @impl Mix.Task.Compiler
  def run(_args) do
    native = Path.expand("../../native", __DIR__)

    unless System.find_executable("cargo") do
      Mix.raise("hrw needs cargo (the Rust toolchain) to build its NIF; none is on PATH")
    end

    {build(native, destination(), Mix.env(), "cargo"), []}
  end

  @doc false
  # Builds with `cargo` in `native` and installs the library at `dest`; :ok when a
  # new library was installed, :noop when `dest` already held the same bytes.
  @spec build(Path.t(), Path.t(), atom(), String.t()) :: :ok | :noop
  def build(native, dest, env, cargo) do
    args = ["build", "-p", @crate, "--message-format=json-render-diagnostics"]
    args = args ++ cargo_options(env)

    unless File.exists?(dest) do
      Mix.shell().info("Building the hrw NIF with cargo (a first build takes a minute or more)")
    end

    # stdout carries cargo's JSON messages; its stderr (progress, warnings, errors
    # rendered for people) goes straight to ours.
    {output, status} = System.cmd(cargo, args, cd: native)

    if status != 0 do
      Mix.raise(
        "cargo build of #{@crate} failed (exit status #{status}; its errors are above). " <>
          "Command: cargo #{Enum.join(args, " ")} in #{native}"
      )
    end

    if install(library(messages(output), native), dest), do: :ok, else: :noop
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
  defp install(built, dest) do
    new = File.read!(built)

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
