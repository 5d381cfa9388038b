//! AVX-512 (F + DQ) scan: eight lanes with a native 64-bit multiply (`vpmullq`),
//! rotate and unsigned compare.
//!
//! Each lane keeps its best score and the index it came from. Indices within a lane
//! only increase, so replacing on a strictly greater score keeps the first index of
//! the lane's maximum.
//! One accumulator is enough: its compare/blend chain is short next to the multiply
//! work per vector, so a second accumulator would not shorten it. The short tail
//! (fewer than a vector) goes through the portable scan.

use core::arch::x86_64::*;

use super::fold;
use super::portable;
use crate::n3::{M1, M2, M3};

const LANES: usize = 8;

/// Whether this CPU can run the AVX-512 scan.
pub fn supported() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq")
}

/// First index of the maximum `n3::score_prepared(tk, prepared[i])`; same answer as
/// [`portable::argmax`]. Falls back to the portable scan on CPUs without AVX-512.
#[inline]
pub fn argmax(prepared: &[u64], tk: u64) -> Option<usize> {
    if supported() {
        // SAFETY: avx512f and avx512dq were detected at runtime just above, which is
        // all `argmax_avx512` requires.
        unsafe { argmax_avx512(prepared, tk) }
    } else {
        portable::argmax(prepared, tk)
    }
}

/// `n3::tail` on eight lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn tail(x: __m512i) -> __m512i {
    let x = _mm512_mullo_epi64(x, _mm512_set1_epi64(M2 as i64));
    let x = _mm512_xor_si512(x, _mm512_srli_epi64::<27>(x));
    let x = _mm512_rol_epi64::<23>(x);
    let x = _mm512_mullo_epi64(x, _mm512_set1_epi64(M3 as i64));
    let x = _mm512_xor_si512(x, _mm512_srli_epi64::<31>(x));
    let x = _mm512_mullo_epi64(x, _mm512_set1_epi64(M1 as i64));
    _mm512_xor_si512(x, _mm512_srli_epi64::<33>(x))
}

/// Scores of the eight prepared ids in `chunk` against the prepared key `key`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn scores(chunk: &[u64], key: __m512i) -> __m512i {
    assert!(chunk.len() >= LANES);
    // SAFETY: `chunk` holds at least eight u64 (checked above), so the 64-byte
    // unaligned load stays within it; `_mm512_loadu_si512` has no alignment
    // requirement.
    let v = unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) };
    tail(_mm512_xor_si512(v, key))
}

/// Per-lane running maximum: score and the index it was seen at.
#[derive(Clone, Copy)]
struct Best {
    score: __m512i,
    index: __m512i,
}

impl Best {
    /// Start a lane set whose first element indices are `index`. Score 0 with those
    /// indices is a valid state: if the first score is 0 the first index stays, any
    /// greater score replaces it.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn new(index: __m512i) -> Best {
        Best {
            score: _mm512_setzero_si512(),
            index,
        }
    }

    /// Keep `(s, index)` in the lanes where `s` is strictly (unsigned) greater.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn update(&mut self, s: __m512i, index: __m512i) {
        let gt = _mm512_cmpgt_epu64_mask(s, self.score);
        self.score = _mm512_mask_blend_epi64(gt, self.score, s);
        self.index = _mm512_mask_blend_epi64(gt, self.index, index);
    }

    /// (max score, lowest index among the lanes holding it). The first index of the
    /// overall maximum lies in some lane, whose best is that maximum seen first at
    /// that index, so the smallest index among lanes at the maximum is the answer.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn reduce(self) -> (u64, usize) {
        let max = _mm512_reduce_max_epu64(self.score);
        let at_max = _mm512_cmpeq_epi64_mask(self.score, _mm512_set1_epi64(max as i64));
        (
            max,
            _mm512_mask_reduce_min_epu64(at_max, self.index) as usize,
        )
    }
}

#[target_feature(enable = "avx512f,avx512dq")]
fn argmax_avx512(prepared: &[u64], tk: u64) -> Option<usize> {
    if prepared.is_empty() {
        return None;
    }
    if prepared.len() <= 2 * LANES {
        return Some(argmax_short(prepared, tk));
    }
    let key = _mm512_set1_epi64(tk as i64);
    let lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    let step = _mm512_set1_epi64(LANES as i64);
    let mut best = Best::new(lane);
    let mut idx = lane;
    let mut chunks = prepared.chunks_exact(LANES);
    for chunk in &mut chunks {
        best.update(scores(chunk, key), idx);
        idx = _mm512_add_epi64(idx, step);
    }
    Some(fold::fold_tail(
        prepared,
        tk,
        chunks.remainder().len(),
        best.reduce(),
    ))
}

/// [`argmax_avx512`] of 1 to 16 ids (a leaf, a small ring): one or two masked
/// vectors, the maximum reduced once, and the first lane holding it found by a
/// mask compare (no per-lane index vectors, no second reduction, no scalar tail,
/// no branch).
/// Lanes past the end are neither loaded nor counted: their scores are zeroed and
/// masked out of the compare.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn argmax_short(prepared: &[u64], tk: u64) -> usize {
    let n = prepared.len();
    assert!((1..=2 * LANES).contains(&n));
    let key = _mm512_set1_epi64(tk as i64);
    let m0: __mmask8 = if n >= LANES { 0xFF } else { (1u8 << n) - 1 };
    let m1: __mmask8 = if n > LANES {
        (((1u16 << (n - LANES)) - 1) & 0xFF) as u8
    } else {
        0
    };
    let p = prepared.as_ptr();
    // SAFETY: a masked load touches only the lanes its mask selects: lanes
    // `0..min(n, 8)` of `p` and lanes `0..n - 8` of `p + 8`, all within the slice
    // (`p + 8` itself is at most one past the end, and nothing is read when `m1` is
    // 0); no alignment is required.
    let (v0, v1) = unsafe {
        (
            _mm512_maskz_loadu_epi64(m0, p.cast()),
            _mm512_maskz_loadu_epi64(m1, p.wrapping_add(LANES).cast()),
        )
    };
    let s0 = _mm512_maskz_mov_epi64(m0, tail(_mm512_xor_si512(v0, key)));
    let s1 = _mm512_maskz_mov_epi64(m1, tail(_mm512_xor_si512(v1, key)));
    let max = _mm512_reduce_max_epu64(_mm512_max_epu64(s0, s1));
    let max = _mm512_set1_epi64(max as i64);
    // Both masks at once, lanes of the second vector above: no branch on which
    // vector holds the maximum (it is either, at random, and would mispredict).
    let k0 = _mm512_mask_cmpeq_epi64_mask(m0, s0, max) as u32;
    let k1 = _mm512_mask_cmpeq_epi64_mask(m1, s1, max) as u32;
    (k0 | k1 << LANES).trailing_zeros() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_matches_scalar() {
        if !supported() {
            return;
        }
        super::fold::check_vector_tail::<LANES>(7, |x| {
            let mut out = [0u64; LANES];
            // SAFETY: the AVX-512 features were detected above; the load and the store
            // touch exactly the eight u64 of `x` and `out`, unaligned accesses.
            unsafe {
                let v = tail(_mm512_loadu_si512(x.as_ptr().cast()));
                _mm512_storeu_si512(out.as_mut_ptr().cast(), v);
            }
            out
        });
    }
}
