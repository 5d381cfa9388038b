# The test/support files of the repository that these tests share with the hashing
# package's (mix.exs, elixirc_paths) use ExUnit at compile time.
ExUnit.start()
