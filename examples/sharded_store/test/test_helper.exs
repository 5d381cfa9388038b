# The test node is hidden: it drives :peer nodes and is never a member, and global
# and :pg on the peers ignore it, so it does not bridge a partition.
unless Node.alive?() do
  {_, 0} = System.cmd("epmd", ["-daemon"])

  # `epmd -daemon` returns once it has forked, before the daemon listens: asked for
  # its names until it answers (30 s at most), or a start right after it can find
  # no epmd on a loaded machine (econnrefused, then `{:EXIT, :nodistribution}`).
  :ok =
    Enum.find_value(1..1500, {:error, "epmd does not answer"}, fn _ ->
      case :erl_epmd.names() do
        {:ok, _names} -> :ok
        {:error, _} -> Process.sleep(20) && nil
      end
    end)

  {:ok, _} =
    :net_kernel.start(:"sharded_store_test_#{System.pid()}@127.0.0.1", %{
      name_domain: :longnames,
      hidden: true
    })
end

# The cluster package's silent-partition harness (cluster/test/support, not part of
# the :hrw_cluster dependency's build) and the repository's timeout helper it uses:
# compiled here and written to disk, because its peers load
# HRW.SilentPartition.Epmd at boot from the code path they are given.
repository = Path.expand("../../..", __DIR__)
ebin = Path.join(Mix.Project.build_path(), "hrw_test_support/ebin")
File.mkdir_p!(ebin)

for file <- [
      "test/support/test_timeouts.ex",
      "cluster/test/support/silent_partition_epmd.ex",
      "cluster/test/support/silent_partition.ex"
    ],
    {module, binary} <- Code.compile_file(Path.join(repository, file)) do
  File.write!(Path.join(ebin, "#{module}.beam"), binary)
end

true = Code.prepend_path(ebin)

ExUnit.start(timeout: 600_000)
