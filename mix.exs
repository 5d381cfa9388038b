# The compiler that builds native/ with cargo lives outside lib/: it has to exist
# before the project's own modules are compiled.
Code.require_file("mix/tasks/compile.hrw_native.ex", __DIR__)

defmodule HRW.MixProject do
  use Mix.Project

  def project do
    [
      app: :hrw,
      version: "0.3.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      compilers: [:hrw_native | Mix.compilers()],
      deps: [],
      description:
        "Rendezvous hashing (HRW) with the N3 score in a Rust NIF: stateless owners, " <>
          "exact prepared rings and a churn-stable O(log n) skeleton.",
      package: [
        licenses: ["MIT"],
        files: ~w(lib mix mix.exs native/Cargo.toml native/hrw_core native/hrw_nif README.md docs)
      ]
    ]
  end

  def application do
    [extra_applications: [:logger]]
  end
end
