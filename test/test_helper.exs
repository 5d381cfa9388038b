# Elixir 1.15+ keeps only the project's applications on the code path: the
# precompiled-NIF tests use OTP's :inets (httpd, and its records at compile time).
if function_exported?(Mix, :ensure_application!, 1) do
  Enum.each([:crypto, :public_key, :ssl, :inets], &apply(Mix, :ensure_application!, [&1]))
end

# MIX_ENV=prod, in which the arm64 leg of scripts/test-matrix runs the suite on a
# precompiled library, compiles lib/ only: the helpers are loaded here then.
# Compiled together, so that a call from one helper into another loaded later is
# not reported as undefined.
unless Code.ensure_loaded?(HRW.TestPeers) do
  {:ok, _modules, _warnings} =
    Kernel.ParallelCompiler.require(Path.wildcard(Path.join(__DIR__, "support/*.ex")),
      return_diagnostics: true
    )
end

# Tests that need a folder owned by another user can only make one as root.
{uid, 0} = System.cmd("id", ["-u"])

excluded =
  for {tag, true, why} <- [
        {:needs_root, String.trim(uid) != "0", "the suite is not running as root"}
      ] do
    IO.puts("Excluding #{inspect(tag)} tests: #{why}")
    tag
  end

# `@moduletag :cpu_dependent` marks the files whose outcome can differ by CPU: they
# check term ids, scores, placements and batches, which the native library
# computes (SIMD scans, byte order, rayon). The emulated legs of scripts/test-matrix
# run only those (docs/PLATFORMS.md, "What each leg runs"); every file runs on the
# x86_64 legs. `@moduletag :release_archives`: the checks of the release archives,
# run where the archives are built (the arm64 leg).
# `:integration` marks what builds or installs a project (cargo builds, `mix new`
# apps, archives, downloads from a local mirror): minutes on a small machine, so
# `mix test` leaves it out and `./scripts/test` (CI) runs it with
# `--include integration`; `mix test --only integration` runs it alone.
ExUnit.configure(exclude: [:integration | excluded])
# Distribution starts here, before any test file is compiled: ExUnit runs test
# modules while it still requires others, and a node that becomes alive then
# strands the compiler's processes under its old name (on Elixir 1.18, "no
# connection to nonode@nohost" while compiling a test file). The tests that need
# it call `HRW.TestPeers.distributed!/0` again, which then only checks.
HRW.TestPeers.distributed!()

# An `assert_receive` without a timeout waits 5 s (scaled on the emulated legs),
# not ExUnit's 100 ms: a message that comes is awaited however loaded the machine;
# only one that never comes costs the wait.
ExUnit.start(assert_receive_timeout: HRW.TestTimeouts.ms(5_000))
