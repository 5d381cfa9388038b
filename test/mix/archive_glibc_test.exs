defmodule Mix.HrwNative.ArchiveGlibcTest do
  # The glibc floor of the Linux gnu archives: `mix hrw.native.package --target
  # TRIPLE.2.17` (cargo-zigbuild) must give a library whose highest GLIBC_ version
  # (its version needs and versioned dynamic symbols, read with readelf) is at most
  # 2.17, so that it loads on glibc 2.17 and every later one. The archives need a
  # cross toolchain and zig: `scripts/test-matrix arm64` builds both and runs this
  # file with HRW_ARCHIVE_DIR set to their folder. Without it those tests are skipped
  # (ExUnit lists them as skipped), the version parser's test still runs.
  use ExUnit.Case, async: true
  @moduletag :release_archives

  doctest Mix.Tasks.Hrw.Native.Package

  @floor {2, 17}
  # The ELF machine readelf names for each target's CPU.
  @targets %{
    "x86_64-unknown-linux-gnu" => "Advanced Micro Devices X86-64",
    "aarch64-unknown-linux-gnu" => "AArch64"
  }

  @doc false
  # Every GLIBC_ version named in readelf's output, highest first, as integer lists
  # (compared as numbers: 2.9 is below 2.17).
  def glibc_versions(text) do
    ~r/GLIBC_(\d+(?:\.\d+)+)/
    |> Regex.scan(text, capture: :all_but_first)
    |> Enum.map(fn [v] -> v |> String.split(".") |> Enum.map(&String.to_integer/1) end)
    |> Enum.uniq()
    |> Enum.sort(:desc)
  end

  test "GLIBC_ versions compare as numbers, not as text" do
    text = "  0x0010: Name: GLIBC_2.9  Flags: none\n foo@GLIBC_2.17 (3)\n bar@GLIBC_2.2.5\n"
    assert glibc_versions(text) == [[2, 17], [2, 9], [2, 2, 5]]
    assert glibc_versions("no versions") == []
  end

  describe "archives in HRW_ARCHIVE_DIR" do
    dir = System.get_env("HRW_ARCHIVE_DIR", "")

    if dir == "",
      do: @describetag(skip: "HRW_ARCHIVE_DIR is not set (scripts/test-matrix arm64 sets it)")

    for {target, machine} <- @targets do
      @tag target: target, machine: machine
      test "#{target}: the library is for its CPU and needs glibc 2.17 at most", ctx do
        readelf = System.find_executable("readelf") || flunk("readelf (binutils) is not on PATH")
        [nif | _] = Mix.HrwNative.Target.nif_versions()
        name = Mix.HrwNative.Target.archive_name(Mix.Project.config()[:version], nif, ctx.target)
        path = Path.join(System.fetch_env!("HRW_ARCHIVE_DIR"), name)
        assert File.regular?(path), "no archive #{path}"
        data = File.read!(path)

        assert {:ok, library} =
                 Mix.HrwNative.Archive.verify(
                   data,
                   name,
                   Mix.HrwNative.Checksums.checksum(data),
                   path
                 )

        tmp = Path.join(System.tmp_dir!(), "hrw-glibc-#{System.unique_integer([:positive])}.so")
        File.write!(tmp, library)
        on_exit(fn -> File.rm(tmp) end)

        {header, 0} = System.cmd(readelf, ["-h", tmp])
        assert header =~ ~r/Machine:\s+#{Regex.escape(ctx.machine)}\n/

        {text, 0} = System.cmd(readelf, ["-W", "--version-info", "--dyn-syms", tmp])
        versions = glibc_versions(text)
        assert versions != [], "#{name} names no GLIBC_ version: is it a glibc library?"
        [highest | _] = versions
        IO.puts("#{name}: highest GLIBC_#{Enum.join(highest, ".")}")
        assert List.to_tuple(Enum.take(highest ++ [0], 2)) <= @floor
      end
    end
  end
end
