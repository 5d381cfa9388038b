defmodule ShardedStore.TestPeer do
  @moduledoc false
  # A :peer node on 127.0.0.1 running this build's code, connected to the test's
  # node. Links are made by the tests only (dist_auto_connect never), so a cut
  # stays cut; global keeps OTP's default prevent_overlapping_partitions (it may
  # cut more links than a test did, and the tests mend those within a side).

  @doc false
  @spec start(atom()) :: {pid(), node()}
  def start(name) do
    {:ok, peer, node} =
      :peer.start(%{
        name: name,
        host: ~c"127.0.0.1",
        longnames: true,
        connection: :standard_io,
        args: [
          ~c"-kernel",
          ~c"dist_auto_connect",
          ~c"never",
          ~c"-kernel",
          ~c"logger_level",
          ~c"error" | Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
        ]
      })

    true = Node.connect(node)
    {peer, node}
  end

  @doc false
  # Links within each group that global cut (prevent_overlapping_partitions, while
  # a cut is being made or a killed node is being detected) are made again, as
  # dist_auto_connect would; never a link across groups. Returns false (tests call
  # it as the second half of an `or` in a wait).
  @spec mend([[node()]]) :: false
  def mend(groups) do
    for group <- groups, a <- group, b <- group, a < b do
      try do
        :erpc.call(a, :net_kernel, :connect_node, [b], 10_000)
      catch
        _, _ -> false
      end
    end

    false
  end
end
