defmodule HRW.TestTimeouts do
  @moduledoc false

  @doc """
  A test timeout of `ms` at native speed, times `HRW_TEST_TIMEOUT_SCALE` (default
  1): scripts/test-matrix sets it on its emulated legs (qemu-user), which run the
  suite many times slower. For `@tag`/`@moduletag timeout:`, which override `mix
  test --timeout`, and for waits the tests set themselves.
  """
  def ms(ms) do
    case Integer.parse(System.get_env("HRW_TEST_TIMEOUT_SCALE", "1")) do
      {scale, ""} when scale >= 1 -> ms * scale
      _ -> raise ArgumentError, "HRW_TEST_TIMEOUT_SCALE must be a positive integer"
    end
  end
end
