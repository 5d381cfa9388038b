defmodule Mix.HrwNative.OTPApps do
  @moduledoc false
  # Mix 1.15+ keeps only the project's applications on the code path while it
  # compiles: OTP's :crypto or :public_key is put back before it is used
  # (`Mix.ensure_application!/1`, which Elixir 1.14 lacks and does not need).

  @doc false
  @spec on_code_path([atom()]) :: :ok
  def on_code_path(apps) do
    if function_exported?(Mix, :ensure_application!, 1) do
      Enum.each(apps, &apply(Mix, :ensure_application!, [&1]))
    end

    :ok
  end
end
