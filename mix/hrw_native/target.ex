defmodule Mix.HrwNative.Target do
  @nif_versions ["2.16"]
  @targets ~w(
    aarch64-apple-darwin x86_64-apple-darwin
    aarch64-unknown-linux-gnu aarch64-unknown-linux-musl
    x86_64-unknown-linux-gnu x86_64-unknown-linux-musl
    x86_64-pc-windows-msvc
  )

  @moduledoc """
  What a precompiled NIF is for and what it is called: the machine's target
  triple, the NIF version it is built against (the oldest a VM may speak: OTP 25
  to 29 all load the 2.16 build), and RustlerPrecompiled's archive and library
  names (`libhrw_nif-v<version>-nif-<nif>-<target>.so.tar.gz`).
  """

  @crate "hrw_nif"

  @typedoc "A Rust target triple, such as `x86_64-unknown-linux-gnu`."
  @type t :: String.t()

  @doc "The targets the release workflow builds."
  @spec targets() :: [t()]
  def targets, do: @targets

  @doc "The NIF versions archives are built for (rustler's `nif_version_*` feature)."
  @spec nif_versions() :: [String.t()]
  def nif_versions, do: @nif_versions

  @doc """
  The running VM's target triple, normalized as Rust names targets, from
  `:erlang.system_info(:system_architecture)` (for example `x86_64-pc-linux-gnu`
  becomes `x86_64-unknown-linux-gnu`, `aarch64-apple-darwin23.4.0` becomes
  `aarch64-apple-darwin`). `:error` when it cannot be worked out.
  """
  @spec host_target() :: {:ok, t()} | :error
  def host_target do
    host_target(
      List.to_string(:erlang.system_info(:system_architecture)),
      :os.type(),
      :erlang.system_info(:wordsize)
    )
  end

  @doc false
  @spec host_target(String.t(), {atom(), atom()}, pos_integer()) :: {:ok, t()} | :error
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
  @spec archive_name(String.t(), String.t(), t()) :: String.t()
  def archive_name(version, nif_version, target) do
    {prefix, extension} =
      if String.contains?(target, "windows"), do: {"", "dll"}, else: {"lib", "so"}

    "#{prefix}#{@crate}-v#{version}-nif-#{nif_version}-#{target}.#{extension}.tar.gz"
  end

  @doc "The one file an archive holds: its name without `.tar.gz`."
  @spec library_name(String.t()) :: String.t()
  def library_name(archive_name), do: String.replace_suffix(archive_name, ".tar.gz", "")
end
