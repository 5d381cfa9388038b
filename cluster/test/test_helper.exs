# The test/support files of the repository that these tests share with the hashing
# package's (mix.exs, elixirc_paths) use ExUnit at compile time.
# An `assert_receive` without a timeout waits 5 s (scaled on the emulated legs),
# not ExUnit's 100 ms: a message that comes is awaited however loaded the machine;
# only one that never comes costs the wait.
# Log lines print only for a test that fails.
ExUnit.start(assert_receive_timeout: HRW.TestTimeouts.ms(5_000), capture_log: true)
