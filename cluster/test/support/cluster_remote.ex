defmodule HRW.ClusterRemote do
  @moduledoc false
  # Called on :peer nodes by the tests, where a function of the test module does
  # not exist.

  @doc "Starts a linked cluster with `opts` and stops it again: `:ok`, or raises as start_link/1."
  def start_link_and_stop(opts) do
    {:ok, pid} = HRW.Cluster.start_link(opts)
    GenServer.stop(pid)
  end
end
