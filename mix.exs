# The compiler that builds native/ with cargo lives outside lib/: it has to exist
# before the project's own modules are compiled.
Code.require_file("mix/tasks/compile.hrw_native.ex", __DIR__)

defmodule HRW.MixProject do
  use Mix.Project

  @version "0.3.0"
  # No public repository exists yet. This is the one line to set before publishing
  # (`.invalid` can never resolve, so the placeholder cannot point anywhere real).
  @source_url "https://hrw-source.invalid/hrw_native"

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
      package: package()
    ]
  end

  def application do
    [mod: {HRW.Application, []}, extra_applications: [:logger]]
  end

  # dev/ holds tooling only this repository runs (`mix hrw.latency`). A dependency
  # is compiled in :prod, so it never reaches a consumer's build or release;
  # `mix hrw.report` stays in lib/ for users (README, "Install").
  defp elixirc_paths(:prod), do: ["lib"]
  defp elixirc_paths(_env), do: ["lib", "dev"]

  # The Hex name `hrw` belongs to the pure-Elixir package this one replaces; the
  # application stays :hrw and the module HRW, so a project depends on it with
  # {:hrw, "~> 0.3", hex: :hrw_native}. `files` is exactly what a build from the
  # tarball needs (cargo builds native/hrw_nif and its path dependency hrw_core)
  # plus the user-facing docs: no tests, benchmarks, fixtures or build output.
  # `./scripts/check-package` lists it and builds from a copy of exactly it.
  defp package do
    [
      name: "hrw_native",
      licenses: ["MIT"],
      links: %{"Source" => @source_url},
      files: ~w(
        lib mix mix.exs .formatter.exs README.md LICENSE CHANGELOG.md docs/HASHING.md
        docs/reference.py native/Cargo.toml native/Cargo.lock
        native/hrw_core/Cargo.toml native/hrw_core/src
        native/hrw_nif/Cargo.toml native/hrw_nif/build.rs native/hrw_nif/src
      )
    ]
  end
end
