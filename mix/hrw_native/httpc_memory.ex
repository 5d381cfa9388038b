defmodule Mix.HrwNative.HttpcMemory do
  @moduledoc false
  # What :httpc holds in memory for one request before it hands over a body (the
  # status line, the headers, a whole error or redirect body): the download cuts
  # an answer off past a budget with it. The one place that reads an :httpc
  # internal (its manager's table of handlers), defensively: a table it cannot
  # read counts 0, and the VM's binary growth still counts.

  @doc false
  # The VM's binary memory when a request starts.
  @spec before() :: non_neg_integer()
  def before, do: :erlang.memory(:binary)

  @doc false
  # The heap of the process :httpc reads the answer to `ref` in, plus the VM's
  # binaries allocated since `before` but for the `held` bytes the caller holds:
  # :httpc's buffers do not show in its handler's own list of binaries.
  @spec held(atom(), reference(), non_neg_integer(), non_neg_integer()) :: non_neg_integer()
  def held(profile, ref, before, held) do
    max(:erlang.memory(:binary) - before - held, 0) + handler_heap(profile, ref)
  end

  defp handler_heap(profile, ref) do
    with [entry] <- :ets.lookup(:"httpc_#{profile}__handler_db", ref),
         pid when is_pid(pid) <-
           entry |> Tuple.to_list() |> Enum.find(&(is_pid(&1) and &1 != self())),
         {:memory, memory} <- Process.info(pid, :memory) do
      memory
    else
      _ -> 0
    end
  rescue
    ArgumentError -> 0
  end
end
