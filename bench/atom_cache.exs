# Lookups of a working set of atoms through the per-VM atom-id cache (8,192 slots,
# 4-way, evicting): ns per id for working sets below, at and above its size.
#
#     MIX_ENV=test mix run bench/atom_cache.exs
#
# It calls the dirty twin of term_id (one call per list, no budget), which only a
# test build of the library has.
for n <- [1_000, 5_000, 10_000, 50_000] do
  atoms = for i <- 1..n, do: String.to_atom("bench_atom_#{n}_#{i}")
  # Batches of 1,000 atoms, each its own term_id call (a list of 1,000 atoms).
  chunks = Enum.chunk_every(atoms, 1_000)
  run = fn -> Enum.each(chunks, &HRW.Native.term_id_dirty/1) end
  run.()

  times =
    for _ <- 1..30 do
      t = System.monotonic_time(:nanosecond)
      run.()
      System.monotonic_time(:nanosecond) - t
    end

  median = Enum.at(Enum.sort(times), 15)
  IO.puts("#{n} atoms: #{Float.round(median / n, 1)} ns/atom (median of 30 passes)")
end
