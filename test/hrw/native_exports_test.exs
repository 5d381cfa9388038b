defmodule HRW.NativeExportsTest do
  # What each build of the NIF library exports. A production build (a consumer's
  # build from source, the release archives) has the NIFs lib/ calls and nothing
  # else; a test build adds each NIF's `_dirty` and `_probe` twins and the test
  # hooks (`dirty_runs/0`, `sub_binary_layout/1`, `atom_cache/1`), which the budget
  # and term-id tests use, and `batch_check/1`, which bench/switch_ab.exs uses.
  use ExUnit.Case, async: false

  @twin ~r/_(dirty|probe)\z/

  # The functions of `HRW.Native` that are NIFs in every build.
  defp production_nifs do
    for {name, arity} <- HRW.Native.__info__(:functions),
        name not in [:load_nif, :dirty_runs, :sub_binary_layout, :atom_cache, :batch_check],
        not Regex.match?(@twin, Atom.to_string(name)),
        do: {name, arity}
  end

  describe "a test build" do
    @describetag skip: HRW.TestBuild.without_work_probes()

    test "has a dirty and a probe twin of every NIF, the dirty-run count and the layout, cache and batch-check switches" do
      exports = HRW.Native.__info__(:functions)
      nifs = production_nifs()
      assert length(nifs) == 15

      for {name, arity} <- nifs, twin <- ["dirty", "probe"] do
        assert {:"#{name}_#{twin}", arity} in exports
      end

      assert {:dirty_runs, 0} in exports
      assert {:sub_binary_layout, 1} in exports
      assert {:atom_cache, 1} in exports
      assert {:batch_check, 1} in exports
      assert HRW.NativeProbe.dirty_term_id("k") == HRW.term_id("k")
      assert {:ok, charged, counted} = HRW.NativeProbe.probe(:term_id, ["k"])
      assert counted > 0 and counted <= charged
    end
  end

  describe "a production build" do
    test "declares no twin: the compile task builds it without the work probes" do
      for env <- [:prod, :dev] do
        refute "hrw_nif/work-probes" in Mix.Tasks.Compile.HrwNative.cargo_options(env)
      end
    end

    # Builds the library as the release archives are built (`mix
    # hrw.native.package`: cargo in :prod, no features), then loads it in a fresh
    # VM into an `HRW.Native` that declares the production NIFs only.
    # `:erlang.load_nif/2` refuses a library that has a NIF the module lacks
    # ("Function not found"), so the load succeeds only if the library has no
    # twin; the ids it answers are the test build's.
    @tag :integration
    @tag timeout: 600_000
    test "the release archive's library has only the NIFs lib/ calls" do
      root = Path.expand("../..", __DIR__)
      out = Path.join(System.tmp_dir!(), "hrw-exports-#{System.unique_integer([:positive])}")
      File.mkdir_p!(out)
      on_exit(fn -> File.rm_rf!(out) end)
      version = Mix.Project.config()[:version]

      # A dev task: not compiled in :prod, where this file is loaded too.
      package = Enum.random([Mix.Tasks.Hrw.Native.Package])

      archive =
        package.package(
          native: Path.join(root, "native"),
          out: out,
          version: version
        )

      data = File.read!(archive)
      name = Path.basename(archive)

      {:ok, library} =
        Mix.HrwNative.Archive.verify(data, name, Mix.HrwNative.Checksums.checksum(data), archive)

      so = Path.join(out, "libhrw_nif.so")
      File.write!(so, library)
      refute library =~ "_probe\0"

      keys = ["k", :atom, {1, [2.5]}]
      assert run_in_fresh_vm(so, production_nifs(), keys) == {:ok, Enum.map(keys, &HRW.term_id/1)}

      # The same VM refuses it when the module lacks one of its NIFs: the check
      # above can fail.
      assert {{:error, {:bad_lib, message}}, _} =
               run_in_fresh_vm(so, production_nifs() -- [term_id: 1], keys)

      assert List.to_string(message) =~ "Elixir.HRW.Native':term_id/1"
    end
  end

  # `{load_nif's answer, the ids of keys}` from an `elixir` VM that defines
  # `HRW.Native` with stubs for `nifs` and loads the library at `so`.
  defp run_in_fresh_vm(so, nifs, keys) do
    path = so |> String.trim_trailing(".so") |> inspect()

    code = """
    defmodule HRW.Native do
      @on_load :load
      def load do
        :persistent_term.put(:loaded, :erlang.load_nif(String.to_charlist(#{path}), 0))
        :ok
      end
      for {name, arity} <- #{inspect(nifs)} do
        args = for i <- 1..arity, do: Macro.var(:"_a\#{i}", nil)
        def unquote(name)(unquote_splicing(args)), do: :erlang.nif_error(:nif_not_loaded)
      end
    end
    result =
      case :persistent_term.get(:loaded) do
        :ok -> {:ok, Enum.map(#{inspect(keys)}, &HRW.Native.term_id/1)}
        error -> {error, nil}
      end
    IO.write(:erlang.term_to_binary(result) |> Base.encode64())
    """

    {output, 0} = System.cmd("elixir", ["-e", code], stderr_to_stdout: false)
    output |> String.trim() |> Base.decode64!() |> :erlang.binary_to_term()
  end
end
