//! Portable scalar scan: the reference every SIMD backend must agree with.

use crate::n3;

/// First index of the maximum `n3::score_prepared(tk, prepared[i])`.
pub fn argmax(prepared: &[u64], tk: u64) -> Option<usize> {
    let mut best_index = 0;
    let mut best_score = n3::score_prepared(tk, *prepared.first()?);
    for (i, &tn) in prepared.iter().enumerate().skip(1) {
        let s = n3::score_prepared(tk, tn);
        if s > best_score {
            best_score = s;
            best_index = i;
        }
    }
    Some(best_index)
}
