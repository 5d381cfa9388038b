//! Skeleton simulation: build time, lookup speed, depth, fairness and churn.
//!
//! ```text
//! cargo run --release --example skeleton_sim                 # default leaf size
//! cargo run --release --example skeleton_sim -- 8 16 32      # compare leaf sizes
//! cargo run --release --example skeleton_sim -- --quick 16   # sizes up to 100k
//! ```
//!
//! Per node count N (random u64 ids): median build time; owner() time with varying
//! keys, as throughput (independent lookups back to back) and as latency (each key
//! depends on the previous answer), medians over batches; depth; chi-square of the
//! owners of `K` keys against its bound (N-1) + 8*sqrt(2(N-1)); and the fraction of
//! keys whose owner changes when one random node joins or leaves, times N (mean and
//! max over a few trials; flat HRW would give 1.0). Then a weighted table.

use hrw_core::skeleton::{Skeleton, DEFAULT_LEAF_SIZE};
use std::hint::black_box;
use std::time::Instant;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn chi_square(counts: &[u64], keys: u64) -> f64 {
    let expected = keys as f64 / counts.len() as f64;
    counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum()
}

/// Owner ids of `keys` keys (key ids `seed + i`: varied but sequential).
fn owner_ids(sk: &Skeleton, nodes: &[(u64, f64)], keys: u64, seed: u64) -> Vec<u64> {
    (0..keys)
        .map(|i| nodes[sk.owner(seed.wrapping_add(i))].0)
        .collect()
}

fn moved(a: &[u64], b: &[u64]) -> f64 {
    a.iter().zip(b).filter(|(x, y)| x != y).count() as f64 / a.len() as f64
}

fn run(n: usize, leaf: usize, rng: &mut u64) {
    let nodes: Vec<(u64, f64)> = (0..n).map(|_| (splitmix(rng), 1.0)).collect();

    let builds = if n >= 1_000_000 { 3 } else { 9 };
    let mut times = Vec::new();
    let mut sk = Skeleton::build(&nodes, leaf);
    for _ in 0..builds {
        let t = Instant::now();
        sk = black_box(Skeleton::build(black_box(&nodes), leaf));
        times.push(t.elapsed().as_secs_f64());
    }
    let build_ms = median(times) * 1e3;

    // Throughput: independent lookups of varying keys.
    let batch = 4096u64;
    let mut thr = Vec::new();
    let mut lat = Vec::new();
    let mut key = splitmix(rng);
    for _ in 0..41 {
        let t = Instant::now();
        let mut acc = 0usize;
        for i in 0..batch {
            acc = acc.wrapping_add(sk.owner(key.wrapping_add(i.wrapping_mul(0x9e37_79b9))));
        }
        black_box(acc);
        thr.push(t.elapsed().as_secs_f64() * 1e9 / batch as f64);
        key = key.wrapping_add(batch << 32);
        // Latency: the next key depends on the previous owner.
        let t = Instant::now();
        let mut k = key;
        for _ in 0..batch {
            k = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ sk.owner(k) as u64;
        }
        black_box(k);
        lat.push(t.elapsed().as_secs_f64() * 1e9 / batch as f64);
    }

    // Fairness.
    let keys = ((100 * n) as u64).clamp(1_000_000, 10_000_000);
    let mut counts = vec![0u64; n];
    let base = splitmix(rng);
    for i in 0..keys {
        counts[sk.owner(base.wrapping_add(i))] += 1;
    }
    let chi = chi_square(&counts, keys);
    let df = (n - 1) as f64;
    let bound = df + 8.0 * (2.0 * df).sqrt();

    // Churn: K keys, owners compared by id.
    let (trials, mkeys) = match n {
        0..=10_000 => (10, 1_000_000u64),
        10_001..=100_000 => (6, 4_000_000),
        _ => (5, 10_000_000),
    };
    let kseed = splitmix(rng);
    let before = owner_ids(&sk, &nodes, mkeys, kseed);
    let mut adds = Vec::new();
    let mut removes = Vec::new();
    for _ in 0..trials {
        let mut grown = nodes.clone();
        grown.push((splitmix(rng), 1.0));
        let g = Skeleton::build(&grown, leaf);
        adds.push(moved(&before, &owner_ids(&g, &grown, mkeys, kseed)) * n as f64);
        let mut shrunk = nodes.clone();
        shrunk.remove((splitmix(rng) % n as u64) as usize);
        let s = Skeleton::build(&shrunk, leaf);
        removes.push(moved(&before, &owner_ids(&s, &shrunk, mkeys, kseed)) * n as f64);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let max = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    println!(
        "{:>8} {:>4} {:>9.3} {:>7.1} {:>7.1} {:>5} {:>12.0} {:>10.0} {:>6.2} {:>6.2} {:>6.2} {:>6.2}",
        n,
        leaf,
        build_ms,
        median(thr),
        median(lat),
        sk.depth(),
        chi,
        bound,
        mean(&adds),
        max(&adds),
        mean(&removes),
        max(&removes)
    );
}

/// Weighted nodes (weights cycling 1, 2, 3, 10): build, owner() time, chi-square
/// against w/W and the worst relative error of the four weight classes' shares.
fn run_weighted(n: usize, leaf: usize, rng: &mut u64) {
    let ws = [1.0, 2.0, 3.0, 10.0];
    let nodes: Vec<(u64, f64)> = (0..n).map(|i| (splitmix(rng), ws[i % 4])).collect();
    let t = Instant::now();
    let sk = Skeleton::build(&nodes, leaf);
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    let batch = 4096u64;
    let mut thr = Vec::new();
    let mut key = splitmix(rng);
    for _ in 0..41 {
        let t = Instant::now();
        let mut acc = 0usize;
        for i in 0..batch {
            acc = acc.wrapping_add(sk.owner(key.wrapping_add(i.wrapping_mul(0x9e37_79b9))));
        }
        black_box(acc);
        thr.push(t.elapsed().as_secs_f64() * 1e9 / batch as f64);
        key = key.wrapping_add(batch << 32);
    }
    let keys = ((100 * n) as u64).clamp(1_000_000, 10_000_000);
    let mut counts = vec![0u64; n];
    for i in 0..keys {
        counts[sk.owner(key.wrapping_add(i))] += 1;
    }
    let total: f64 = nodes.iter().map(|x| x.1).sum();
    let chi: f64 = counts
        .iter()
        .zip(&nodes)
        .map(|(&c, x)| {
            let e = keys as f64 * x.1 / total;
            (c as f64 - e).powi(2) / e
        })
        .sum();
    let df = (n - 1) as f64;
    let mut worst: f64 = 0.0;
    for (class, &w) in ws.iter().enumerate() {
        let got: u64 = counts.iter().skip(class).step_by(4).sum();
        let expected = w * nodes.iter().skip(class).step_by(4).count() as f64 / total;
        worst = worst.max((got as f64 / keys as f64 - expected).abs() / expected);
    }
    println!(
        "{:>8} {:>4} {:>9.3} {:>7.1} {:>12.0} {:>10.0} {:>9.3}%",
        n,
        leaf,
        build_ms,
        median(thr),
        chi,
        df + 8.0 * (2.0 * df).sqrt(),
        worst * 100.0
    );
}

fn main() {
    let mut quick = false;
    let mut leaves = Vec::new();
    for a in std::env::args().skip(1) {
        if a == "--quick" {
            quick = true;
        } else {
            leaves.push(a.parse::<usize>().expect("leaf sizes are integers"));
        }
    }
    if leaves.is_empty() {
        leaves.push(DEFAULT_LEAF_SIZE);
    }
    let mut sizes = vec![10, 100, 1000, 1023, 1024, 1025, 10_000, 100_000, 1_000_000];
    if quick {
        sizes.retain(|&n| n <= 100_000);
    }
    println!(
        "{:>8} {:>4} {:>9} {:>7} {:>7} {:>5} {:>12} {:>10} {:>6} {:>6} {:>6} {:>6}",
        "N",
        "leaf",
        "build_ms",
        "thr_ns",
        "lat_ns",
        "depth",
        "chi2",
        "bound",
        "add*N",
        "max",
        "rem*N",
        "max"
    );
    for &leaf in &leaves {
        let mut rng = 0x5eed_u64;
        for &n in &sizes {
            run(n, leaf, &mut rng);
        }
    }
    println!();
    println!(
        "weighted (1,2,3,10 cycling)\n{:>8} {:>4} {:>9} {:>7} {:>12} {:>10} {:>10}",
        "N", "leaf", "build_ms", "thr_ns", "chi2", "bound", "class_err"
    );
    for &leaf in &leaves {
        let mut rng = 0x3eed_u64;
        for n in [1000, 10_000, 100_000] {
            run_weighted(n, leaf, &mut rng);
        }
    }
}
