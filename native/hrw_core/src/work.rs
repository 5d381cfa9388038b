//! The tally (feature `work-count`) of the work actually done, so a test can check
//! that every call paid for its work before doing it.
//!
//! A caller with a budget *charges* an upper bound of the work it is about to do
//! (the cost model, [`crate::cost`]); the code that does the work *counts* it where
//! it happens, in the same units. With the feature off, [`count`] compiles to
//! nothing.
//!
//! Both tallies are per thread: a normal-scheduler NIF call runs on one thread from
//! start to end, so a probe that resets them, runs one call and reads them sees that
//! call alone.

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
