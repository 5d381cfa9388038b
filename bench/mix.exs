defmodule HRWBench.MixProject do
  @moduledoc false
  # Benchmarks of hrw against ExHashRing, libring and hrw 0.2.1: a project of its
  # own, apart from the library and its tests, because it needs Hex packages (or
  # local checkouts of them, see README.md).
  use Mix.Project

  def project do
    [
      app: :hrw_bench,
      version: "0.1.0",
      elixir: "~> 1.14",
      deps: deps()
    ]
  end

  def application do
    [extra_applications: [:logger]]
  end

  # Every dependency but hrw itself comes from Hex, unless an environment variable
  # names a local checkout of it. benchee's own dependencies (deep_merge, statistex)
  # can be given the same way; a path given for them overrides what benchee asks
  # for. Without Hex every one of them needs a path (README.md).
  defp deps do
    [
      {:hrw, path: ".."},
      dep(:benchee, "BENCHEE_PATH", "~> 1.3"),
      dep(:deep_merge, "DEEP_MERGE_PATH", nil),
      dep(:statistex, "STATISTEX_PATH", nil),
      dep(:ex_hash_ring, "EX_HASH_RING_PATH", "~> 7.0"),
      dep(:libring, "LIBRING_PATH", "~> 1.7"),
      # hrw 0.2.1 is also the app :hrw with the module HRW, like this library, so
      # the two cannot share a VM as published: it is compared only when
      # OLD_HRW_PATH names a copy renamed to the app :old_hrw (see README.md).
      dep(:old_hrw, "OLD_HRW_PATH", nil)
    ]
    |> Enum.reject(&is_nil/1)
  end

  defp dep(app, var, requirement) do
    case {System.get_env(var), requirement} do
      {path, _} when path not in [nil, ""] -> {app, path: Path.expand(path), override: true}
      {_, nil} -> nil
      {_, requirement} -> {app, requirement}
    end
  end
end
