//! Skeleton lookup cost against node count (the aim: a 1M-node lookup within 2x a
//! 10k-node one), and the build time that the layout must not inflate.
//!
//! ```text
//! cargo run --release --example skeleton_layout                    # 10 .. 1M nodes
//! cargo run --release --example skeleton_layout -- 10000 1000000   # chosen sizes
//! ```
//!
//! Per node count N (random u64 ids, unweighted, default leaf size): median build
//! time; `owner()` with random keys as throughput (independent lookups back to back)
//! and as latency (each key depends on the previous answer), medians over 31 batches
//! of 8192, each batch on fresh keys; and `owners_of` (the batched entry point) as
//! throughput. The last column is the throughput relative to the 10k-node figure of
//! the same run (when 10k is among the sizes).

mod common;

use common::{median, splitmix, timed_build};
use hrw_core::skeleton::DEFAULT_LEAF_SIZE;
use std::hint::black_box;
use std::time::Instant;

struct Row {
    n: usize,
    build_ms: f64,
    thr: f64,
    lat: f64,
    batch: f64,
}

fn run(n: usize, rng: &mut u64) -> Row {
    let nodes: Vec<(u64, f64)> = (0..n).map(|_| (splitmix(rng), 1.0)).collect();
    let (sk, build_ms) = timed_build(&nodes, DEFAULT_LEAF_SIZE);

    const BATCH: usize = 8192;
    let mut keys = vec![0u64; BATCH];
    let mut out = vec![0u32; BATCH];
    let (mut thr, mut lat, mut bat) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..31 {
        keys.iter_mut().for_each(|k| *k = splitmix(rng));
        let t = Instant::now();
        let mut acc = 0usize;
        for &k in &keys {
            acc = acc.wrapping_add(sk.owner(k));
        }
        black_box(acc);
        thr.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);

        let t = Instant::now();
        let mut k = splitmix(rng);
        for _ in 0..BATCH {
            k = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ sk.owner(k) as u64;
        }
        black_box(k);
        lat.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);

        keys.iter_mut().for_each(|k| *k = splitmix(rng));
        let t = Instant::now();
        sk.owners_of(black_box(&keys), &mut out);
        black_box(&out);
        bat.push(t.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
    }
    Row {
        n,
        build_ms,
        thr: median(thr),
        lat: median(lat),
        batch: median(bat),
    }
}

fn main() {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = vec![10, 1_000, 10_000, 100_000, 1_000_000];
    }
    let mut rng = 0x5eed_1a70_u64;
    let rows: Vec<Row> = sizes.iter().map(|&n| run(n, &mut rng)).collect();
    let base = rows.iter().find(|r| r.n == 10_000).map(|r| r.thr);
    println!(
        "{:>8} {:>9} {:>9} {:>9} {:>11} {:>8}",
        "nodes", "build ms", "thr ns", "lat ns", "batch ns/k", "thr/10k"
    );
    for r in &rows {
        println!(
            "{:>8} {:>9.3} {:>9.1} {:>9.1} {:>11.1} {:>8}",
            r.n,
            r.build_ms,
            r.thr,
            r.lat,
            r.batch,
            base.map_or("-".into(), |b| format!("{:.2}", r.thr / b))
        );
    }
}
