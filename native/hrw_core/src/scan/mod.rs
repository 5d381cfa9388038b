//! Scans over prepared node ids (`n3::linear(node)`): the owner is the index with the
//! highest score, the first such index when equal ids repeat.
//!
//! Backends compute identical answers; [`Backend::detect`] picks the fastest the CPU
//! supports, once. Tests run every backend the machine has against the portable one.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
mod fold;
mod lowest;
pub mod portable;

use std::sync::OnceLock;

pub use lowest::first_lowest;

use crate::n3;

/// Environment variable forcing a backend (`portable`, `avx2`, `avx512`), read once by
/// [`Backend::detect`]. An unknown or unsupported value falls back to detection.
pub const BACKEND_ENV: &str = "HRW_SCAN_BACKEND";

/// A scan implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Portable,
    /// x86_64 AVX2, four lanes.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86_64 AVX-512 F + DQ, eight lanes.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Backend {
    /// The fastest backend this CPU supports (detected once, then cached), unless
    /// `HRW_SCAN_BACKEND` names another supported one.
    pub fn detect() -> Backend {
        static DETECTED: OnceLock<Backend> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            std::env::var(BACKEND_ENV)
                .ok()
                .and_then(|name| Backend::from_name(name.trim()))
                .filter(|b| b.is_supported())
                .unwrap_or_else(Backend::fastest)
        })
    }

    /// The fastest supported backend, ignoring the environment.
    fn fastest() -> Backend {
        Backend::available()
            .pop()
            .expect("portable is always available")
    }

    /// Every backend this machine can run, portable first (then slowest to fastest).
    pub fn available() -> Vec<Backend> {
        Backend::ALL
            .iter()
            .copied()
            .filter(|b| b.is_supported())
            .collect()
    }

    /// Every backend compiled for this architecture, slowest to fastest.
    const ALL: &'static [Backend] = &[
        Backend::Portable,
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2,
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512,
    ];

    /// Whether this CPU can run the backend.
    pub fn is_supported(self) -> bool {
        match self {
            Backend::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => avx2::supported(),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => avx512::supported(),
        }
    }

    /// Short lowercase name, as accepted by `HRW_SCAN_BACKEND`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => "avx512",
        }
    }

    /// The backend called `name` (see [`Backend::name`]), if compiled in.
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL
            .iter()
            .copied()
            .find(|b| b.name().eq_ignore_ascii_case(name))
    }

    /// Index of the highest-scoring prepared node for the prepared key `tk`
    /// (`n3::prepared_key`), or `None` for an empty slice. A SIMD backend the CPU
    /// lacks runs the portable scan instead (same answer).
    #[inline]
    pub fn argmax(self, prepared: &[u64], tk: u64) -> Option<usize> {
        crate::work::count(crate::cost::SCORE * prepared.len() as u64);
        match self {
            Backend::Portable => portable::argmax(prepared, tk),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => avx2::argmax(prepared, tk),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => avx512::argmax(prepared, tk),
        }
    }
}

/// Argmax with the detected backend.
#[inline]
pub fn argmax(prepared: &[u64], tk: u64) -> Option<usize> {
    Backend::detect().argmax(prepared, tk)
}

/// The `count` best distinct indices, best first. Entries whose prepared id equals a
/// better one (duplicated nodes) are skipped, so the result names distinct ids.
pub fn top(prepared: &[u64], tk: u64, count: usize) -> Vec<usize> {
    if count == 0 || prepared.is_empty() {
        return Vec::new();
    }
    if count == 1 {
        return argmax(prepared, tk).into_iter().collect();
    }
    // Scores are a bijection of ids, so sorting by (score desc, index asc) places equal
    // ids next to each other and lets us keep the first of each run.
    crate::work::count((crate::cost::SCORE + crate::cost::ELEMENT) * prepared.len() as u64);
    let mut scored: Vec<(u64, usize)> = prepared
        .iter()
        .enumerate()
        .map(|(i, &tn)| (n3::score_prepared(tk, tn), i))
        .collect();
    crate::work::count(crate::cost::sort(scored.len()));
    scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.dedup_by_key(|e| e.0);
    scored.truncate(count);
    scored.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splitmix64(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn random_vec(state: &mut u64, len: usize) -> Vec<u64> {
        (0..len).map(|_| splitmix64(state)).collect()
    }

    /// Every available backend agrees with portable on `prepared` for a few keys.
    fn check(prepared: &[u64], state: &mut u64) {
        for _ in 0..4 {
            let tk = splitmix64(state);
            let expected = portable::argmax(prepared, tk);
            for b in Backend::available() {
                assert_eq!(
                    b.argmax(prepared, tk),
                    expected,
                    "{b:?} len {} tk {tk:#x}",
                    prepared.len()
                );
            }
        }
    }

    #[test]
    fn available_starts_portable_and_holds_detect() {
        let all = Backend::available();
        assert_eq!(all[0], Backend::Portable);
        assert!(all.contains(&Backend::detect()));
        for b in all {
            assert_eq!(Backend::from_name(b.name()), Some(b));
        }
    }

    #[test]
    fn empty_is_none() {
        for b in Backend::available() {
            assert_eq!(b.argmax(&[], 42), None);
        }
    }

    #[test]
    fn random_lengths_0_to_70() {
        let mut state = 1;
        for len in 0..=70 {
            for _ in 0..50 {
                let v = random_vec(&mut state, len);
                check(&v, &mut state);
            }
        }
    }

    #[test]
    fn duplicates_first_index_wins() {
        let mut state = 2;
        for len in 1..=70 {
            for pool in [1, 2, 3, 5, 9] {
                let values = random_vec(&mut state, pool);
                for _ in 0..20 {
                    let v: Vec<u64> = (0..len)
                        .map(|_| values[(splitmix64(&mut state) % pool as u64) as usize])
                        .collect();
                    check(&v, &mut state);
                }
            }
        }
    }

    #[test]
    fn all_equal_is_zero() {
        let mut state = 3;
        for len in 1..=70 {
            let v = vec![splitmix64(&mut state); len];
            let tk = splitmix64(&mut state);
            for b in Backend::available() {
                assert_eq!(b.argmax(&v, tk), Some(0), "{b:?} len {len}");
            }
        }
    }

    #[test]
    fn best_at_every_position_with_later_copies() {
        // Put the winning id at position `p` and again at later positions: `p` wins.
        let mut state = 4;
        for len in 1..=70 {
            let base = random_vec(&mut state, len);
            let tk = splitmix64(&mut state);
            let winner = base[portable::argmax(&base, tk).unwrap()];
            let loser = *base
                .iter()
                .min_by_key(|&&x| n3::score_prepared(tk, x))
                .unwrap();
            for p in 0..len {
                // Before `p` the winner becomes the loser; from `p` on it sits at `p`
                // and at every third position.
                let v: Vec<u64> = base
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| match i {
                        _ if i == p || (i > p && i % 3 == 0) => winner,
                        _ if x == winner => loser,
                        _ => x,
                    })
                    .collect();
                for b in Backend::available() {
                    assert_eq!(b.argmax(&v, tk), Some(p), "{b:?} len {len} p {p}");
                }
            }
        }
    }

    #[test]
    fn zero_score_entries() {
        // Scores of 0 exercise the accumulators' initial state (score 0 at the lane's
        // first index). `tail(0) == 0`, so the entry `tk` scores 0 against key `tk`.
        let mut state = 5;
        assert_eq!(n3::tail(0), 0);
        for len in 1..=70 {
            let tk = splitmix64(&mut state);
            // All entries score 0: index 0.
            let v = vec![tk; len];
            for b in Backend::available() {
                assert_eq!(b.argmax(&v, tk), Some(0), "{b:?} len {len}");
            }
            // A single non-zero score among zeros wins wherever it is.
            for p in 0..len {
                let mut v = vec![tk; len];
                v[p] = tk ^ 1;
                for b in Backend::available() {
                    assert_eq!(b.argmax(&v, tk), Some(p), "{b:?} len {len} p {p}");
                }
            }
        }
    }

    #[test]
    fn large_slices() {
        let mut state = 6;
        for len in [1000, 1001, 1007, 100_000, 100_003] {
            let v = random_vec(&mut state, len);
            check(&v, &mut state);
            // Large with duplicates of a few values.
            let pool = random_vec(&mut state, 7);
            let d: Vec<u64> = (0..len)
                .map(|_| pool[(splitmix64(&mut state) % 7) as usize])
                .collect();
            check(&d, &mut state);
        }
    }

    #[test]
    fn top_one_matches_argmax() {
        let mut state = 7;
        for len in 0..=40 {
            let v = random_vec(&mut state, len);
            let tk = splitmix64(&mut state);
            assert_eq!(
                top(&v, tk, 1),
                argmax(&v, tk).into_iter().collect::<Vec<_>>()
            );
        }
    }
}
