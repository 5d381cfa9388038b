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

# The library's silent-partition harness (test/support, not part of the :hrw
# dependency's build): compiled here and written to disk, because its peers load
# HRW.SilentPartition.Epmd at boot from the code path they are given.
support = Path.expand("../../../test/support", __DIR__)
ebin = Path.join(Mix.Project.build_path(), "hrw_test_support/ebin")
File.mkdir_p!(ebin)

for file <- ["test_timeouts.ex", "silent_partition_epmd.ex", "silent_partition.ex"],
    {module, binary} <- Code.compile_file(Path.join(support, file)) do
  File.write!(Path.join(ebin, "#{module}.beam"), binary)
end

true = Code.prepend_path(ebin)

ExUnit.start(timeout: 600_000)
