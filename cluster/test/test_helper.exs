# The test/support files of the repository that these tests share with the hashing
# package's (mix.exs, elixirc_paths) use ExUnit at compile time.
# Distribution starts here, before any test file is compiled: ExUnit runs test
# modules while it still requires others, and a node that becomes alive then
# strands the compiler's processes under its old name (on Elixir 1.18, "no
# connection to nonode@nohost" while compiling a test file). The tests that need
# it call `HRW.TestPeers.distributed!/0` again, which then only checks.
HRW.TestPeers.distributed!()

# An `assert_receive` without a timeout waits 5 s (scaled on the emulated legs),
# not ExUnit's 100 ms: a message that comes is awaited however loaded the machine;
# only one that never comes costs the wait.
# Log lines print only for a test that fails.
ExUnit.start(assert_receive_timeout: HRW.TestTimeouts.ms(5_000), capture_log: true)
