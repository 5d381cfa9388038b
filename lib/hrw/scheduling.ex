defmodule HRW.Scheduling do
  @moduledoc false
  # The Elixir half of the NIF scheduling protocol (see native/hrw_nif/src/failure.rs).
  # A NIF that may see large input first runs on a normal scheduler within a work
  # budget of ~0.5 ms; when its input would exceed the budget it raises
  # `:hrw_needs_dirty` before doing the work, and its `_dirty` twin runs instead on a
  # dirty CPU scheduler. Kept apart from `HRW.Native` so using the macro does not
  # load the NIF at compile time.

  @doc "Evaluates `call`; if it asks for a dirty scheduler, evaluates `dirty_call`."
  defmacro dirty_fallback(call, dirty_call) do
    quote do
      try do
        unquote(call)
      catch
        :error, :hrw_needs_dirty -> unquote(dirty_call)
      end
    end
  end
end
