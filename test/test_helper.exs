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

# The work probes and the dirty-run count are built into test builds of the
# library only (cargo feature `work-probes`); the arm64 leg of scripts/test-matrix
# runs the suite on a release build as well (MIX_ENV=prod), and the tagged files
# on a test build.
excluded =
  for {tag, true, why} <- [
        {:needs_root, String.trim(uid) != "0", "the suite is not running as root"},
        {:work_probes, Mix.env() != :test, "the library is a #{Mix.env()} build, without probes"}
      ] do
    IO.puts("Excluding #{inspect(tag)} tests: #{why}")
    tag
  end

ExUnit.configure(exclude: excluded)
ExUnit.start()
