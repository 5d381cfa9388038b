defmodule HRW.TestBuild do
  @moduledoc false

  @doc """
  `false` when the library is a test build, which has the work probes and the
  dirty-run count (the compile task turns on the cargo feature `work-probes` in
  MIX_ENV=test only); otherwise why the tests that read them are skipped. For
  `@moduletag skip: HRW.TestBuild.without_work_probes()`: a skip holds even when
  `mix test --only` selects the file by another tag (the emulated legs of
  scripts/test-matrix run `--only cpu_dependent` on a release build).
  """
  def without_work_probes do
    if Mix.env() == :test,
      do: false,
      else: "the library is a #{Mix.env()} build, without the work probes"
  end
end
