//! Rendezvous (highest random weight) hashing with the N3 score function.
//!
//! Pure Rust with no Erlang in it: node and key ids are `u64`, answers are indices.
//! The Erlang glue lives in the `hrw_nif` crate; any Rust program can use this one.
//!
//! * [`n3`]: the score function (a frozen contract).
//! * [`scan`]: argmax / top-k over prepared node ids, portable and SIMD backends.
//! * [`ring`]: the exact prepared ring; [`nodes`]: deduplication of node sets.
//! * [`bounded`]: bounded-load assignment of a known key set; [`sort`]: sorting by id.
//! * [`term_hash`]: the canonical term-id scheme's primitive encodings.
//! * [`cost`]: the work-budget cost model and the `Budget` that normal-scheduler
//!   calls pay from; [`work`] (in it): the tally of the work actually done, for
//!   the budget tests.

pub mod bounded;
pub mod cost;
pub mod n3;
pub mod nodes;
pub mod ring;
pub mod scan;
pub mod skeleton;
pub mod sort;
pub mod term_hash;
pub mod weighted;

pub use cost::work;

#[cfg(test)]
mod vectors;
