//! Prepared-scan throughput per backend, in ns per node.
//!
//! `cargo run --release --example scan_bench` (from `native/`: add `-p hrw_core`).
//! Each cell is the median of several repetitions; every repetition scans the same
//! node set with a rotating set of keys.

mod common;

use common::splitmix;
use std::hint::black_box;
use std::time::Instant;

use hrw_core::n3;
use hrw_core::scan::Backend;

const SIZES: [usize; 5] = [16, 100, 1000, 10_000, 100_000];
const REPS: usize = 11;
const KEYS: usize = 256;
/// Nodes scanned per repetition (rounded up to whole calls).
const NODES_PER_REP: usize = 4_000_000;

/// One timed repetition: ns/node of `backend` over `prepared`, cycling through `keys`.
fn time_once(backend: Backend, prepared: &[u64], keys: &[u64]) -> f64 {
    let calls = NODES_PER_REP.div_ceil(prepared.len()).max(KEYS);
    let start = Instant::now();
    let mut acc = 0usize;
    for c in 0..calls {
        let tk = keys[c % keys.len()];
        acc ^= backend
            .argmax(black_box(prepared), black_box(tk))
            .unwrap_or(0);
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / (calls * prepared.len()) as f64
}

/// Median ns/node per backend. Repetitions interleave the backends so that
/// background noise on the machine hits all of them alike; the first is a warm-up.
fn measure(backends: &[Backend], prepared: &[u64], keys: &[u64]) -> Vec<f64> {
    let mut samples = vec![Vec::with_capacity(REPS); backends.len()];
    for rep in 0..=REPS {
        for (b, s) in backends.iter().zip(&mut samples) {
            let t = time_once(*b, prepared, keys);
            if rep > 0 {
                s.push(t);
            }
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        })
        .collect()
}

fn main() {
    let backends = Backend::available();
    let mut state = 0x5eed;
    let keys: Vec<u64> = (0..KEYS)
        .map(|_| n3::prepared_key(splitmix(&mut state)))
        .collect();

    println!(
        "detected: {} (override with HRW_SCAN_BACKEND)",
        Backend::detect().name()
    );
    print!("{:>8}", "nodes");
    for b in &backends {
        print!(" {:>10}", b.name());
    }
    println!("   (ns/node, median of {REPS})");

    for n in SIZES {
        let prepared: Vec<u64> = (0..n).map(|_| n3::linear(splitmix(&mut state))).collect();
        // Every backend must agree before its time counts.
        for &tk in &keys[..16] {
            let expected = Backend::Portable.argmax(&prepared, tk);
            for b in &backends {
                assert_eq!(b.argmax(&prepared, tk), expected, "{b:?} n={n}");
            }
        }
        print!("{n:>8}");
        for t in measure(&backends, &prepared, &keys) {
            print!(" {t:>10.3}");
        }
        println!();
    }
}
