//! Portable scalar scan: the reference every SIMD backend must agree with.

use crate::n3;

/// First index of the maximum `n3::score_prepared(tk, prepared[i])`.
pub fn argmax(prepared: &[u64], tk: u64) -> Option<usize> {
    super::lowest::first_lowest(
        prepared.len(),
        |_| true,
        |i| !n3::score_prepared(tk, prepared[i]),
    )
}
