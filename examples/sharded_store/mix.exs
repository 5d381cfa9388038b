defmodule ShardedStore.MixProject do
  use Mix.Project

  def project do
    [
      app: :sharded_store,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      deps: [{:hrw_cluster, path: "../../cluster"}]
    ]
  end

  def application, do: [extra_applications: [:logger]]
end
