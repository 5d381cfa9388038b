defmodule Mix.HrwNative.PrecompiledTest do
  # Names, targets, NIF versions, URL policy and checksum files: what the compile
  # task and the producer tasks must agree on, without a network or a build.
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent

  test "archive names follow RustlerPrecompiled's convention" do
    assert Mix.HrwNative.Target.archive_name("0.3.0", "2.16", "x86_64-unknown-linux-gnu") ==
             "libhrw_nif-v0.3.0-nif-2.16-x86_64-unknown-linux-gnu.so.tar.gz"

    assert Mix.HrwNative.Target.archive_name("0.3.0", "2.16", "aarch64-apple-darwin") ==
             "libhrw_nif-v0.3.0-nif-2.16-aarch64-apple-darwin.so.tar.gz"

    assert Mix.HrwNative.Target.archive_name("0.3.0", "2.16", "x86_64-pc-windows-msvc") ==
             "hrw_nif-v0.3.0-nif-2.16-x86_64-pc-windows-msvc.dll.tar.gz"

    assert Mix.HrwNative.Target.library_name("libhrw_nif-v0.3.0-nif-2.16-x.so.tar.gz") ==
             "libhrw_nif-v0.3.0-nif-2.16-x.so"
  end

  test "the VM's architecture becomes a Rust target triple" do
    linux = {:unix, :linux}
    mac = {:unix, :darwin}

    for {arch, os, triple} <- [
          {"x86_64-pc-linux-gnu", linux, "x86_64-unknown-linux-gnu"},
          {"x86_64-redhat-linux-gnu", linux, "x86_64-unknown-linux-gnu"},
          {"aarch64-unknown-linux-gnu", linux, "aarch64-unknown-linux-gnu"},
          {"x86_64-alpine-linux-musl", linux, "x86_64-unknown-linux-musl"},
          {"aarch64-alpine-linux-musl", linux, "aarch64-unknown-linux-musl"},
          {"amd64-portbld-freebsd14.0", {:unix, :freebsd}, "x86_64-unknown-freebsd"},
          {"aarch64-apple-darwin23.4.0", mac, "aarch64-apple-darwin"},
          {"arm-apple-darwin22.1.0", mac, "aarch64-apple-darwin"},
          {"x86_64-apple-darwin21.6.0", mac, "x86_64-apple-darwin"},
          {"win32", {:win32, :nt}, "x86_64-pc-windows-msvc"}
        ] do
      assert Mix.HrwNative.Target.host_target(arch, os, 8) == {:ok, triple}, arch
    end

    assert Mix.HrwNative.Target.host_target("win32", {:win32, :nt}, 4) == :error
    assert Mix.HrwNative.Target.host_target("sparc", {:unix, :sunos}, 8) == :error
    assert {:ok, _} = Mix.HrwNative.Target.host_target()
  end

  test "a VM loads the newest published NIF version of its major not above its own" do
    assert Mix.HrwNative.Target.nif_version("2.16") == {:ok, "2.16"}
    # OTP 27 and 29 load the 2.16 build (measured: DESIGN.md, third round).
    assert Mix.HrwNative.Target.nif_version("2.17") == {:ok, "2.16"}
    assert Mix.HrwNative.Target.nif_version("2.18") == {:ok, "2.16"}
    assert Mix.HrwNative.Target.nif_version("2.15") == :error
    assert Mix.HrwNative.Target.nif_version("3.0") == :error
    assert Mix.HrwNative.Target.nif_version("junk") == :error
  end

  test "archives are named for the NIF version the crate is built against" do
    manifest = File.read!(Path.expand("../../native/hrw_nif/Cargo.toml", __DIR__))

    expected =
      Enum.map(
        Mix.HrwNative.Target.nif_versions(),
        &"nif_version_#{String.replace(&1, ".", "_")}"
      )

    assert Regex.scan(~r/nif_version_\d+_\d+/, manifest) |> List.flatten() == expected
  end

  test "a checksum file is parsed, never evaluated, and round-trips" do
    dir = Path.join(System.tmp_dir!(), "hrw-checksum-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    path = Path.join(dir, "checksum.exs")

    sums = %{
      "b.tar.gz" => Mix.HrwNative.Checksums.checksum("b"),
      "a.tar.gz" => Mix.HrwNative.Checksums.checksum("a")
    }

    File.write!(path, Mix.HrwNative.Checksums.text(sums))
    assert Mix.HrwNative.Checksums.read(path) == {:ok, sums}
    assert File.read!(path) == IO.iodata_to_binary(Code.format_string!(File.read!(path))) <> "\n"

    File.write!(path, Mix.HrwNative.Checksums.text(%{}))
    assert Mix.HrwNative.Checksums.read(path) == {:ok, %{}}

    for bad <- [
          ~S|%{"a" => "sha256:00"}|,
          ~s|%{"a" => "md5:#{String.duplicate("0", 32)}"}|,
          ~S|%{"a" => "sha256:" <> String.duplicate("0", 64)}|,
          ~S|File.rm_rf!("/nonexistent")|,
          "%{"
        ] do
      File.write!(path, bad)
      assert {:error, message} = Mix.HrwNative.Checksums.read(path), bad
      assert message =~ "is not a map of archive names"
    end

    assert Mix.HrwNative.Checksums.read(Path.join(dir, "none.exs")) == {:error, :enoent}

    File.write!(
      path,
      ~s|%{"a" => #{inspect(Mix.HrwNative.Checksums.checksum("a"))}, "a" => #{inspect(Mix.HrwNative.Checksums.checksum("b"))}}|
    )

    assert {:error, message} = Mix.HrwNative.Checksums.read(path)
    assert message == ~s|the checksum file #{path} lists "a" more than once|
  end

  test "the shipped checksum file is valid and is in the package" do
    root = Path.expand("../..", __DIR__)

    assert {:ok, _} =
             Mix.HrwNative.Checksums.read(Path.join(root, Mix.HrwNative.Checksums.file_name()))

    assert Mix.HrwNative.Checksums.file_name() in Mix.Project.config()[:package][:files]
  end
end
