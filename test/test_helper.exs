# Elixir 1.15+ keeps only the project's applications on the code path: the
# precompiled-NIF tests use OTP's :inets (httpd, and its records at compile time).
if function_exported?(Mix, :ensure_application!, 1) do
  Enum.each([:crypto, :public_key, :ssl, :inets], &apply(Mix, :ensure_application!, [&1]))
end

ExUnit.start()
