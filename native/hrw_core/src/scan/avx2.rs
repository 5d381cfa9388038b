//! AVX2 scan: four lanes. AVX2 has neither a 64-bit low multiply nor an unsigned
//! 64-bit compare, so the multiply is built from 32x32->64 `vpmuludq` pieces and the
//! compare is a signed `vpcmpgtq` on values with the sign bit flipped.
//!
//! Each lane keeps its best score (sign-flipped) and the index it came from. Indices
//! within a lane only increase, so replacing on a strictly greater score keeps the
//! first index of the lane's maximum.
//! One accumulator is enough: its compare/blend chain is short next to the multiply
//! work per vector, so a second accumulator would not shorten it. The short tail
//! (fewer than a vector) goes through the portable scan.

use core::arch::x86_64::*;

use super::fold;
use super::portable;
use crate::n3::{M1, M2, M3};

const LANES: usize = 4;
const SIGN: i64 = i64::MIN;

/// Whether this CPU can run the AVX2 scan.
pub fn supported() -> bool {
    is_x86_feature_detected!("avx2")
}

/// First index of the maximum `n3::score_prepared(tk, prepared[i])`; same answer as
/// [`portable::argmax`]. Falls back to the portable scan on CPUs without AVX2.
#[inline]
pub fn argmax(prepared: &[u64], tk: u64) -> Option<usize> {
    if supported() {
        // SAFETY: avx2 was detected at runtime just above, which is all
        // `argmax_avx2` requires.
        unsafe { argmax_avx2(prepared, tk) }
    } else {
        portable::argmax(prepared, tk)
    }
}

/// Lane-wise `a * c` modulo 2^64 for a constant `c`:
/// `lo(a)lo(c) + ((hi(a)lo(c) + lo(a)hi(c)) << 32)`. `vpmuludq` reads only the low 32
/// bits of each lane, so `c` itself serves as `lo(c)`.
#[inline]
#[target_feature(enable = "avx2")]
fn mul_const(a: __m256i, c: u64) -> __m256i {
    let c_lo = _mm256_set1_epi64x(c as i64);
    let c_hi = _mm256_set1_epi64x((c >> 32) as i64);
    let low = _mm256_mul_epu32(a, c_lo);
    let cross = _mm256_add_epi64(
        _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), c_lo),
        _mm256_mul_epu32(a, c_hi),
    );
    _mm256_add_epi64(low, _mm256_slli_epi64::<32>(cross))
}

/// `x ^ (x >> N)` on four lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn xorshift<const N: i32>(x: __m256i) -> __m256i {
    _mm256_xor_si256(x, _mm256_srli_epi64::<N>(x))
}

/// `n3::tail` on four lanes, returned with the sign bit flipped so that a signed
/// compare orders the results as unsigned scores.
#[inline]
#[target_feature(enable = "avx2")]
fn tail_flipped(x: __m256i) -> __m256i {
    let x = xorshift::<27>(mul_const(x, M2));
    // rotate_left(23) = (x << 23) | (x >> 41)
    let x = _mm256_or_si256(_mm256_slli_epi64::<23>(x), _mm256_srli_epi64::<41>(x));
    let x = xorshift::<31>(mul_const(x, M3));
    let x = xorshift::<33>(mul_const(x, M1));
    _mm256_xor_si256(x, _mm256_set1_epi64x(SIGN))
}

/// Sign-flipped scores of the four prepared ids in `chunk` against the key `key`.
#[inline]
#[target_feature(enable = "avx2")]
fn scores_flipped(chunk: &[u64], key: __m256i) -> __m256i {
    assert!(chunk.len() >= LANES);
    // SAFETY: `chunk` holds at least four u64 (checked above), so the 32-byte
    // unaligned load stays within it; `_mm256_loadu_si256` has no alignment
    // requirement.
    let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
    tail_flipped(_mm256_xor_si256(v, key))
}

/// Per-lane running maximum: sign-flipped score and the index it was seen at.
#[derive(Clone, Copy)]
struct Best {
    score: __m256i,
    index: __m256i,
}

impl Best {
    /// Start a lane set whose first element indices are `index`. Score 0 (flipped:
    /// `SIGN`) with those indices is a valid state: if the first score is 0 the first
    /// index stays, any greater score replaces it.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(index: __m256i) -> Best {
        Best {
            score: _mm256_set1_epi64x(SIGN),
            index,
        }
    }

    /// Keep `(s, index)` in the lanes where the flipped `s` is strictly greater.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn update(&mut self, s: __m256i, index: __m256i) {
        let gt = _mm256_cmpgt_epi64(s, self.score);
        self.score = _mm256_blendv_epi8(self.score, s, gt);
        self.index = _mm256_blendv_epi8(self.index, index, gt);
    }

    /// Merge `other` in lane-wise: take its lane when its score is greater, or equal
    /// with a lower index (indices are below 2^63, so a signed compare orders them).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn merge(self, other: Best) -> Best {
        let gt = _mm256_cmpgt_epi64(other.score, self.score);
        let eq = _mm256_cmpeq_epi64(other.score, self.score);
        let lower = _mm256_cmpgt_epi64(self.index, other.index);
        let take = _mm256_or_si256(gt, _mm256_and_si256(eq, lower));
        Best {
            score: _mm256_blendv_epi8(self.score, other.score, take),
            index: _mm256_blendv_epi8(self.index, other.index, take),
        }
    }

    /// (max score, lowest index among the lanes holding it). The first index of the
    /// overall maximum lies in some lane, whose best is that maximum seen first at
    /// that index, so the smallest index among lanes at the maximum is the answer.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn reduce(self) -> (u64, usize) {
        // Lanes [2,3,0,1], then [1,0,3,2]: afterwards every lane holds the answer.
        let swap_halves = |v| _mm256_permute4x64_epi64::<0b01_00_11_10>(v);
        let swap_pairs = |v| _mm256_shuffle_epi32::<0b01_00_11_10>(v);
        let b = self.merge(Best {
            score: swap_halves(self.score),
            index: swap_halves(self.index),
        });
        let b = b.merge(Best {
            score: swap_pairs(b.score),
            index: swap_pairs(b.index),
        });
        let score = _mm256_extract_epi64::<0>(b.score) as u64 ^ SIGN as u64;
        (score, _mm256_extract_epi64::<0>(b.index) as usize)
    }
}

#[target_feature(enable = "avx2")]
fn argmax_avx2(prepared: &[u64], tk: u64) -> Option<usize> {
    if prepared.len() < LANES {
        return portable::argmax(prepared, tk);
    }
    let key = _mm256_set1_epi64x(tk as i64);
    let lane = _mm256_setr_epi64x(0, 1, 2, 3);
    let step = _mm256_set1_epi64x(LANES as i64);
    let mut best = Best::new(lane);
    let mut idx = lane;
    let mut chunks = prepared.chunks_exact(LANES);
    for chunk in &mut chunks {
        best.update(scores_flipped(chunk, key), idx);
        idx = _mm256_add_epi64(idx, step);
    }
    Some(fold::fold_tail(
        prepared,
        tk,
        chunks.remainder().len(),
        best.reduce(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_matches_scalar() {
        if !supported() {
            return;
        }
        super::fold::check_vector_tail::<LANES>(11, |x| {
            let mut out = [0u64; LANES];
            // SAFETY: AVX2 was detected above; the load and the store touch exactly
            // the four u64 of `x` and `out`, unaligned accesses.
            unsafe {
                let v = tail_flipped(_mm256_loadu_si256(x.as_ptr().cast()));
                _mm256_storeu_si256(out.as_mut_ptr().cast(), v);
            }
            // The scan's scores have their sign bit flipped (signed compares).
            out.map(|o| o ^ (1 << 63))
        });
    }
}
