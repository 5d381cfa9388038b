defmodule HRW.Native.Twins do
  @moduledoc false
  # Macros for `HRW.Native`, in a module of their own so that `HRW.Native` can use
  # them while it compiles.
  #
  # Every NIF exists as a pair (native/hrw_nif/src/failure.rs, `twin_nifs!`): a
  # normal-scheduler `name_normal` that works within a budget and raises
  # `:hrw_needs_dirty` when its input would exceed it, and `name_dirty`, the same on
  # a dirty CPU scheduler. Test builds add `name_probe`, which reports the work the
  # normal version charged and counted (test/hrw/budget_test.exs).

  @doc "Declares the NIF stubs of each `name: arity` pair."
  defmacro nifs(pairs) do
    probes? = Mix.env() == :test

    for {name, arity} <- pairs do
      args = Macro.generate_arguments(arity, __MODULE__)
      kinds = [:normal, :dirty] ++ if(probes?, do: [:probe], else: [])

      for kind <- kinds do
        stub = :"#{name}_#{kind}"

        quote do
          @doc false
          def unquote(stub)(unquote_splicing(args)), do: :erlang.nif_error(:nif_not_loaded)
        end
      end
    end
  end

  @doc """
  Calls the NIF pair `name` with `args` (variables or literals: they are evaluated
  twice when the call moves to a dirty scheduler): on the normal scheduler, or, when
  it says the work exceeds its budget, on a dirty one.
  """
  defmacro twin(name, args) do
    normal = :"#{name}_normal"
    dirty = :"#{name}_dirty"

    quote do
      try do
        unquote(normal)(unquote_splicing(args))
      catch
        :error, :hrw_needs_dirty -> unquote(dirty)(unquote_splicing(args))
      end
    end
  end

  @doc "Calls the dirty-scheduler NIF of the pair `name` directly."
  defmacro dirty(name, args) do
    quote do
      unquote(:"#{name}_dirty")(unquote_splicing(args))
    end
  end
end
