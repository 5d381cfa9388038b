defmodule HRW.TestValues do
  @moduledoc false

  @doc """
  Returns `value` as a term of unknown type, for tests that pass a wrong value on
  purpose: Elixir's type checker (1.20+) warns at a call it can prove wrong, and
  the suite runs with warnings as errors. The call still receives `value`.
  """
  def untyped(value), do: :persistent_term.get({__MODULE__, :unset}, value)

  @doc """
  What `fun` does: `{:raised, message}` for an `ArgumentError`, `{:returned, value}`
  otherwise (any other exception propagates). Tests that expect a raise for most
  inputs list the inputs that answer, so a call that stops raising fails them.
  """
  def outcome(fun) do
    {:returned, fun.()}
  rescue
    e in ArgumentError -> {:raised, Exception.message(e)}
  end
end
