//! The N3 score function (contract: docs/HASHING.md, "N3 score").
//!
//! `score(key, node) = tail(T(prep(key)) ^ T(node))` where `T` is linear over XOR,
//! so a prepared ring stores `T(node)` once and a lookup computes `T(prep(key))` once.
//! Every step is a bijection on u64, so distinct node ids never tie for one key.

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
pub(crate) const M1: u64 = 0xbf58_476d_1ce4_e5b9;
pub(crate) const M2: u64 = 0x2cb0_f69f_4abe_a221;
pub(crate) const M3: u64 = 0xb19e_04cb_9dce_3147;

/// Key preparation, done once per key.
#[inline(always)]
pub fn prep(key: u64) -> u64 {
    let mut k = key.wrapping_add(GOLDEN);
    k ^= k >> 32;
    k = k.wrapping_mul(M1);
    k ^ (k >> 27)
}

/// The linear layer `T(x) = x ^ rotl(x,17) ^ rotl(x,43)`; `T(a ^ b) = T(a) ^ T(b)`.
#[inline(always)]
pub fn linear(x: u64) -> u64 {
    x ^ x.rotate_left(17) ^ x.rotate_left(43)
}

/// The non-linear tail applied after the linear layer.
#[inline(always)]
pub fn tail(mut x: u64) -> u64 {
    x = x.wrapping_mul(M2);
    x ^= x >> 27;
    x = x.rotate_left(23);
    x = x.wrapping_mul(M3);
    x ^= x >> 31;
    x = x.wrapping_mul(M1);
    x ^ (x >> 33)
}

/// Full N3 score of a prepared key `k = prep(key)` against a raw node id.
#[inline(always)]
pub fn score(k: u64, node: u64) -> u64 {
    tail(linear(k ^ node))
}

/// Score from both sides already passed through `linear`: `tk = linear(prep(key))`,
/// `tn = linear(node)`. Equal to `score(prep(key), node)`.
#[inline(always)]
pub fn score_prepared(tk: u64, tn: u64) -> u64 {
    tail(tk ^ tn)
}

/// `linear(prep(key))`: what a prepared scan needs per key.
#[inline(always)]
pub fn prepared_key(key: u64) -> u64 {
    linear(prep(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straight transcription of the spec, kept apart from the optimised split above.
    fn spec_score(key: u64, node: u64) -> u64 {
        let mut k = key.wrapping_add(0x9e3779b97f4a7c15);
        k ^= k >> 32;
        k = k.wrapping_mul(0xbf58476d1ce4e5b9);
        k ^= k >> 27;
        let mut x = k ^ node;
        x = x ^ x.rotate_left(17) ^ x.rotate_left(43);
        x = x.wrapping_mul(0x2cb0f69f4abea221);
        x ^= x >> 27;
        x = x.rotate_left(23);
        x = x.wrapping_mul(0xb19e04cb9dce3147);
        x ^= x >> 31;
        x = x.wrapping_mul(0xbf58476d1ce4e5b9);
        x ^ (x >> 33)
    }

    #[test]
    fn split_form_equals_spec() {
        let mut s = 1u64;
        for _ in 0..10_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = s;
            let node = s.rotate_left(29) ^ 0x1234_5678;
            assert_eq!(score(prep(key), node), spec_score(key, node));
            assert_eq!(
                score_prepared(prepared_key(key), linear(node)),
                spec_score(key, node)
            );
        }
    }

    #[test]
    fn pinned_vectors() {
        // Computed once from the spec transcription; they must never change.
        for &(key, node, expected) in crate::vectors::N3_VECTORS {
            assert_eq!(spec_score(key, node), expected, "spec({key:#x},{node:#x})");
            assert_eq!(
                score(prep(key), node),
                expected,
                "score({key:#x},{node:#x})"
            );
        }
    }
}
