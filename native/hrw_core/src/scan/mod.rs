//! Scans over prepared node ids (`n3::linear(node)`): the owner is the index with the
//! highest score, the first such index when equal ids repeat.
//!
//! Backends compute identical answers; [`Backend::detect`] picks the fastest the CPU
//! supports, once. Tests run every backend the machine has against the portable one.

pub mod portable;

use crate::n3;

/// A scan implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Portable,
}

impl Backend {
    /// The fastest backend this CPU supports (detected once, then cached).
    pub fn detect() -> Backend {
        Backend::Portable
    }

    /// Every backend this machine can run, portable first.
    pub fn available() -> Vec<Backend> {
        vec![Backend::Portable]
    }

    /// Index of the highest-scoring prepared node for the prepared key `tk`
    /// (`n3::prepared_key`), or `None` for an empty slice.
    #[inline]
    pub fn argmax(self, prepared: &[u64], tk: u64) -> Option<usize> {
        match self {
            Backend::Portable => portable::argmax(prepared, tk),
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
    let mut scored: Vec<(u64, usize)> = prepared
        .iter()
        .enumerate()
        .map(|(i, &tn)| (n3::score_prepared(tk, tn), i))
        .collect();
    scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.dedup_by_key(|e| e.0);
    scored.truncate(count);
    scored.into_iter().map(|(_, i)| i).collect()
}
