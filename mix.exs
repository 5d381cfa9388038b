# The compiler that installs the NIF (precompiled, or built with cargo) lives
# outside lib/: it has to exist before the project's own modules are compiled.
# The download runs in an OS process of its own, from the object code compiled
# here (Mix.HrwNative.Download.keep/1).
compiled =
  for file <- ~w(json otp_apps safe_file wire proxy tls download_failure download target
                 checksums archive cache precompiled),
      pair <- Code.require_file("mix/hrw_native/#{file}.ex", __DIR__) || [],
      do: pair

Mix.HrwNative.Download.keep(compiled)
Code.require_file("mix/tasks/compile.hrw_native.ex", __DIR__)

defmodule HRW.MixProject do
  use Mix.Project

  @version "0.3.0"
  # No public repository exists yet. This is the one line to set before publishing
  # (`.invalid` can never resolve, so the placeholder cannot point anywhere real).
  @source_url "https://hrw-source.invalid/hrw_native"
  # Where the release workflow's archives are published (docs/NATIVE.md): a
  # GitHub release of the tag, as RustlerPrecompiled users do. HRW_NATIVE_BASE_URL
  # overrides it (mirrors, tests).
  @native_base_url "#{@source_url}/releases/download/v#{@version}"

  def project do
    [
      app: :hrw,
      version: @version,
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      compilers: [:hrw_native | Mix.compilers()],
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: [],
      description:
        "Rendezvous hashing (HRW) with the N3 score in a Rust NIF: stateless owners, " <>
          "exact prepared rings and a churn-stable O(log n) skeleton.",
      source_url: @source_url,
      hrw_native: [base_url: @native_base_url],
      package: package()
    ]
  end

  def application do
    [mod: {HRW.Application, []}, extra_applications: [:logger]]
  end

  # dev/ holds tooling only this repository runs (`mix hrw.latency`), test/support
  # the helpers the tests share. A dependency is compiled in :prod, so neither
  # reaches a consumer's build or release; `mix hrw.report` stays in lib/ for
  # users (docs/NATIVE.md).
  defp elixirc_paths(:prod), do: ["lib"]
  defp elixirc_paths(:test), do: ["lib", "dev", "test/support"]
  defp elixirc_paths(_env), do: ["lib", "dev"]

  # The Hex name `hrw` belongs to the pure-Elixir package this one replaces; the
  # application stays :hrw and the module HRW, so a project depends on it with
  # {:hrw, "~> 0.3", hex: :hrw_native}. `files` is exactly what a build from the
  # tarball needs (cargo builds native/hrw_nif and its path dependency hrw_core)
  # plus the user-facing docs, and the checksums of the precompiled NIFs (the
  # compile task installs no archive they do not list): no tests, benchmarks,
  # fixtures or build output.
  # `./scripts/check-package` lists it and builds from a copy of exactly it.
  defp package do
    [
      name: "hrw_native",
      licenses: ["MIT"],
      links: %{"Source" => @source_url},
      files: ~w(
        lib mix mix.exs .formatter.exs README.md LICENSE CHANGELOG.md docs/HASHING.md docs/NATIVE.md
        docs/PLATFORMS.md docs/GUARANTEES.md docs/MIGRATING.md
        checksum-Elixir.HRW.Native.exs
        docs/reference.py native/Cargo.toml native/Cargo.lock
        native/hrw_core/Cargo.toml native/hrw_core/src
        native/hrw_nif/Cargo.toml native/hrw_nif/build.rs native/hrw_nif/src
      )
    ]
  end
end
