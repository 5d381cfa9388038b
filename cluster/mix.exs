defmodule HRW.Cluster.MixProject do
  use Mix.Project

  @version "0.1.0"
  # The hashing package's placeholder, as in ../mix.exs: set before publishing.
  @source_url "https://hrw-source.invalid/hrw_native"

  def project do
    [
      app: :hrw_cluster,
      version: @version,
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: deps(),
      description:
        "HRW.Cluster: a cluster's members as a published HRW skeleton or ring, with " <>
          "quorum, lease, history, fingerprints and agreement, for rendezvous hashing (hrw).",
      source_url: @source_url,
      package: package()
    ]
  end

  # HRW.Cluster starts no process of its own at boot: each cluster is a server the
  # user starts (`HRW.Cluster.start_link/1`, or a child spec in their tree).
  def application, do: [extra_applications: [:logger]]

  # The hashing package, through its public API only. In this repository it is the
  # project one folder up; a published hrw_cluster depends on the published one:
  # `HRW_CLUSTER_HEX=1 mix hex.build` (and `hex.publish`) builds with
  # `{:hrw, "~> 0.3", hex: :hrw_native}` (README.md, "Depending on it").
  defp deps do
    if System.get_env("HRW_CLUSTER_HEX") == "1",
      do: [{:hrw, "~> 0.3", hex: :hrw_native}],
      else: [{:hrw, path: ".."}]
  end

  # test/support: the cluster's partition harness, and links to the repository's
  # peer, timeout, value and hostile-term helpers, shared with the hashing
  # package's tests.
  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_env), do: ["lib"]

  # `../scripts/check-package cluster` lists these and builds from a copy of exactly
  # them, with the hashing package beside it.
  defp package do
    [
      name: "hrw_cluster",
      licenses: ["MIT"],
      links: %{"Source" => @source_url},
      files: ~w(lib mix.exs .formatter.exs README.md CHANGELOG.md LICENSE docs/CLUSTER.md
                docs/FINGERPRINT.md)
    ]
  end
end
