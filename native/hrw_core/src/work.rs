//! The cost model of a normal-scheduler call, and (feature `work-count`) a count of
//! the work actually done, so a test can check that every call paid for its work
//! before doing it.
//!
//! Units are rough nanoseconds of warm work (a unit is a scale, never a timing
//! asserted: test/hrw/budget_test.exs checks charges against counts). A caller with
//! a budget *charges* an upper bound of the work it is about to do, from sizes it
//! knows beforehand; the code that does the work *counts* it where it happens, in
//! the same units. With the feature off, [`count`] compiles to nothing.
//!
//! Both tallies are per thread: a normal-scheduler NIF call runs on one thread from
//! start to end, so a probe that resets them, runs one call and reads them sees that
//! call alone.

/// One N3 score of a prepared node (a scan step; ns per node by backend in
/// bench/results/scan_bench-2026-12-01.txt).
pub const SCORE: u64 = 2;
/// One weighted cost (N3 score, its logarithm, a division; bounds skip most logs).
pub const WEIGHTED_SCORE: u64 = 24;
/// One level of a skeleton descent (a coin, a compare, a dependent load).
pub const LEVEL: u64 = 4;
/// One element read, copied or written: a list cell, a tuple slot, a result term.
pub const ELEMENT: u64 = 2;
/// One term visited by the canonical term walk (hrw_nif's `term_id`): the type
/// test and reading a scalar (an integer of at most 64 bits, a float, a binary's
/// header, an atom name of at most 255 characters).
pub const TERM: u64 = 16;
/// Bytes hashed per unit (XXH3 hashes several bytes a nanosecond).
pub const BYTES_PER_UNIT: u64 = 16;
/// One comparison-and-move step of a comparison sort: a sort of `n` costs
/// `n * ceil(log2 n)` of these ([`sort`]). Every sort charged with it orders
/// 16-byte pairs or narrower (map entries `(key id, value id)` in the term walk,
/// `(id, index)` in [`crate::sort`], scores, u32 positions), with room for a
/// slower machine than the one a step of such a sort takes about a nanosecond on.
pub const SORT_STEP: u64 = 3;

/// Units to hash `len` bytes.
#[inline]
pub const fn bytes(len: usize) -> u64 {
    len as u64 / BYTES_PER_UNIT
}

/// Units to sort `n` elements (comparison sorts, hash-map building).
#[inline]
pub const fn sort(n: usize) -> u64 {
    let n = n as u64;
    if n < 2 {
        n
    } else {
        n * (64 - (n - 1).leading_zeros() as u64) * SORT_STEP
    }
}

#[cfg(feature = "work-count")]
mod tally {
    use std::cell::Cell;

    thread_local! {
        pub static COUNTED: Cell<u64> = const { Cell::new(0) };
        pub static CHARGED: Cell<u64> = const { Cell::new(0) };
    }

    pub fn add(cell: &'static std::thread::LocalKey<Cell<u64>>, units: u64) {
        cell.with(|c| c.set(c.get().saturating_add(units)));
    }
}

/// Records `units` of work done on this thread (feature `work-count`; else nothing).
#[inline(always)]
pub fn count(units: u64) {
    #[cfg(feature = "work-count")]
    tally::add(&tally::COUNTED, units);
    #[cfg(not(feature = "work-count"))]
    let _ = units;
}

/// Records `units` charged to a budget on this thread (feature `work-count`).
#[inline(always)]
pub fn charged(units: u64) {
    #[cfg(feature = "work-count")]
    tally::add(&tally::CHARGED, units);
    #[cfg(not(feature = "work-count"))]
    let _ = units;
}

/// Whether counting is compiled in.
pub const fn enabled() -> bool {
    cfg!(feature = "work-count")
}

/// `(charged, counted)` on this thread since the last call, and resets both.
pub fn take() -> (u64, u64) {
    #[cfg(feature = "work-count")]
    {
        (tally::CHARGED.take(), tally::COUNTED.take())
    }
    #[cfg(not(feature = "work-count"))]
    {
        (0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_cost_grows_as_n_log_n() {
        assert_eq!(sort(0), 0);
        assert_eq!(sort(1), 1);
        assert_eq!(sort(2), 2 * SORT_STEP);
        assert_eq!(sort(1024), 1024 * 10 * SORT_STEP);
        assert_eq!(sort(1025), 1025 * 11 * SORT_STEP);
    }
}
