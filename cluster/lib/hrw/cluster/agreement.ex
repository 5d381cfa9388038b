defmodule HRW.Cluster.Agreement do
  @moduledoc false
  # The rounds of `HRW.Cluster.await_agreement/2`: each round reads this node's
  # view and asks its other members, over `:erpc`, for their fingerprint
  # (`HRW.Cluster.remote_fingerprint/1`, which nodes running other versions call
  # too), until all answer with this node's or no whole round fits before the
  # deadline.

  alias HRW.Cluster.Server

  # Between two rounds, so that members that disagree get time to publish.
  @pause 20
  @remote :"Elixir.HRW.Cluster"

  @doc """
  `{:ok, fingerprint}` once every member agrees, else `{:error, disagreement}` as
  of the last round; `deadline` is in `System.monotonic_time(:millisecond)`.
  """
  @spec await(atom(), integer()) ::
          {:ok, non_neg_integer()} | {:error, HRW.Cluster.disagreement()}
  def await(name, deadline) do
    started = now()
    %{fingerprint: local, members: members} = Server.snapshot!(name)
    {disagree, no_answer} = ask(name, List.delete(members, node()), local, deadline)
    finished = now()

    cond do
      disagree == %{} and no_answer == %{} and Server.snapshot!(name).fingerprint == local ->
        {:ok, local}

      # A round cut short by the deadline would report its own timeouts instead
      # of the members' answers: none starts without the time this one took.
      finished + @pause + (finished - started) > deadline ->
        {:error, %{fingerprint: local, disagree: disagree, no_answer: no_answer}}

      true ->
        Process.sleep(@pause)
        await(name, deadline)
    end
  end

  # The members whose fingerprint differs from `local` (node => theirs), and those
  # that did not answer (node => the `:erpc` error, or `:not_running`).
  defp ask(_name, [], _local, _deadline), do: {%{}, %{}}

  defp ask(name, others, local, deadline) do
    left = max(deadline - now(), 0)
    # The other members' `HRW.Cluster.remote_fingerprint/1`, named as the atom
    # those nodes know: a call over the network, not a dependency of this node's
    # modules (`HRW.Cluster` calls this module).
    answers = :erpc.multicall(others, @remote, :remote_fingerprint, [name], max(left, 1))

    others
    |> Enum.zip(answers)
    |> Enum.reduce({%{}, %{}}, fn
      {_node, {:ok, ^local}}, acc -> acc
      {node, {:ok, :not_running}}, {d, n} -> {d, Map.put(n, node, :not_running)}
      {node, {:ok, other}}, {d, n} -> {Map.put(d, node, other), n}
      {node, error}, {d, n} -> {d, Map.put(n, node, error)}
    end)
  end

  defp now, do: System.monotonic_time(:millisecond)
end
