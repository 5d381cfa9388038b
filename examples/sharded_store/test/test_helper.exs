# The test node is hidden: it drives :peer nodes and is never a member, and global
# and :pg on the peers ignore it, so it does not bridge a partition.
unless Node.alive?() do
  {_, 0} = System.cmd("epmd", ["-daemon"])

  {:ok, _} =
    :net_kernel.start(:"sharded_store_test_#{System.pid()}@127.0.0.1", %{
      name_domain: :longnames,
      hidden: true
    })
end

ExUnit.start(timeout: 600_000)
