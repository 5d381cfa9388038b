defmodule ShardedStore.MixProject do
  use Mix.Project

  def project do
    [
      app: :sharded_store,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      # The test suite's simulator of replicas (test/support) is compiled for tests only.
      elixirc_paths: if(Mix.env() == :test, do: ["lib", "test/support"], else: ["lib"]),
      # The cluster package, and the hashing package it builds on (whose HRW.owners/3
      # the store calls too).
      deps: [{:hrw_cluster, path: "../../cluster"}, {:hrw, path: "../.."}]
    ]
  end

  def application, do: [extra_applications: [:logger]]
end
