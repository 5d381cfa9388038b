//! What the examples share: a seeded random stream, a median, a skeleton's build
//! time. Each example includes this file as `mod common;` and uses part of it.
#![allow(dead_code)]

use hrw_core::skeleton::Skeleton;
use std::hint::black_box;
use std::time::Instant;

/// The next value of the splitmix64 stream at `state` (advancing it).
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A skeleton of `nodes` with leaves of `leaf`, and the median of its build time in
/// ms over several builds (3 from 1M nodes, else 9).
pub fn timed_build(nodes: &[(u64, f64)], leaf: usize) -> (Skeleton, f64) {
    let builds = if nodes.len() >= 1_000_000 { 3 } else { 9 };
    let mut times = Vec::new();
    let mut sk = Skeleton::build(nodes, leaf);
    for _ in 0..builds {
        let t = Instant::now();
        sk = black_box(Skeleton::build(black_box(nodes), leaf));
        times.push(t.elapsed().as_secs_f64());
    }
    (sk, median(times) * 1e3)
}
