defmodule HRW.SilentPartition.Epmd do
  @moduledoc false
  # The `-epmd_module` of the peers of an `HRW.SilentPartition`: no epmd at all.
  # A peer reaches each other peer at the relay port its command line gives for
  # that pair (`-hrw_silent_route name port`, one per other peer), so every
  # distribution connection between two peers runs through the relay of the VM
  # that started them. It runs at kernel boot, before Elixir's own applications:
  # only Erlang's functions are called here.

  @routes :hrw_silent_route

  @doc "No process: the routes are on the command line, the listen port in a term."
  def start_link, do: :ignore

  @doc "Records the port this peer's distribution listens on (read by the harness)."
  def register_node(name, port), do: register_node(name, port, :inet_tcp)

  def register_node(_name, port, _driver) do
    :persistent_term.put({__MODULE__, :listen_port}, port)
    # A creation identifies this incarnation of the node name; any 32-bit value
    # above the reserved 0..3 will do.
    {:ok, 3 + :rand.uniform(0xFFFF_FFF0)}
  end

  @doc "The port this peer's distribution listens on."
  def listen_port, do: :persistent_term.get({__MODULE__, :listen_port})

  # Any free port: the relay learns it from `listen_port/0`.
  def listen_port_please(_name, _host), do: {:ok, 0}

  # With a port in the answer, the distribution skips port_please/2.
  def address_please(name, _host, :inet) do
    case route(name) do
      nil -> {:error, :nxdomain}
      port -> {:ok, {127, 0, 0, 1}, port, 6}
    end
  end

  def address_please(_name, _host, _family), do: {:error, :nxdomain}

  def port_please(name, host), do: port_please(name, host, :infinity)

  def port_please(name, _host, _timeout) do
    case route(name) do
      nil -> :noport
      port -> {:port, port, 6}
    end
  end

  def names(_host), do: {:error, :address}

  defp route(name) do
    name = if is_atom(name), do: :erlang.atom_to_list(name), else: name

    case :init.get_argument(@routes) do
      {:ok, routes} ->
        case :lists.keyfind(name, 1, :lists.map(&:erlang.list_to_tuple/1, routes)) do
          {_name, port} -> :erlang.list_to_integer(port)
          false -> nil
        end

      :error ->
        nil
    end
  end
end
