//! Single lookups in Rust alone, ns per lookup: a skeleton (leaves of 16), a ring
//! and a bare prepared scan, over nodes "node-<i>" and 20,000 keys "order:<i>"
//! (ids hashed beforehand), at 10, 16, 10k and 1M nodes.
//!
//! `cargo run --release --example lookup_bench` (from `native/`: add `-p hrw_core`).
//! Each figure is the median of 5 passes over the keys; compare it with the same
//! call from Elixir to see what the NIF boundary and the term walk add.

mod common;

use common::median;
use std::hint::black_box;
use std::time::Instant;

use hrw_core::ring::Ring;
use hrw_core::skeleton::Skeleton;
use hrw_core::{n3, scan, term_hash};

const SIZES: [usize; 4] = [10, 16, 10_000, 1_000_000];
const PASSES: usize = 5;

fn median_ns(keys: &[u64], rounds: usize, mut lookup: impl FnMut(u64) -> usize) -> f64 {
    let times: Vec<f64> = (0..PASSES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..rounds {
                for &k in keys {
                    black_box(lookup(black_box(k)));
                }
            }
            start.elapsed().as_nanos() as f64 / (rounds * keys.len()) as f64
        })
        .collect();
    median(times)
}

fn main() {
    let keys: Vec<u64> = (0..20_000u64)
        .map(|i| term_hash::binary(format!("order:{i}").as_bytes()))
        .collect();
    println!("| nodes | skeleton | ring | scan |");
    println!("|---:|---:|---:|---:|");
    for n in SIZES {
        let nodes: Vec<(u64, f64)> = (0..n)
            .map(|i| (term_hash::binary(format!("node-{i}").as_bytes()), 1.0))
            .collect();
        let skeleton = Skeleton::build(&nodes, 16);
        let rounds = if n > 100_000 { 2 } else { 20 };
        let sk = median_ns(&keys, rounds, |k| skeleton.owner(k));
        // A ring scans every node: only small sets are timed.
        let (ring_ns, scan_ns) = if n <= 10_000 {
            let ring = Ring::new(&nodes);
            let prepared: Vec<u64> = nodes.iter().map(|&(id, _)| n3::linear(id)).collect();
            let rounds = if n > 100 { 1 } else { 20 };
            (
                format!(
                    "{:.1}",
                    median_ns(&keys, rounds, |k| ring.owner(k).unwrap_or(0))
                ),
                format!(
                    "{:.1}",
                    median_ns(&keys, rounds, |k| {
                        scan::argmax(&prepared, n3::prepared_key(k)).unwrap_or(0)
                    })
                ),
            )
        } else {
            ("-".into(), "-".into())
        };
        println!("| {n} | {sk:.1} | {ring_ns} | {scan_ns} |");
    }
}
