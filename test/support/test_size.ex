defmodule HRW.TestSize do
  @moduledoc false

  @doc """
  The size of a seeded loop for the run at hand, chosen by `HRW_TEST_SIZE`:
  `quick` (the default, `mix test`'s one-minute loop), `ci` (`./scripts/test`
  exports it, so CI runs every loop at its full size) or `long` (a soak, run by
  hand: `HRW_TEST_SIZE=long mix test test/hrw/reliability`). Each loop checks the
  same property at every size; a larger one only tries more cases.
  """
  def pick(sizes) do
    Keyword.fetch!(sizes, level())
  end

  @doc "The level `pick/1` reads: `:quick`, `:ci` or `:long`."
  def level do
    case System.get_env("HRW_TEST_SIZE", "quick") do
      "quick" -> :quick
      "ci" -> :ci
      "long" -> :long
      other -> raise ArgumentError, "HRW_TEST_SIZE must be quick, ci or long, got: #{other}"
    end
  end
end
