//! Skeleton simulation: build time, lookup speed, depth, fairness and churn.
//!
//! ```text
//! cargo run --release --example skeleton_sim                 # default leaf size
//! cargo run --release --example skeleton_sim -- 8 16 32      # compare leaf sizes
//! cargo run --release --example skeleton_sim -- --quick 16   # sizes up to 100k
//! cargo run --release --example skeleton_sim -- --v2 [N ...]  # v1 vs the radix-16 candidate
//! ```
//!
//! Per node count N (random u64 ids): median build time; owner() time with varying
//! keys, as throughput (independent lookups back to back) and as latency (each key
//! depends on the previous answer), medians over batches; depth; chi-square of the
//! owners of `K` keys against its bound (N-1) + 8*sqrt(2(N-1)); and the fraction of
//! keys whose owner changes when one random node joins or leaves, times N (mean and
//! max over a few trials; flat HRW would give 1.0). Then a weighted table.
//!
//! `--v2` compares, in one run, this skeleton with a candidate design (module
//! `radix` below; not part of the library) on three namings; see `compare_v2`.

mod common;

use common::{median, splitmix, timed_build};
use hrw_core::skeleton::{Skeleton, DEFAULT_LEAF_SIZE};
use std::hint::black_box;
use std::time::Instant;

/// ns per `owner()` of `batch` independent lookups of keys from `key` on.
fn throughput_ns(sk: &Skeleton, key: u64, batch: u64) -> f64 {
    let t = Instant::now();
    let mut acc = 0usize;
    for i in 0..batch {
        acc = acc.wrapping_add(sk.owner(key.wrapping_add(i.wrapping_mul(0x9e37_79b9))));
    }
    black_box(acc);
    t.elapsed().as_secs_f64() * 1e9 / batch as f64
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

    let (sk, build_ms) = timed_build(&nodes, leaf);

    // Throughput: independent lookups of varying keys.
    let batch = 4096u64;
    let mut thr = Vec::new();
    let mut lat = Vec::new();
    let mut key = splitmix(rng);
    for _ in 0..41 {
        thr.push(throughput_ns(&sk, key, batch));
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
        thr.push(throughput_ns(&sk, key, batch));
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--v2") {
        let sizes: Vec<usize> = args[1..]
            .iter()
            .map(|a| a.parse().expect("sizes"))
            .collect();
        compare_v2(if sizes.is_empty() {
            &[10, 1000, 10_000, 100_000, 1_000_000]
        } else {
            &sizes
        });
        return;
    }
    for a in args {
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

/// A candidate design, measured here and **not adopted** (see `compare_v2`):
/// an aligned radix-16 trie over the routing key `n3::prep(id)`, path-compressed,
/// leaves of at most 16 nodes scanned with N3, where each internal node picks its
/// child by weighted rendezvous among the children (weight = the child's node count:
/// the lowest `docs/HASHING.md` §3 cost wins, so a child that gains a node only gains
/// keys). Unweighted node sets only.
///
/// Where the keys of a subtree share nibbles, *filler* nodes with one child keep the
/// nibble position of depth `l` at `p0 + l`, so a key's draws for every level depend
/// only on the key and `(position, digit)` and are computed off the load chain (as
/// the skeleton's coins are). The draw of digit `d` at position `p` is
/// `n3::tail(seed ^ salt(p, d))`. A pick computes float bounds of every child's cost
/// and takes the exact §3 keys only when a second child's lower bound reaches the
/// best upper bound (`fallbacks`, ~3-6% of keys); the portable and the AVX-512
/// paths do the same IEEE operations, so they give the same owners.
mod radix {
    use hrw_core::weighted::{Standing, Weight};
    use hrw_core::{n3, scan};
    use std::cell::Cell;

    const LEAF: u32 = 1 << 31;
    const STEP: u64 = 0xa076_1d64_78bd_642f;
    const SALT: u64 = 0x736b_656c_6574_6f6e;
    const ULP53: f64 = 1.0 / 9_007_199_254_740_992.0;
    /// Widening of the bounds: covers §3's `c` (within 1.6e-12 of -log2 u) and the
    /// rounding of the few products below.
    const SLACK: f64 = 1e-11;

    /// An internal node: per digit, `1 / count` (`+inf` for an absent digit, never
    /// chosen) and the child (an inner index, or `LEAF | leaf index`).
    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    struct Inner {
        inv: [f64; 16],
        child: [u32; 16],
        count: [u32; 16],
        present: u16,
    }

    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    struct Salts([u64; 16]);

    pub struct Radix {
        inner: Vec<Inner>,
        root: u32,
        p0: u32,
        salts: Vec<Salts>,
        /// Per leaf: offset in `ids`, offset in `index`, node count, scanned width.
        leaves: Vec<(u32, u32, u16, u16)>,
        ids: Vec<u64>,
        index: Vec<u32>,
        simd: bool,
        pub levels: usize,
        pub fallbacks: Cell<u64>,
    }

    /// Float bounds `(lo, up)` of `-log2(u) * inv` for the draw `d` (§3's `u`).
    /// `a = 1 - u` exactly; `-ln u` lies in `[a + a²/2, a + a²/2 + a³/(3(1-a))]`,
    /// and `a³/(3(1-a)) <= 2a³/3` while `a <= 1/2` (past it a huge term).
    #[inline(always)]
    fn bounds(d: u64, inv: f64) -> (f64, f64) {
        let a = ((!d >> 11) as i64 as f64) * ULP53;
        let a2 = a * a;
        let head = a + 0.5 * a2;
        let t = (2.0 / 3.0) * (a2 * a) + if a > 0.5 { 1e30 } else { 0.0 };
        let lo = (head * std::f64::consts::LOG2_E - SLACK).max(0.0) * inv;
        let up = ((head + t) * std::f64::consts::LOG2_E + SLACK) * inv;
        (lo, up)
    }

    impl Radix {
        pub fn build(nodes: &[(u64, f64)], leaf: usize, simd: bool) -> Radix {
            let mut order: Vec<(u64, u32)> = nodes
                .iter()
                .enumerate()
                .map(|(i, &(id, _))| (n3::prep(id), i as u32))
                .collect();
            order.sort_unstable();
            order.dedup_by_key(|x| x.0);
            let salts = (0..16u64)
                .map(|p| {
                    let mut s = [0u64; 16];
                    for (d, x) in s.iter_mut().enumerate() {
                        *x = (p * 16 + d as u64 + 1).wrapping_mul(STEP);
                    }
                    Salts(s)
                })
                .collect();
            let mut r = Radix {
                inner: Vec::with_capacity(order.len() / 8 + 1),
                root: 0,
                p0: 0,
                salts,
                leaves: Vec::with_capacity(order.len() / 2 + 1),
                ids: Vec::with_capacity(order.len() * 4),
                index: Vec::with_capacity(order.len()),
                simd,
                levels: 0,
                fallbacks: Cell::new(0),
            };
            if order.len() > leaf {
                r.p0 = (order[0].0 ^ order[order.len() - 1].0).leading_zeros() / 4;
            }
            r.root = r.sub(nodes, &order, r.p0, leaf, 0);
            r
        }

        fn sub(
            &mut self,
            nodes: &[(u64, f64)],
            o: &[(u64, u32)],
            p: u32,
            leaf: usize,
            depth: usize,
        ) -> u32 {
            if o.len() <= leaf {
                let (off, ioff, m) = (self.ids.len(), self.index.len(), o.len());
                let width = m.max(1).next_multiple_of(8);
                for &(_, i) in o {
                    self.ids.push(n3::linear(nodes[i as usize].0));
                    self.index.push(i);
                }
                let first = self.ids.get(off).copied().unwrap_or(0);
                self.ids.extend(std::iter::repeat_n(first, width - m));
                self.leaves
                    .push((off as u32, ioff as u32, m as u16, width as u16));
                return LEAF | (self.leaves.len() - 1) as u32;
            }
            self.levels = self.levels.max(depth + 1);
            let q = (o[0].0 ^ o[o.len() - 1].0).leading_zeros() / 4;
            let slot = self.inner.len();
            self.inner.push(Inner {
                inv: [f64::INFINITY; 16],
                child: [0; 16],
                count: [0; 16],
                present: 0,
            });
            let shift = 60 - 4 * p;
            let mut lo = 0;
            while lo < o.len() {
                let d = ((o[lo].0 >> shift) & 15) as usize;
                // A filler (q > p) has one child: the whole subtree.
                let hi = if q > p {
                    o.len()
                } else {
                    lo + o[lo..].partition_point(|x| ((x.0 >> shift) & 15) as usize == d)
                };
                let child = self.sub(nodes, &o[lo..hi], p + 1, leaf, depth + 1);
                let e = &mut self.inner[slot];
                e.inv[d] = 1.0 / (hi - lo) as f64;
                e.count[d] = (hi - lo) as u32;
                e.child[d] = child;
                e.present |= 1 << d;
                lo = hi;
            }
            slot as u32
        }

        /// Build-input index of the owner of `key`.
        #[inline]
        pub fn owner(&self, key: u64) -> usize {
            #[cfg(target_arch = "x86_64")]
            if self.simd {
                // SAFETY: `simd` is set only when avx512f and avx512dq were detected.
                return unsafe { self.owner_avx512(key) };
            }
            self.owner_portable(key)
        }

        fn leaf_owner(&self, r: u32, tk: u64) -> usize {
            let (off, ioff, m, width) = self.leaves[(r & !LEAF) as usize];
            if m == 0 {
                return 0;
            }
            let off = off as usize;
            let j = scan::argmax(&self.ids[off..off + width as usize], tk).unwrap_or(0);
            self.index[ioff as usize + j] as usize
        }

        fn owner_portable(&self, key: u64) -> usize {
            let tk = n3::prepared_key(key);
            let seed = n3::score_prepared(tk, n3::linear(SALT));
            let (mut r, mut l) = (self.root, 0);
            while r & LEAF == 0 {
                let e = &self.inner[r as usize];
                let salts = &self.salts[(self.p0 as usize + l).min(15)].0;
                let mut lo = [f64::INFINITY; 16];
                let (mut best, mut b) = (0, f64::INFINITY);
                for d in 0..16 {
                    if e.present & (1 << d) != 0 {
                        let (x, y) = bounds(n3::tail(seed ^ salts[d]), e.inv[d]);
                        lo[d] = x;
                        if y < b {
                            (best, b) = (d, y);
                        }
                    }
                }
                if lo.iter().filter(|&&x| x <= b).count() > 1 {
                    best = self.exact(e, seed, salts);
                }
                r = e.child[best];
                l += 1;
            }
            self.leaf_owner(r, tk)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512dq")]
        fn owner_avx512(&self, key: u64) -> usize {
            use core::arch::x86_64::*;
            let tk = n3::prepared_key(key);
            let seed = n3::score_prepared(tk, n3::linear(SALT));
            let sd = _mm512_set1_epi64(seed as i64);
            let inf = _mm512_set1_pd(f64::INFINITY);
            // The bounds before the weight (the `inv` factor) of level `l`'s 16 draws.
            let draws = |l: usize| {
                let salts = &self.salts[(self.p0 as usize + l).min(15)].0;
                let mut out = [_mm512_setzero_pd(); 4];
                for h in 0..2 {
                    // SAFETY: `Salts` is 64-byte aligned and holds 16 words.
                    let salt = unsafe { _mm512_load_si512(salts.as_ptr().add(8 * h).cast()) };
                    let d = tail(_mm512_xor_si512(sd, salt));
                    let na = _mm512_srli_epi64::<11>(_mm512_xor_si512(d, _mm512_set1_epi64(-1)));
                    let a = _mm512_mul_pd(_mm512_cvtepu64_pd(na), _mm512_set1_pd(ULP53));
                    let a2 = _mm512_mul_pd(a, a);
                    let head = _mm512_add_pd(a, _mm512_mul_pd(_mm512_set1_pd(0.5), a2));
                    let over = _mm512_cmp_pd_mask::<_CMP_GT_OQ>(a, _mm512_set1_pd(0.5));
                    let t = _mm512_add_pd(
                        _mm512_mul_pd(_mm512_set1_pd(2.0 / 3.0), _mm512_mul_pd(a2, a)),
                        _mm512_maskz_mov_pd(over, _mm512_set1_pd(1e30)),
                    );
                    let log2e = _mm512_set1_pd(std::f64::consts::LOG2_E);
                    let slack = _mm512_set1_pd(SLACK);
                    out[h] = _mm512_max_pd(
                        _mm512_sub_pd(_mm512_mul_pd(head, log2e), slack),
                        _mm512_setzero_pd(),
                    );
                    out[2 + h] = _mm512_add_pd(_mm512_mul_pd(_mm512_add_pd(head, t), log2e), slack);
                }
                out
            };
            let (mut r, mut l) = (self.root, 0);
            while r & LEAF == 0 {
                let pl = draws(l);
                let e = &self.inner[r as usize];
                // SAFETY: `Inner` is 64-byte aligned; `inv` holds 16 f64.
                let (i0, i1) = unsafe {
                    (
                        _mm512_load_pd(e.inv.as_ptr()),
                        _mm512_load_pd(e.inv.as_ptr().add(8)),
                    )
                };
                let (m0, m1) = (e.present as u8, (e.present >> 8) as u8);
                let u0 = _mm512_mask_mul_pd(inf, m0, pl[2], i0);
                let u1 = _mm512_mask_mul_pd(inf, m1, pl[3], i1);
                let b = _mm512_reduce_min_pd(_mm512_min_pd(u0, u1));
                let bv = _mm512_set1_pd(b);
                let eq = u32::from(_mm512_cmp_pd_mask::<_CMP_EQ_OQ>(u0, bv))
                    | u32::from(_mm512_cmp_pd_mask::<_CMP_EQ_OQ>(u1, bv)) << 8;
                let l0 = _mm512_mask_mul_pd(inf, m0, pl[0], i0);
                let l1 = _mm512_mask_mul_pd(inf, m1, pl[1], i1);
                let close = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(l0, bv).count_ones()
                    + _mm512_cmp_pd_mask::<_CMP_LE_OQ>(l1, bv).count_ones();
                let mut best = eq.trailing_zeros() as usize;
                if close > 1 {
                    best = self.exact(e, seed, &self.salts[(self.p0 as usize + l).min(15)].0);
                }
                r = e.child[best];
                l += 1;
            }
            self.leaf_owner(r, tk)
        }

        /// The child with the lowest exact §3 cost key (weight = its node count).
        #[cold]
        fn exact(&self, e: &Inner, seed: u64, salts: &[u64; 16]) -> usize {
            self.fallbacks.set(self.fallbacks.get() + 1);
            (0..16)
                .filter(|&d| e.present & (1 << d) != 0)
                .min_by_key(|&d| {
                    let w = Weight::new(f64::from(e.count[d]));
                    Standing::new(n3::tail(seed ^ salts[d]), w).rank()
                })
                .unwrap_or(0)
        }
    }

    /// `n3::tail` on eight lanes.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn tail(x: core::arch::x86_64::__m512i) -> core::arch::x86_64::__m512i {
        use core::arch::x86_64::*;
        let m = |c: u64| _mm512_set1_epi64(c as i64);
        let x = _mm512_mullo_epi64(x, m(0x2cb0_f69f_4abe_a221));
        let x = _mm512_xor_si512(x, _mm512_srli_epi64::<27>(x));
        let x = _mm512_rol_epi64::<23>(x);
        let x = _mm512_mullo_epi64(x, m(0xb19e_04cb_9dce_3147));
        let x = _mm512_xor_si512(x, _mm512_srli_epi64::<31>(x));
        let x = _mm512_mullo_epi64(x, m(0xbf58_476d_1ce4_e5b9));
        _mm512_xor_si512(x, _mm512_srli_epi64::<33>(x))
    }
}

/// The designs `--v2` compares.
enum Design {
    V1(Skeleton),
    Radix(radix::Radix),
}

impl Design {
    fn build(which: usize, nodes: &[(u64, f64)]) -> Design {
        match which {
            0 => Design::V1(Skeleton::build(nodes, DEFAULT_LEAF_SIZE)),
            1 => Design::Radix(radix::Radix::build(nodes, 16, false)),
            _ => Design::Radix(radix::Radix::build(nodes, 16, simd_available())),
        }
    }

    #[inline]
    fn owner(&self, key: u64) -> usize {
        match self {
            Design::V1(s) => s.owner(key),
            Design::Radix(r) => r.owner(key),
        }
    }
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Node id number `i` of a naming (some draw from the generator).
type Naming = fn(usize, &mut u64) -> u64;

/// `--v2 [sizes]`: today's skeleton (v1) against the radix-16 candidate (portable and,
/// where the CPU has it, AVX-512 picks), in one run, same harness, on three namings:
/// UUID-like random ids, sequential integers, and `xxh3("node-<i>")`. Per row: median
/// build, lookup throughput and latency (batches of the designs interleaved), their
/// ratios to v1, chi-square of the owners of K keys against its bound, and the keys
/// moved by one join and one leave (× N; mean and max over the trials; the joining
/// names and leaving nodes are the same for both designs).
fn compare_v2(sizes: &[usize]) {
    let simd = simd_available();
    let namings: [(&str, Naming); 3] = [
        ("uuid", |_, rng| splitmix(rng)),
        ("seq", |i, _| i as u64),
        ("node-i", |i, _| {
            xxhash_rust::xxh3::xxh3_64(format!("node-{i}").as_bytes())
        }),
    ];
    let names = [
        "v1",
        "radix-portable",
        if simd {
            "radix-avx512"
        } else {
            "radix (no avx512)"
        },
    ];
    println!(
        "{:>8} {:>6} {:>17} | {:>8} {:>5} {:>6} {:>5} {:>6} {:>5} | {:>8} {:>8} {:>5} {:>5} {:>5} {:>5} | {:>4} {:>6}",
        "N", "naming", "design", "build_ms", "ratio", "thr_ns", "ratio", "lat_ns", "ratio",
        "chi2", "bound", "join", "max", "leave", "max", "lvls", "exact%"
    );
    for &n in sizes {
        for (name, f) in namings.iter() {
            let mut rng = 0x5eed_u64 ^ n as u64;
            let nodes: Vec<(u64, f64)> = (0..n).map(|i| (f(i, &mut rng), 1.0)).collect();
            let builds = if n >= 1_000_000 { 3 } else { 7 };
            let mut bt = [Vec::new(), Vec::new(), Vec::new()];
            let mut ds: Vec<Design> = (0..3).map(|w| Design::build(w, &nodes)).collect();
            for _ in 0..builds {
                for (w, d) in ds.iter_mut().enumerate() {
                    let t = Instant::now();
                    *d = black_box(Design::build(w, black_box(&nodes)));
                    bt[w].push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            // The two radix picks must agree.
            for i in 0..20_000u64 {
                let k = i.wrapping_mul(0x2545_f491_4f6c_dd1d);
                assert_eq!(ds[1].owner(k), ds[2].owner(k), "portable vs SIMD, key {k}");
            }
            let batch = 4096u64;
            let (mut thr, mut lat) = (
                [Vec::new(), Vec::new(), Vec::new()],
                [Vec::new(), Vec::new(), Vec::new()],
            );
            let mut key = splitmix(&mut rng);
            for _ in 0..31 {
                for (w, d) in ds.iter().enumerate() {
                    let t = Instant::now();
                    let mut acc = 0usize;
                    for i in 0..batch {
                        acc = acc
                            .wrapping_add(d.owner(key.wrapping_add(i.wrapping_mul(0x9e37_79b9))));
                    }
                    black_box(acc);
                    thr[w].push(t.elapsed().as_secs_f64() * 1e9 / batch as f64);
                    let t = Instant::now();
                    let mut k = key;
                    for _ in 0..batch {
                        k = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ d.owner(k) as u64;
                    }
                    black_box(k);
                    lat[w].push(t.elapsed().as_secs_f64() * 1e9 / batch as f64);
                }
                key = key.wrapping_add(batch << 32);
            }
            let bm: Vec<f64> = bt.into_iter().map(median).collect();
            let th: Vec<f64> = thr.into_iter().map(median).collect();
            let la: Vec<f64> = lat.into_iter().map(median).collect();
            let keys = ((100 * n) as u64).clamp(1_000_000, 10_000_000);
            let (trials, mkeys) = match n {
                0..=10_000 => (8, 1_000_000u64),
                10_001..=100_000 => (6, 3_000_000),
                _ => (4, 6_000_000),
            };
            let df = (n.max(2) - 1) as f64;
            let bound = df + 8.0 * (2.0 * df).sqrt();
            let base = splitmix(&mut rng);
            let kseed = splitmix(&mut rng);
            let joins: Vec<u64> = (0..trials).map(|t| f(n + 1000 + t, &mut rng)).collect();
            let gone: Vec<usize> = (0..trials)
                .map(|_| (splitmix(&mut rng) % n as u64) as usize)
                .collect();
            for w in 0..3 {
                let (mut chi, mut js, mut ls, mut fb) = (None, Vec::new(), Vec::new(), None);
                if w != 1 {
                    if let Design::Radix(r) = &ds[w] {
                        r.fallbacks.set(0);
                    }
                    let mut counts = vec![0u64; n];
                    for i in 0..keys {
                        counts[ds[w].owner(base.wrapping_add(i))] += 1;
                    }
                    chi = Some(if n > 1 {
                        chi_square(&counts, keys)
                    } else {
                        0.0
                    });
                    if let Design::Radix(r) = &ds[w] {
                        fb = Some(r.fallbacks.get() as f64 / keys as f64 * 100.0);
                    }
                    let ids = |nodes: &[(u64, f64)]| -> Vec<u64> {
                        let d = Design::build(w, nodes);
                        (0..mkeys)
                            .map(|i| nodes[d.owner(kseed.wrapping_add(i))].0)
                            .collect()
                    };
                    if n > 16 {
                        let before = ids(&nodes);
                        for t in 0..trials {
                            let mut grown = nodes.clone();
                            grown.push((joins[t], 1.0));
                            js.push(moved(&before, &ids(&grown)) * n as f64);
                            let mut shrunk = nodes.clone();
                            shrunk.remove(gone[t]);
                            ls.push(moved(&before, &ids(&shrunk)) * n as f64);
                        }
                    }
                }
                // "-" where not measured (the portable pick gives the SIMD one's owners).
                let cell = |x: Option<f64>, prec: usize| {
                    x.map_or("-".to_string(), |x| format!("{x:.prec$}"))
                };
                let mean =
                    |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
                let max =
                    |v: &[f64]| (!v.is_empty()).then(|| v.iter().cloned().fold(0.0, f64::max));
                let lv = match &ds[w] {
                    Design::V1(s) => s.depth(),
                    Design::Radix(r) => r.levels,
                };
                println!(
                    "{:>8} {:>6} {:>17} | {:>8.3} {:>5.2} {:>6.1} {:>5.2} {:>6.1} {:>5.2} | {:>8} {:>8.0} {:>5} {:>5} {:>5} {:>5} | {:>4} {:>6}",
                    n, name, names[w], bm[w], bm[w] / bm[0], th[w], th[w] / th[0], la[w], la[w] / la[0],
                    cell(chi, 0), bound, cell(mean(&js), 2), cell(max(&js), 2), cell(mean(&ls), 2), cell(max(&ls), 2),
                    lv, cell(fb, 2)
                );
            }
        }
    }
}
