defmodule HRW.Application do
  @moduledoc false
  # The :hrw application: one small process, `HRW.Prepared.Cache`, which keeps the
  # resources of stale structures rebuilt on this node. Everything else in hrw is
  # stateless; without the application running, structures stay usable and a stale
  # one is rebuilt on each call instead.

  use Application

  @impl Application
  def start(_type, _args) do
    Supervisor.start_link([HRW.Prepared.Cache], strategy: :one_for_one, name: HRW.Supervisor)
  end
end
