//! What the SIMD scans share: finishing a vector scan's tail, and testing a vector N3 tail.

use super::portable;
use crate::n3;

/// Finish a vector scan whose best over all but the last `rest` ids is `best`
/// (score, index): scan that short tail with the portable code. A tail element
/// wins only with a strictly greater score, since its index is larger.
#[inline]
pub(super) fn fold_tail(prepared: &[u64], tk: u64, rest: usize, best: (u64, usize)) -> usize {
    let (score, index) = best;
    let start = prepared.len() - rest;
    match portable::argmax(&prepared[start..], tk) {
        Some(j) if n3::score_prepared(tk, prepared[start + j]) > score => start + j,
        _ => index,
    }
}

/// Test of a SIMD backend's vector N3 tail: `tail` maps `L` inputs at once and
/// must agree with the scalar [`n3::tail`] on each (1000 vectors of ids from
/// `seed`).
#[cfg(test)]
pub(super) fn check_vector_tail<const L: usize>(seed: u64, tail: impl Fn([u64; L]) -> [u64; L]) {
    let mut s = seed;
    for _ in 0..1000 {
        let mut x = [0u64; L];
        for v in &mut x {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            *v = s ^ (s >> 29);
        }
        for (xi, oi) in x.iter().zip(tail(x)) {
            assert_eq!(oi, n3::tail(*xi));
        }
    }
}
