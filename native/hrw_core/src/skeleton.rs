//! Skeleton: O(log n) rendezvous hashing that stays fair and stable under churn.
//!
//! # Shape
//!
//! Every node gets a *routing key* `r = n3::prep(id)`, a fixed bijection of its id
//! whose top bits spread sequential ids (and `i << 32` ids) evenly. The nodes sit in a
//! binary trie over `r`, highest bit first:
//!
//! * a subtree with at most `leaf_size` nodes is a **leaf**: its nodes are scanned
//!   exactly, with plain N3 HRW (argmax of `n3::score(n3::prep(key), id)`) or, when
//!   weights differ, with [`crate::weighted::Standing`] (lowest cost wins);
//! * a larger subtree splits on the first bit where its routing keys differ (levels
//!   where every node goes one way are skipped, so no child is ever empty). That bit
//!   position `b` (0 = most significant) is the internal node's only identity.
//!
//! The trie is a function of the *set* of routing keys: input order never matters,
//! and no cluster is formed from sorted positions, so one node joining or leaving
//! changes only the internal nodes on its own path (and at most one leaf split or
//! merge). Duplicated ids count once: the first occurrence's index with the largest
//! of their weights (as `nodes::distinct`, and independent of input order).
//!
//! # Descent
//!
//! At an internal node with child weight sums `wl`, `wr` (node counts when unweighted)
//! a key goes left iff its coin `d < t`, `t = floor(2^64 * (wl / (wl + wr)))` (one f64
//! division, an exact scaling by 2^64, a truncating cast: IEEE basic operations only,
//! so bit-identical everywhere). A node therefore wins with probability `w / W`, up
//! to f64 rounding of the ratios (about 2^-53 per level).
//!
//! The coin depends on the key and on the node's **bit position** `b` only:
//!
//! ```text
//! seed    = n3::score(n3::prep(key), SEED_SALT)          // one full N3 score per key
//! x       = seed + (b + 1) * 0xa0761d6478bd642f          // mod 2^64
//! coin(b) = hi64(x * (x ^ 0xe7037ed1a0b428db)) ^ lo64(x * (x ^ 0xe7037ed1a0b428db))
//! ```
//!
//! (wyrand's output function over a per-key counter). A path visits each bit position
//! at most once, so the coins along any path are independent, which is all fairness
//! needs. Tying the coin to the bit position (not to an array slot, nor to the depth
//! in the compressed trie) means a node appearing or leaving elsewhere never changes
//! anyone's coins, and lets a lookup compute its coins before it has loaded the trie
//! nodes they are compared with. One N3 score per internal level instead (the
//! literal "score(prep(key), node salt)" per node) measured 2x slower: 99 vs 44 ns at
//! 10k nodes.
//!
//! # Layout
//!
//! Trie slots are 16 bytes in breadth-first order, children side by side. Where a
//! level is skipped the trie holds a *filler* node whose two children are one
//! subtree, so the bit positions along every path are consecutive; a leaf is its own
//! right child. The descent is then a fixed number of branch-free steps (load,
//! compare, load). Each leaf's node data sits in one block: prepared ids (padded to a
//! multiple of 8 for the SIMD scans, see `scan_width`), weights when weighted, build
//! indices. None of this changes a placement.
//!
//! # Churn
//!
//! Adding a node moves, at each internal node on its path, the keys whose coin falls
//! between the old and the new threshold (about 1/(2N) of all keys per level), the
//! keys it wins in its leaf (about 1/N), and, when its leaf overflows and splits,
//! about half of that leaf's keys. Removing is symmetric. Measured with leaf_size 16
//! (keys moved, times N; flat HRW gives 1): ~4.5 mean / ~11 max near 1000 nodes, ~6
//! mean / ~13 max near 10k, ~11 mean / ~15 max at 1M; never a reshuffle, at any N
//! (`examples/skeleton_sim.rs`, tests `churn_*`).
//!
//! # Replicas
//!
//! [`Skeleton::owners`] draws ranks one after another: rank `i` descends with its own
//! seed (`n3::score(n3::prep(key), rank_salt(i))`, rank 0 being the owner's), with the
//! nodes already picked taken out of every weight sum (and count) on the way and
//! skipped in the leaf. The result is a sample without replacement in proportion to
//! weight, like flat HRW's top-k, and the replicas of one node's keys spread over the
//! whole cluster instead of its leaf.

use crate::n3;
use crate::scan;
use crate::weighted::{uniform_numerator, Standing, Weight};
use crate::work;

/// Default leaf size, chosen with `examples/skeleton_sim.rs` against 8 and 32: as
/// fast as 8 up to 10k nodes and faster above; 32 is faster still at 100k+ but a
/// leaf split or merge of 33 nodes moves up to ~24/N of the keys (16: ~15/N).
pub const DEFAULT_LEAF_SIZE: usize = 16;

/// Salt of the owner's coin seed: `seed = n3::score(n3::prep(key), SEED_SALT)`.
pub const SEED_SALT: u64 = 0x736b_656c_6574_6f6e; // "skeleton"
/// Step of the per-key coin counter (wyrand's increment).
const COIN_STEP: u64 = 0xa076_1d64_78bd_642f;
/// Second multiplicand's mask in the coin (wyrand's).
const COIN_XOR: u64 = 0xe703_7ed1_a0b4_28db;
/// Flag of a leaf entry (in `Entry::b`).
const LEAF: u64 = 1 << 63;

/// The salt of rank `rank`'s coin seed in [`Skeleton::owners`]; rank 0 is the owner's.
pub const fn rank_salt(rank: u64) -> u64 {
    SEED_SALT ^ rank.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// `n3::linear(SEED_SALT)`, so the owner's seed costs one `n3::tail`.
const SEED_SALT_LINEAR: u64 = SEED_SALT ^ SEED_SALT.rotate_left(17) ^ SEED_SALT.rotate_left(43);

/// The coin of a key (through its `seed`) at the internal node splitting on bit `bit`.
#[inline(always)]
pub fn coin(seed: u64, bit: u32) -> u64 {
    let x = seed.wrapping_add(u64::from(bit + 1).wrapping_mul(COIN_STEP));
    let t = u128::from(x) * u128::from(x ^ COIN_XOR);
    (t >> 64) as u64 ^ t as u64
}

/// Coin seed of rank `rank` for the prepared key `tk = n3::prepared_key(key)`.
#[inline(always)]
fn seed_of(tk: u64, rank: u64) -> u64 {
    if rank == 0 {
        n3::score_prepared(tk, SEED_SALT_LINEAR)
    } else {
        n3::score_prepared(tk, n3::linear(rank_salt(rank)))
    }
}

/// `floor(2^64 * wl / (wl + wr))`, saturating at `u64::MAX` (IEEE basic operations).
#[inline]
pub fn threshold(wl: f64, wr: f64) -> u64 {
    let p = wl / (wl + wr);
    // Scaling by 2^64 is exact; the cast truncates and saturates (NaN gives 0).
    (p * 18_446_744_073_709_551_616.0) as u64
}

/// How many ids an unweighted leaf of `m` nodes scans (`m` plus padding). With a
/// SIMD scan backend, leaves of the usual sizes are padded to one fixed multiple of
/// 8 lanes: no scalar remainder, and the same trip count on every lookup (measured
/// 58 -> 44 ns per owner at 10k nodes with AVX-512). The portable scan gains
/// nothing from it, so it scans exactly `m`. Placements never depend on this.
fn scan_width(m: usize, leaf_size: usize) -> usize {
    if m == 0 || leaf_size < 8 || scan::Backend::detect() == scan::Backend::Portable {
        m
    } else if leaf_size <= 32 {
        leaf_size.next_multiple_of(8)
    } else {
        m.next_multiple_of(8)
    }
}

/// A trie slot, 16 bytes. Internal: `a` = threshold, `b` = first child | bit << 32
/// (children are adjacent: left at `first`, right at `first + 1`). Leaf: `a` = offset
/// of its block in `Skeleton::blocks` | padding << 48, `b` = `LEAF` | node count << 32
/// | (own slot - 1), so that "go right" stays on the leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    a: u64,
    b: u64,
}

impl Entry {
    #[inline(always)]
    fn is_leaf(self) -> bool {
        self.b & LEAF != 0
    }
    #[inline(always)]
    fn bit(self) -> u32 {
        (self.b >> 32) as u32
    }
    #[inline(always)]
    fn first(self) -> usize {
        self.b as u32 as usize
    }
    /// A leaf's block offset, node count and padded id count (see `Skeleton::blocks`).
    #[inline(always)]
    fn block(self) -> (usize, usize, usize) {
        let m = ((self.b >> 32) & 0x7fff_ffff) as usize;
        let off = (self.a & ((1 << 48) - 1)) as usize;
        (off, m, m + (self.a >> 48) as usize)
    }
}

/// An immutable skeleton over `(id, weight)` nodes; see the module docs.
#[derive(Clone, Debug)]
pub struct Skeleton {
    /// Trie slots in breadth-first order (the top levels share cache lines); the
    /// root is slot 0.
    entries: Vec<Entry>,
    /// Bit position of the root when internal (the descent's first coin).
    root_bit: u32,
    /// Descent steps: the deepest leaf's distance from the root, fillers included.
    levels: u32,
    /// One block per leaf of `m` nodes, sorted by routing key: `m` words of
    /// `n3::linear(id)` (unweighted: padded with copies of the first, see
    /// [`scan_width`]), then (weighted only) `m` words of weight bits and `m` of
    /// their reciprocals' bits, then the nodes' indices into the build input, two
    /// u32 per word. One place per leaf keeps a lookup's last accesses together.
    blocks: Vec<u64>,
    /// Per slot (cold, for `owners`): the range of sorted positions it covers.
    span: Vec<[u32; 2]>,
    /// Per slot (cold, for `owners`): its weight sum (its node count when unweighted).
    mass: Vec<f64>,
    /// Per sorted position (cold, for `owners`; empty when unweighted): the weight.
    weights: Vec<f64>,
    weighted: bool,
    len: usize,
    depth: usize,
    /// Most nodes in a leaf, and most ids a leaf scan reads (padding included): what
    /// bounds a lookup's work.
    max_leaf: usize,
    max_width: usize,
}

impl Skeleton {
    /// Builds the skeleton over `(id, weight)` nodes with leaves of at most
    /// `leaf_size` nodes (taken within `1..2^31`).
    ///
    /// Preconditions (the caller validates): weights finite and > 0, fewer than 2^32
    /// nodes. Duplicated ids count once, with the first occurrence's index and the
    /// largest of their weights (the rule of `nodes::distinct`).
    /// When every distinct node has the same weight the skeleton is
    /// unweighted: plain N3 HRW in leaves, node counts in thresholds. Placements are
    /// identical to a weighted build with equal weights, only faster.
    pub fn build(nodes: &[(u64, f64)], leaf_size: usize) -> Skeleton {
        assert!(
            nodes.len() <= u32::MAX as usize,
            "a skeleton holds fewer than 2^32 nodes"
        );
        let leaf_size = leaf_size.clamp(1, (1 << 31) - 1);
        work::count(Skeleton::build_cost(nodes.len()));
        let mut order: Vec<(u64, u32)> = nodes
            .iter()
            .enumerate()
            .map(|(i, &(id, _))| (n3::prep(id), i as u32))
            .collect();
        // Equal routing keys mean equal ids: sorting by (route, index) puts each id's
        // first occurrence first in its run.
        order.sort_unstable();
        let mut routes: Vec<u64> = Vec::with_capacity(order.len());
        let mut index: Vec<u32> = Vec::with_capacity(order.len());
        let mut weights: Vec<f64> = Vec::with_capacity(order.len());
        for &(route, i) in &order {
            let w = nodes[i as usize].1;
            if routes.last() == Some(&route) {
                // A repeated id keeps its largest weight (as `nodes::distinct` does):
                // unlike the first weight, that does not depend on input order.
                let last = weights.len() - 1;
                if w > weights[last] {
                    weights[last] = w;
                }
            } else {
                routes.push(route);
                index.push(i);
                weights.push(w);
            }
        }
        drop(order);
        let n = routes.len();
        let weighted = !weights.windows(2).all(|w| w[0] == w[1]);

        // Breadth-first: a slot's children are allocated, side by side, when it is
        // reached, so slots deeper in the trie come later in `entries`.
        let slots = 2 * n / leaf_size + 1;
        let mut entries: Vec<Entry> = Vec::with_capacity(slots);
        let mut span: Vec<[u32; 2]> = Vec::with_capacity(slots);
        // Per slot: the bit position its coin uses, and its real (non-filler) depth.
        let mut pos: Vec<u32> = Vec::with_capacity(slots);
        let mut real: Vec<u32> = Vec::with_capacity(slots);
        // Slots that mirror the slot before them (the second child of a filler).
        let mut mirrors: Vec<usize> = Vec::new();
        let mut blocks: Vec<u64> = Vec::with_capacity(n * (2 + usize::from(weighted)) / 2 + slots);
        entries.push(Entry { a: 0, b: LEAF });
        span.push([0, n as u32]);
        let root_bit = if n > leaf_size {
            (routes[0] ^ routes[n - 1]).leading_zeros()
        } else {
            0
        };
        pos.push(root_bit);
        real.push(0);
        let (mut depth, mut levels) = (0, 0);
        let (mut max_leaf, mut max_width) = (0, 0);
        let mut slot = 0;
        while slot < entries.len() {
            if mirrors.last() == Some(&slot) {
                slot += 1;
                continue;
            }
            let [lo, hi] = span[slot].map(|x| x as usize);
            if hi - lo <= leaf_size {
                let m = hi - lo;
                let width = if weighted {
                    m
                } else {
                    scan_width(m, leaf_size)
                };
                max_leaf = max_leaf.max(m);
                max_width = max_width.max(width);
                // A leaf is its own right child (threshold 0, children at slot - 1
                // and slot), so a fixed number of descent steps ends on it.
                entries[slot] = Entry {
                    a: blocks.len() as u64 | ((width - m) as u64) << 48,
                    b: LEAF | (m as u64) << 32 | slot.saturating_sub(1) as u64,
                };
                blocks.extend(
                    index[lo..hi]
                        .iter()
                        .map(|&i| n3::linear(nodes[i as usize].0)),
                );
                let pad = blocks.get(blocks.len().wrapping_sub(m)).copied();
                blocks.extend(pad.into_iter().cycle().take(width - m));
                if weighted {
                    let split: Vec<Weight> =
                        weights[lo..hi].iter().map(|&w| Weight::new(w)).collect();
                    blocks.extend(split.iter().map(Weight::pack));
                    // For the leaf bounds (`weighted_pick`): 2^(E - e) / m, with E the
                    // leaf's largest weight exponent: every cost scaled by the same
                    // 2^E, so bounds compare as floats (infinite for the very lightest
                    // nodes, which is still a valid bound).
                    let top = split.iter().map(|w| w.shift).min().unwrap_or(0) >> 52;
                    blocks.extend(split.iter().map(|w| {
                        let k = ((w.shift >> 52) - top) as i32;
                        ((1.0 / w.m) * 2f64.powi(k / 2) * 2f64.powi(k - k / 2)).to_bits()
                    }));
                }
                blocks.extend(
                    index[lo..hi]
                        .chunks(2)
                        .map(|c| u64::from(c[0]) | c.get(1).map_or(0, |&x| u64::from(x) << 32)),
                );
                depth = depth.max(real[slot] as usize);
                levels = levels.max(pos[slot] - root_bit);
            } else {
                // Routing keys are distinct and sorted, so the first bit where the
                // lowest and highest differ is where this subtree splits (skipped
                // levels are the bits they all share) and both sides are non-empty.
                // A skipped level gets a filler node whose two children are one
                // subtree (the second slot mirrors the first), so every path uses
                // consecutive bit positions.
                let bit = (routes[lo] ^ routes[hi - 1]).leading_zeros();
                let mask = 1u64 << (63 - bit);
                let filler = bit != pos[slot];
                let mid = if filler {
                    hi
                } else {
                    lo + routes[lo..hi].partition_point(|&r| r & mask == 0)
                };
                let first = entries.len();
                entries[slot] = Entry {
                    a: 0,
                    b: first as u64 | u64::from(pos[slot]) << 32,
                };
                let children = if filler {
                    [[lo, hi], [lo, hi]]
                } else {
                    [[lo, mid], [mid, hi]]
                };
                for range in children {
                    entries.push(Entry { a: 0, b: LEAF });
                    span.push(range.map(|x| x as u32));
                    pos.push(pos[slot] + 1);
                    real.push(real[slot] + u32::from(!filler));
                }
                if filler {
                    mirrors.push(first + 1);
                }
            }
            slot += 1;
        }

        // Masses bottom-up (children come after their parent), then thresholds.
        let mut mass = vec![0.0f64; entries.len()];
        for slot in (0..entries.len()).rev() {
            if mirrors.binary_search(&slot).is_ok() {
                continue; // copied from its twin below
            }
            let e = entries[slot];
            if e.is_leaf() {
                let [lo, hi] = span[slot].map(|x| x as usize);
                // In routing-key order, from 0.0 (docs/HASHING.md §4).
                mass[slot] = if weighted {
                    weights[lo..hi].iter().fold(0.0, |sum, &w| sum + w)
                } else {
                    (hi - lo) as f64
                };
            } else if span[e.first()] == span[e.first() + 1] {
                mass[slot] = mass[e.first()]; // a filler: any threshold does
            } else {
                let (wl, wr) = (mass[e.first()], mass[e.first() + 1]);
                mass[slot] = wl + wr;
                entries[slot].a = threshold(wl, wr);
            }
        }
        for &m in &mirrors {
            entries[m] = entries[m - 1];
            mass[m] = mass[m - 1];
        }
        Skeleton {
            entries,
            root_bit,
            levels,
            blocks,
            span,
            mass,
            weights: if weighted { weights } else { Vec::new() },
            weighted,
            len: n,
            depth,
            max_leaf,
            max_width,
        }
    }

    /// Work units (see [`crate::work`]) of [`Skeleton::build`] over `n` input nodes,
    /// an upper bound: the sort by routing key, then a bounded amount of work per node
    /// (routing key, trie slots, masses, leaf blocks; fewer than `2n + 1` slots).
    pub const fn build_cost(n: usize) -> u64 {
        work::sort(n) + 24 * work::ELEMENT * n as u64 + 16 * work::ELEMENT
    }

    /// Work units of one leaf pick over at most `max_leaf` nodes, each membership test
    /// of the taken set costing `per_taken` (0 when nothing is taken).
    fn pick_cost(&self, per_taken: u64) -> u64 {
        if self.weighted {
            // Per node: its bounds (three times at most), one exact cost, two
            // membership tests; plus the first candidate's bounds and exact cost.
            self.max_leaf as u64 * (6 * work::SCORE + work::WEIGHTED_SCORE + 2 * per_taken)
                + 2 * work::SCORE
                + work::WEIGHTED_SCORE
        } else {
            self.max_leaf as u64 * (work::SCORE + per_taken)
        }
    }

    /// Work units of one [`Skeleton::owner`], an upper bound: every level of the
    /// descent and the widest leaf.
    pub fn owner_cost(&self) -> u64 {
        let leaf = if self.weighted {
            self.pick_cost(0)
        } else {
            self.max_width as u64 * work::SCORE
        };
        work::LEVEL * u64::from(self.levels) + leaf
    }

    /// Work units of one [`Skeleton::owners`] with `count` ranks, an upper bound: per
    /// rank a path of at most `levels + 1` slots, each asking the taken set twice,
    /// and a leaf pick that skips the taken nodes.
    pub fn owners_cost(&self, count: usize) -> u64 {
        let c = count.min(self.len) as u64;
        let dense = c as usize >= Taken::DENSE_FROM;
        let per_taken = work::ELEMENT * if dense { 1 } else { c.max(1) };
        let setup = work::ELEMENT * c
            + if dense {
                work::ELEMENT * (self.entries.len() + self.len) as u64
            } else {
                0
            };
        let path = u64::from(self.levels) + 1;
        let per_rank = path * (work::LEVEL + 3 * per_taken) + self.pick_cost(per_taken);
        setup + c * per_rank
    }

    /// Number of distinct nodes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the skeleton has no node.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Largest number of internal nodes on a root-to-leaf path (0 for a single leaf).
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Whether weights differ (weighted leaf scans and weight-sum thresholds).
    pub fn is_weighted(&self) -> bool {
        self.weighted
    }

    /// Index (into the `nodes` given to [`Skeleton::build`], first occurrence of a
    /// duplicated id) of the owner of the key with u64 id `key`. Never panics; a
    /// skeleton built from no nodes answers 0, which names nothing.
    #[inline]
    pub fn owner(&self, key: u64) -> usize {
        let tk = n3::prepared_key(key);
        let leaf = self.descend(n3::score_prepared(tk, SEED_SALT_LINEAR));
        let (off, m, width) = leaf.block();
        if m == 0 {
            return 0;
        }
        let j = if self.weighted {
            self.weighted_pick(off, m, tk, |_| false)
        } else {
            // Padding repeats the first id: equal scores, and the scan keeps the
            // first index of the maximum, so `j < m`.
            scan::argmax(&self.blocks[off..off + width], tk).unwrap_or(0)
        };
        self.leaf_index(off, m, width, j)
    }

    /// The leaf entry the owner's coins lead to.
    #[inline(always)]
    fn descend(&self, seed: u64) -> Entry {
        let entries = self.entries.as_slice();
        let mut e = entries[0];
        work::count(work::LEVEL * u64::from(self.levels));
        // A fixed number of steps: a leaf is its own right child, so a path that
        // ends early stays put, and the loop's exit is always predicted. The coin of
        // a step depends only on the step's bit position (consecutive along every
        // path, thanks to fillers), so it is computed off the load -> compare ->
        // load chain.
        for bit in self.root_bit..self.root_bit + self.levels {
            let right = coin(seed, bit) >= e.a || e.is_leaf();
            e = entries[e.first() + usize::from(right)];
        }
        e
    }

    /// Build-input index of node `j` of the leaf block at `off` with `m` nodes
    /// (`width` ids with the padding).
    #[inline(always)]
    fn leaf_index(&self, off: usize, m: usize, width: usize, j: usize) -> usize {
        let base = off + if self.weighted { 3 * m } else { width };
        (self.blocks[base + j / 2] >> (32 * (j & 1))) as u32 as usize
    }

    /// Position in its leaf of the weighted winner of the leaf block at `off` with
    /// `m > 0` nodes, leaving out the positions `j` for which `skip(j)` holds (at
    /// least one must stay); exactly `weighted::argmin` over the nodes it keeps.
    ///
    /// The logarithm is the expensive part (~40 ns of latency), so it is taken only
    /// between nodes that can still win. With `a = 1 - u` (exact in f64),
    /// `-ln(u) = a + a^2/2 + a^3/3 + ...` lies in `[a + a^2/2, a + a^2/2 +
    /// a^3 / (3 (1 - a))]`; times `log2(e)` that bounds `-log2(u)`, which the computed
    /// cost `c` (weighted.rs) matches within 1.6e-12. Each bound is widened by 1e-11,
    /// which also covers the ~2^-52 relative error of multiplying by `1/m` instead
    /// of dividing by `m`. Bounds are costs times 2^E (E the leaf's largest weight
    /// exponent; an exact scaling, or infinity), so a node whose lower bound exceeds
    /// the smallest upper bound has a larger exact cost key than that node: it cannot
    /// win. Usually one node is left and no logarithm is taken at all; the exact
    /// comparison uses the integer cost keys of docs/HASHING.md §3.
    fn weighted_pick(&self, off: usize, m: usize, tk: u64, skip: impl Fn(usize) -> bool) -> usize {
        const LOG2_E: f64 = std::f64::consts::LOG2_E;
        let bounds = |j: usize| -> (u64, f64, f64) {
            work::count(2 * work::SCORE);
            let score = n3::score_prepared(tk, self.blocks[off + j]);
            let inv = f64::from_bits(self.blocks[off + 2 * m + j]);
            let a = 1.0 - uniform_numerator(score) as f64 * (1.0 / (1u64 << 53) as f64);
            let head = a + 0.5 * a * a;
            // a^3 / (3 (1 - a)) <= 2a^3 / 3 while a <= 1/2; past it (a multiple of
            // 2^-53) the last term adds at least 128 > -log2(2^-53).
            let tail = (2.0 / 3.0) * a * a * a + (a - 0.5).max(0.0) * (1u64 << 60) as f64;
            // `inv` may be infinite: then `lo` is infinite or NaN (0 × ∞), and
            // neither prunes wrongly (a NaN never compares greater).
            let lo = (head * LOG2_E - 1e-11).max(0.0) * inv;
            let up = ((head + tail) * LOG2_E + 1e-11) * inv;
            (score, lo, up)
        };
        // Lower bounds of the first nodes are kept for the second pass.
        let mut lowers = [0.0f64; 32];
        let (mut upper, mut j0) = (f64::INFINITY, usize::MAX);
        for j in (0..m).filter(|&j| !skip(j)) {
            let (_, lo, up) = bounds(j);
            if let Some(slot) = lowers.get_mut(j) {
                *slot = lo;
            }
            // The first candidate is j0 until beaten: some node is, even when
            // every upper bound is infinite.
            j0 = if up < upper || j0 == usize::MAX {
                j
            } else {
                j0
            };
            upper = upper.min(up);
        }
        if j0 == usize::MAX {
            return 0;
        }
        let exact = |j: usize, score: u64| {
            work::count(work::WEIGHTED_SCORE);
            Standing::new(score, Weight::unpack(self.blocks[off + m + j])).rank()
        };
        let mut best: Option<(u128, usize)> = None;
        for j in (0..m).filter(|&j| j != j0 && !skip(j)) {
            let lower = lowers.get(j).copied().unwrap_or_else(|| bounds(j).1);
            if lower > upper {
                continue;
            }
            let (b, bj) = *best.get_or_insert_with(|| (exact(j0, bounds(j0).0), j0));
            let r = exact(j, bounds(j).0);
            // Equal ranks would need equal ids (never here); the lower position
            // then, as `weighted::argmin` keeps the first index.
            if r < b || (r == b && j < bj) {
                best = Some((r, j));
            }
        }
        best.map_or(j0, |(_, j)| j)
    }

    /// Position in its leaf of the best plain score of the leaf block at `off` with
    /// `m > 0` nodes, leaving out as [`Skeleton::weighted_pick`] does.
    fn unweighted_pick(
        &self,
        off: usize,
        m: usize,
        tk: u64,
        skip: impl Fn(usize) -> bool,
    ) -> usize {
        let mut best: Option<(u64, usize)> = None;
        for j in 0..m {
            if skip(j) {
                continue;
            }
            work::count(work::SCORE);
            let s = n3::score_prepared(tk, self.blocks[off + j]);
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, j));
            }
        }
        best.map_or(0, |(_, j)| j)
    }

    /// The `count` best distinct nodes for `key` (indices into the `nodes` given to
    /// build), best first, `min(count, len)` of them; the first is [`Skeleton::owner`].
    ///
    /// Rank `i` descends with its own coin seed, with the nodes of ranks `< i` removed
    /// from every weight sum and count it meets and skipped in its leaf (module docs).
    /// Deterministic, and each rank moves under churn about as rarely as the owner.
    pub fn owners(&self, key: u64, count: usize) -> Vec<usize> {
        let count = count.min(self.len);
        work::count(work::ELEMENT * count as u64);
        let tk = n3::prepared_key(key);
        let mut taken = Taken::new(self, count);
        let mut out: Vec<usize> = Vec::with_capacity(count);
        let mut path: Vec<usize> = Vec::with_capacity(66);
        for rank in 0..count {
            out.push(self.pick_excluding(tk, rank as u64, &mut taken, &mut path));
        }
        out
    }

    /// Rank `rank`'s pick with the `taken` nodes (fewer than `len`) left out; records
    /// it in `taken` and returns its build-input index.
    fn pick_excluding(
        &self,
        tk: u64,
        rank: u64,
        taken: &mut Taken,
        path: &mut Vec<usize>,
    ) -> usize {
        let seed = seed_of(tk, rank);
        path.clear();
        let mut slot = 0;
        loop {
            work::count(work::LEVEL);
            path.push(slot);
            let e = self.entries[slot];
            if e.is_leaf() {
                let (off, m, width) = e.block();
                let lo = self.span[slot][0] as usize;
                let skip = |j: usize| taken.contains(lo + j);
                let j = if self.weighted {
                    self.weighted_pick(off, m, tk, skip)
                } else {
                    self.unweighted_pick(off, m, tk, skip)
                };
                let w = if self.weighted {
                    self.weights[lo + j]
                } else {
                    1.0
                };
                taken.add(path, lo + j, w);
                return self.leaf_index(off, m, width, j);
            }
            let (l, r) = (e.first(), e.first() + 1);
            if self.span[l] == self.span[r] {
                slot = l; // a filler: both children are one subtree
                continue;
            }
            let (tl, wl) = taken.removed(self, l);
            let (tr, wr) = taken.removed(self, r);
            let cl = (self.span[l][1] - self.span[l][0]) as usize - tl;
            let cr = (self.span[r][1] - self.span[r][0]) as usize - tr;
            let left = if cl == 0 {
                false
            } else if cr == 0 {
                true
            } else {
                // docs/HASHING.md §4: what is left of each side's weight sum,
                // never below 0. With nothing taken that is exactly the build
                // threshold (x - 0.0 == x), kept in the entry.
                let t = if tl + tr > 0 {
                    threshold((self.mass[l] - wl).max(0.0), (self.mass[r] - wr).max(0.0))
                } else {
                    e.a
                };
                coin(seed, e.bit()) < t
            };
            slot = if left { l } else { r };
        }
    }
}

/// The nodes [`Skeleton::owners`] has picked so far, as later ranks see them: per
/// subtree, how many nodes and how much weight they take out (weights summed in pick
/// order either way, so both representations give identical thresholds).
struct Taken {
    /// `(sorted position, weight)` of each pick, in pick order.
    list: Vec<(usize, f64)>,
    /// Large requests only: per slot, the count and weight taken out of it, and per
    /// sorted position whether it is taken (empty otherwise: `list` is scanned).
    slots: Vec<(usize, f64)>,
    positions: Vec<bool>,
}

impl Taken {
    /// Above this many ranks, per-slot tables beat scanning the picks per level.
    const DENSE_FROM: usize = 48;

    fn new(sk: &Skeleton, count: usize) -> Taken {
        let dense = count >= Taken::DENSE_FROM;
        if dense {
            work::count(work::ELEMENT * (sk.entries.len() + sk.len) as u64);
        }
        Taken {
            list: Vec::with_capacity(count),
            slots: if dense {
                vec![(0, 0.0); sk.entries.len()]
            } else {
                Vec::new()
            },
            positions: if dense {
                vec![false; sk.len]
            } else {
                Vec::new()
            },
        }
    }

    /// Entries one membership test or removal query reads.
    fn probe_len(&self) -> u64 {
        if self.slots.is_empty() {
            self.list.len().max(1) as u64
        } else {
            1
        }
    }

    fn contains(&self, pos: usize) -> bool {
        work::count(work::ELEMENT * self.probe_len());
        if self.positions.is_empty() {
            self.list.iter().any(|&(p, _)| p == pos)
        } else {
            self.positions[pos]
        }
    }

    /// Count and weight taken out of `slot`'s subtree.
    fn removed(&self, sk: &Skeleton, slot: usize) -> (usize, f64) {
        work::count(work::ELEMENT * self.probe_len());
        if !self.slots.is_empty() {
            return self.slots[slot];
        }
        let [lo, hi] = sk.span[slot].map(|x| x as usize);
        let mut out = (0, 0.0);
        for &(p, w) in &self.list {
            if (lo..hi).contains(&p) {
                out.0 += 1;
                out.1 += w;
            }
        }
        out
    }

    fn add(&mut self, path: &[usize], pos: usize, weight: f64) {
        work::count(
            work::ELEMENT
                * if self.slots.is_empty() {
                    1
                } else {
                    path.len() as u64
                },
        );
        self.list.push((pos, weight));
        if !self.slots.is_empty() {
            for &s in path {
                self.slots[s].0 += 1;
                self.slots[s].1 += weight;
            }
            self.positions[pos] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weighted;

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn random_nodes(n: usize, seed: u64) -> Vec<(u64, f64)> {
        let mut s = seed;
        (0..n).map(|_| (splitmix(&mut s), 1.0)).collect()
    }

    /// The three namings the balance suite uses: random, sequential, `i << 32`.
    fn namings(n: usize) -> Vec<(&'static str, Vec<(u64, f64)>)> {
        vec![
            ("random", random_nodes(n, n as u64)),
            ("sequential", (0..n as u64).map(|i| (i, 1.0)).collect()),
            ("i<<32", (0..n as u64).map(|i| (i << 32, 1.0)).collect()),
        ]
    }

    fn flat_owner(nodes: &[(u64, f64)], key: u64) -> usize {
        let k = n3::prep(key);
        let mut best = 0;
        for i in 1..nodes.len() {
            if n3::score(k, nodes[i].0) > n3::score(k, nodes[best].0) {
                best = i;
            }
        }
        best
    }

    fn chi_square(counts: &[u64], expected: &[f64]) -> f64 {
        counts
            .iter()
            .zip(expected)
            .map(|(&c, &e)| (c as f64 - e).powi(2) / e)
            .sum()
    }

    fn chi_bound(n: usize) -> f64 {
        let df = (n - 1) as f64;
        df + 8.0 * (2.0 * df).sqrt()
    }

    /// Owner ids of keys `base..base + keys`.
    fn owner_ids(sk: &Skeleton, nodes: &[(u64, f64)], base: u64, keys: u64) -> Vec<u64> {
        (base..base + keys).map(|k| nodes[sk.owner(k)].0).collect()
    }

    fn moved(a: &[u64], b: &[u64]) -> f64 {
        a.iter().zip(b).filter(|(x, y)| x != y).count() as f64 / a.len() as f64
    }

    #[test]
    fn helpers_match_n3() {
        assert_eq!(SEED_SALT_LINEAR, n3::linear(SEED_SALT));
        assert_eq!(rank_salt(0), SEED_SALT);
        assert_eq!(threshold(1.0, 1.0), 1 << 63);
        assert_eq!(threshold(1.0, 3.0), 1 << 62);
        assert_eq!(threshold(0.0, 1.0), 0);
        assert_eq!(threshold(1.0, 0.0), u64::MAX);
        assert_eq!(threshold(1e300, 1e-300), u64::MAX);
    }

    #[test]
    fn shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Skeleton>();
    }

    #[test]
    fn single_node_leaves_on_structured_ids() {
        // Leaves of one node over ids that share long routing-key prefixes in places:
        // many fillers, paths up to the 64-bit limit; answers agree with the generic
        // owners() descent and stay fair.
        for nodes in [
            (0..300u64).map(|i| (i, 1.0)).collect::<Vec<_>>(),
            (0..300u64).map(|i| (i << 32, 1.0)).collect(),
        ] {
            let sk = Skeleton::build(&nodes, 1);
            assert!(sk.depth() <= 64);
            let mut counts = vec![0u64; nodes.len()];
            for key in 0..60_000u64 {
                let o = sk.owner(key);
                counts[o] += 1;
                if key % 16 == 0 {
                    assert_eq!(sk.owners(key, 2)[0], o);
                }
            }
            let e = vec![60_000.0 / nodes.len() as f64; nodes.len()];
            assert!(chi_square(&counts, &e) <= chi_bound(nodes.len()));
        }
    }

    #[test]
    fn empty_and_single_node() {
        let empty = Skeleton::build(&[], DEFAULT_LEAF_SIZE);
        assert!(empty.is_empty());
        assert_eq!((empty.len(), empty.depth()), (0, 0));
        assert_eq!(empty.owner(42), 0);
        assert!(empty.owners(42, 3).is_empty());
        let one = Skeleton::build(&[(7, 2.5)], 1);
        for key in 0..100 {
            assert_eq!(one.owner(key), 0);
            assert_eq!(one.owners(key, 5), vec![0]);
        }
    }

    #[test]
    fn small_sets_give_the_flat_owner() {
        for (n, leaf) in [
            (2, 16),
            (3, 16),
            (7, 16),
            (16, 16),
            (8, 8),
            (1, 1),
            (32, 32),
        ] {
            for (name, nodes) in namings(n) {
                let sk = Skeleton::build(&nodes, leaf);
                assert_eq!(sk.depth(), 0);
                for key in 0..20_000u64 {
                    let key = key.wrapping_mul(0x2545_f491_4f6c_dd1d);
                    assert_eq!(
                        sk.owner(key),
                        flat_owner(&nodes, key),
                        "{name} n={n} key={key}"
                    );
                    // No coin in a single leaf: the ranks are the flat top-k.
                    if key % 16 == 0 {
                        let prepared: Vec<u64> = nodes.iter().map(|x| n3::linear(x.0)).collect();
                        let top = scan::top(&prepared, n3::prepared_key(key), 4);
                        assert_eq!(sk.owners(key, 4), top, "{name} n={n} key={key}");
                    }
                }
            }
        }
    }

    #[test]
    fn small_weighted_sets_give_the_flat_weighted_owner() {
        // Weights over six orders of magnitude also exercise the skipped logarithms.
        let mut s = 5u64;
        for (n, spread) in [(2usize, true), (5, true), (16, true), (16, false)] {
            // Six orders of magnitude, or weights a few ulps apart.
            let nodes: Vec<(u64, f64)> = (0..n)
                .map(|i| {
                    let w = if spread {
                        10f64.powi((splitmix(&mut s) % 7) as i32 - 3) * 1.7
                    } else {
                        1.0 + i as f64 * f64::EPSILON
                    };
                    (splitmix(&mut s), w)
                })
                .collect();
            let sk = Skeleton::build(&nodes, 16);
            assert!(sk.is_weighted());
            for key in 0..50_000u64 {
                let flat = weighted::argmin(&nodes, n3::prep(key)).unwrap();
                assert_eq!(sk.owner(key), flat, "n={n} key={key}");
            }
        }
    }

    #[test]
    fn adding_to_a_single_leaf_moves_keys_only_to_the_new_node() {
        let nodes = random_nodes(10, 3);
        let mut grown = nodes.clone();
        grown.push((0xfeed, 1.0));
        let (a, b) = (Skeleton::build(&nodes, 16), Skeleton::build(&grown, 16));
        for key in 0..50_000u64 {
            let (x, y) = (a.owner(key), b.owner(key));
            assert!(x == y || y == 10, "key {key} moved from {x} to {y}");
        }
    }

    #[test]
    fn fair_over_1000_nodes() {
        for (name, nodes) in namings(1000) {
            let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
            for (kname, keys) in [
                ("sequential", (0..100_000u64).collect::<Vec<_>>()),
                ("i<<32", (0..100_000u64).map(|i| i << 32).collect()),
            ] {
                let mut counts = vec![0u64; nodes.len()];
                for &key in &keys {
                    counts[sk.owner(key)] += 1;
                }
                let e = vec![keys.len() as f64 / nodes.len() as f64; nodes.len()];
                let chi = chi_square(&counts, &e);
                println!(
                    "1000 {name} ids, {kname} keys: chi2 {chi:.0} (bound {:.0})",
                    chi_bound(1000)
                );
                assert!(chi <= chi_bound(1000), "{name}/{kname}: chi2 {chi}");
            }
        }
    }

    #[test]
    fn fair_over_10000_nodes() {
        for (name, nodes) in namings(10_000) {
            let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
            let keys = 200_000u64;
            let mut counts = vec![0u64; nodes.len()];
            for key in 0..keys {
                counts[sk.owner(key.wrapping_mul(0x9e37_79b9))] += 1;
            }
            let e = vec![keys as f64 / nodes.len() as f64; nodes.len()];
            let chi = chi_square(&counts, &e);
            println!(
                "10000 {name} ids: chi2 {chi:.0} (bound {:.0})",
                chi_bound(10_000)
            );
            assert!(chi <= chi_bound(10_000), "{name}: chi2 {chi}");
        }
    }

    #[test]
    fn fair_with_tiny_leaves_and_skipped_levels() {
        // Leaves of 1-3 nodes make many levels where all nodes go one way (skipped),
        // which takes the exact slow descent: still fair, still the same answers as
        // the generic owners() path.
        for leaf in [1usize, 2, 3] {
            let nodes = random_nodes(500, 11);
            let sk = Skeleton::build(&nodes, leaf);
            let keys = 100_000u64;
            let mut counts = vec![0u64; nodes.len()];
            for key in 0..keys {
                let o = sk.owner(key);
                counts[o] += 1;
                if key % 8 == 0 {
                    assert_eq!(sk.owners(key, 1), vec![o]);
                }
            }
            let e = vec![keys as f64 / nodes.len() as f64; nodes.len()];
            let chi = chi_square(&counts, &e);
            assert!(chi <= chi_bound(nodes.len()), "leaf {leaf}: chi2 {chi}");
        }
    }

    /// (mean, max) of moved fraction × N over `trials` adds and as many removes.
    fn churn(n: usize, trials: usize, keys: u64, leaf: usize, seed: u64) -> [(f64, f64); 2] {
        let nodes = random_nodes(n, seed);
        let before = owner_ids(&Skeleton::build(&nodes, leaf), &nodes, 0, keys);
        let mut s = seed ^ 0xabc;
        let (mut adds, mut removes) = (Vec::new(), Vec::new());
        for _ in 0..trials {
            let mut grown = nodes.clone();
            grown.push((splitmix(&mut s), 1.0));
            let after = owner_ids(&Skeleton::build(&grown, leaf), &grown, 0, keys);
            adds.push(moved(&before, &after) * n as f64);
            let mut shrunk = nodes.clone();
            shrunk.remove((splitmix(&mut s) % n as u64) as usize);
            let after = owner_ids(&Skeleton::build(&shrunk, leaf), &shrunk, 0, keys);
            removes.push(moved(&before, &after) * n as f64);
        }
        let stat = |v: &[f64]| {
            (
                v.iter().sum::<f64>() / v.len() as f64,
                v.iter().cloned().fold(0.0, f64::max),
            )
        };
        [stat(&adds), stat(&removes)]
    }

    fn assert_churn(sizes: &[usize], trials: usize, keys: u64) {
        for &n in sizes {
            let [(am, ax), (rm, rx)] = churn(n, trials, keys, DEFAULT_LEAF_SIZE, n as u64 * 7);
            println!(
                "N={n}: moved x N: add mean {am:.2} max {ax:.2}, remove mean {rm:.2} max {rx:.2}"
            );
            assert!(am <= 8.0 && rm <= 8.0, "N={n}: mean add {am}, remove {rm}");
            assert!(ax <= 20.0 && rx <= 20.0, "N={n}: max add {ax}, remove {rx}");
        }
    }

    #[test]
    fn churn_moves_few_keys_near_1000() {
        // Powers of two and multiples of the leaf size, and one past them.
        assert_churn(&[1000, 1023, 1024, 1025, 16 * 63, 16 * 63 + 1], 20, 100_000);
    }

    #[test]
    fn churn_moves_few_keys_near_10000() {
        assert_churn(&[10_000, 8191, 8192, 8193, 16 * 625 + 1], 20, 100_000);
    }

    #[test]
    #[ignore = "heavier: more sizes and keys (~1 min in release)"]
    fn churn_moves_few_keys_full() {
        assert_churn(
            &[
                1000, 1023, 1024, 1025, 1008, 1009, 2047, 2048, 2049, 4096, 4097, 9999, 10_000,
                10_001, 16_383, 16_384, 16_385,
            ],
            20,
            400_000,
        );
    }

    fn weight_shares(nodes: &[(u64, f64)], leaf: usize, keys: u64) -> Vec<f64> {
        let sk = Skeleton::build(nodes, leaf);
        let mut counts = vec![0u64; nodes.len()];
        for key in 0..keys {
            counts[sk.owner(key.wrapping_mul(0x9e37_79b9_7f4a_7c15))] += 1;
        }
        counts.iter().map(|&c| c as f64 / keys as f64).collect()
    }

    fn assert_weighted_shares(keys: u64, tolerance: f64) {
        let ws = [1.0, 2.0, 3.0, 10.0];
        let total: f64 = ws.iter().sum();
        // Four nodes in leaves of one node: every decision is a coin.
        let nodes: Vec<(u64, f64)> = ws
            .iter()
            .enumerate()
            .map(|(i, &w)| (i as u64 * 77 + 5, w))
            .collect();
        for leaf in [1, 16] {
            let shares = weight_shares(&nodes, leaf, keys);
            for (i, &w) in ws.iter().enumerate() {
                let expected = w / total;
                let rel = (shares[i] - expected).abs() / expected;
                assert!(
                    rel < tolerance,
                    "leaf {leaf} node {i}: {} vs {expected}",
                    shares[i]
                );
            }
        }
        // 1000 nodes cycling through the weights: per-class shares.
        let many: Vec<(u64, f64)> = random_nodes(1000, 9)
            .into_iter()
            .enumerate()
            .map(|(i, (id, _))| (id, ws[i % 4]))
            .collect();
        let shares = weight_shares(&many, DEFAULT_LEAF_SIZE, keys);
        for (c, &w) in ws.iter().enumerate() {
            let got: f64 = shares.iter().skip(c).step_by(4).sum();
            let expected = w / total;
            assert!(
                (got - expected).abs() / expected < tolerance,
                "class {w}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn weighted_shares_follow_weights() {
        assert_weighted_shares(200_000, 0.02);
    }

    #[test]
    #[ignore = "heavier: 1M keys per layout"]
    fn weighted_shares_follow_weights_to_one_percent() {
        assert_weighted_shares(1_000_000, 0.01);
    }

    #[test]
    fn weighted_nodes_are_fair_by_chi_square() {
        let ws = [1.0, 2.0, 3.0, 10.0];
        let nodes: Vec<(u64, f64)> = random_nodes(2000, 13)
            .into_iter()
            .enumerate()
            .map(|(i, (id, _))| (id, ws[i % 4]))
            .collect();
        let total: f64 = nodes.iter().map(|n| n.1).sum();
        let keys = 400_000u64;
        let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
        let mut counts = vec![0u64; nodes.len()];
        for key in 0..keys {
            counts[sk.owner(key)] += 1;
        }
        let e: Vec<f64> = nodes.iter().map(|n| keys as f64 * n.1 / total).collect();
        let chi = chi_square(&counts, &e);
        assert!(chi <= chi_bound(nodes.len()), "chi2 {chi}");
    }

    #[test]
    fn equal_weights_give_the_unweighted_owners() {
        let nodes = random_nodes(3000, 17);
        let heavy: Vec<(u64, f64)> = nodes.iter().map(|&(id, _)| (id, 3.5)).collect();
        let (a, b) = (Skeleton::build(&nodes, 16), Skeleton::build(&heavy, 16));
        assert!(!a.is_weighted() && !b.is_weighted());
        for key in 0..50_000u64 {
            assert_eq!(a.owner(key), b.owner(key));
            assert_eq!(a.owners(key, 3), b.owners(key, 3));
        }
    }

    #[test]
    fn input_order_and_duplicates_do_not_matter() {
        let nodes = random_nodes(5000, 21);
        let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
        // Shuffled (Fisher-Yates), with every 10th node repeated later with a
        // smaller weight: it counts once, with its largest weight.
        let mut shuffled = nodes.clone();
        let mut s = 99u64;
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, (splitmix(&mut s) % (i as u64 + 1)) as usize);
        }
        let dups: Vec<(u64, f64)> = nodes.iter().step_by(10).map(|&(id, _)| (id, 0.5)).collect();
        shuffled.extend(dups);
        let sh = Skeleton::build(&shuffled, DEFAULT_LEAF_SIZE);
        assert_eq!(sh.len(), nodes.len());
        assert!(
            !sh.is_weighted() || nodes.is_empty(),
            "duplicates keep the largest weight"
        );
        for key in 0..100_000u64 {
            let (a, b) = (sk.owner(key), sh.owner(key));
            assert_eq!(nodes[a].0, shuffled[b].0, "key {key}");
            assert!(b < nodes.len(), "the first occurrence's index");
            if key % 10 == 0 {
                let x: Vec<u64> = sk.owners(key, 3).iter().map(|&i| nodes[i].0).collect();
                let y: Vec<u64> = sh.owners(key, 3).iter().map(|&i| shuffled[i].0).collect();
                assert_eq!(x, y);
            }
        }
        // A duplicate named first keeps the first index and the largest weight.
        let pair = Skeleton::build(&[(1, 1.0), (2, 1.0), (1, 4.0)], 16);
        assert_eq!(pair.len(), 2);
        assert!(pair.is_weighted());
        let mut wins = 0;
        for key in 0..10_000 {
            let o = pair.owner(key);
            assert!(o < 2);
            wins += usize::from(o == 0);
        }
        assert!((7_500..8_500).contains(&wins), "weight 4 vs 1: {wins}");
    }

    #[test]
    fn owners_are_distinct_best_first() {
        let mut s = 3u64;
        for (n, weighted) in [
            (1usize, false),
            (5, false),
            (40, true),
            (3000, false),
            (3000, true),
        ] {
            let nodes: Vec<(u64, f64)> = (0..n)
                .map(|_| {
                    let w = if weighted {
                        1.0 + (splitmix(&mut s) % 10) as f64
                    } else {
                        1.0
                    };
                    (splitmix(&mut s), w)
                })
                .collect();
            let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
            for key in 0..1000u64 {
                let ks: &[usize] = if n <= 40 {
                    &[0, 1, 2, 3, 7, n, n + 2]
                } else {
                    &[0, 1, 2, 3, 7, 60]
                };
                for &k in ks {
                    let o = sk.owners(key, k);
                    assert_eq!(o.len(), k.min(n));
                    if k > 0 {
                        assert_eq!(o[0], sk.owner(key));
                    }
                    let mut d = o.clone();
                    d.sort_unstable();
                    d.dedup();
                    assert_eq!(d.len(), o.len(), "n={n} k={k} key={key}: {o:?}");
                    // Each request is a prefix of any longer one (also across the
                    // switch to per-slot tables for large requests).
                    let longer = sk.owners(key, k + 50);
                    assert_eq!(&longer[..o.len()], &o[..], "n={n} k={k} key={key}");
                }
            }
        }
    }

    #[test]
    fn second_owners_are_fair() {
        let nodes = random_nodes(1000, 23);
        let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
        let keys = 100_000u64;
        let mut counts = vec![0u64; nodes.len()];
        for key in 0..keys {
            counts[sk.owners(key, 2)[1]] += 1;
        }
        let e = vec![keys as f64 / nodes.len() as f64; nodes.len()];
        let chi = chi_square(&counts, &e);
        assert!(chi <= chi_bound(nodes.len()), "chi2 {chi}");
    }

    #[test]
    fn owners_are_stable_under_churn() {
        // A set of k replicas changes when any rank moves, so expect about k times
        // the owner's movement; flat HRW would change k/(N+1) of the sets.
        let k = 3;
        for n in [1000usize, 10_000] {
            let nodes = random_nodes(n, 31);
            let keys = 50_000u64;
            let sets = |sk: &Skeleton, nodes: &[(u64, f64)]| -> Vec<Vec<u64>> {
                (0..keys)
                    .map(|key| {
                        let mut v: Vec<u64> =
                            sk.owners(key, k).iter().map(|&i| nodes[i].0).collect();
                        v.sort_unstable();
                        v
                    })
                    .collect()
            };
            let before = sets(&Skeleton::build(&nodes, DEFAULT_LEAF_SIZE), &nodes);
            let mut s = 77u64;
            let (mut changed, mut trials) = (0.0, 0);
            for t in 0..10 {
                let mut other = nodes.clone();
                if t % 2 == 0 {
                    other.push((splitmix(&mut s), 1.0));
                } else {
                    other.remove((splitmix(&mut s) % n as u64) as usize);
                }
                let after = sets(&Skeleton::build(&other, DEFAULT_LEAF_SIZE), &other);
                changed +=
                    before.iter().zip(&after).filter(|(a, b)| a != b).count() as f64 / keys as f64;
                trials += 1;
            }
            let per_n = changed / trials as f64 * n as f64;
            println!("N={n}: owners({k}) set changed for {per_n:.2}/N of keys per add/remove");
            assert!(per_n <= 8.0 * k as f64, "N={n}: {per_n}/N");
        }
    }

    /// Weighted nodes with weights log-uniform over the whole valid range, and
    /// some sets mostly of ones with a few tiny weights (the old overflow).
    fn wide_nodes(n: usize, s: &mut u64) -> Vec<(u64, f64)> {
        let kind = splitmix(s) % 3;
        (0..n)
            .map(|_| {
                let x = splitmix(s);
                let w = match (kind, x % 4) {
                    (0, _) => f64::from_bits(1 + (x >> 2) % weighted::MAX_WEIGHT.to_bits()),
                    (1, 0) => [5e-324, 1e-310, 1e-300, 1e-290][(x >> 2) as usize % 4],
                    (1, _) => 1.0,
                    _ => f64::from_bits(1 + (x >> 2) % 64),
                };
                (splitmix(s), w)
            })
            .collect()
    }

    #[test]
    fn wide_weights_give_distinct_owners_and_the_flat_ones_within_a_leaf() {
        let mut s = 41u64;
        for round in 0..120 {
            let leaf = [1usize, 2, 4, 16, 32][round % 5];
            let n = 1 + (splitmix(&mut s) % 80) as usize;
            let nodes = wide_nodes(n, &mut s);
            let sk = Skeleton::build(&nodes, leaf);
            let ring = crate::ring::Ring::new(&nodes);
            for key in 0..300u64 {
                let key = splitmix(&mut s) ^ key;
                let o = sk.owners(key, 5);
                assert_eq!(o.len(), 5.min(n));
                let mut d = o.clone();
                d.sort_unstable();
                d.dedup();
                assert_eq!(d.len(), o.len(), "round {round}: {o:?}");
                assert_eq!(o.first().copied(), Some(sk.owner(key)));
                if n <= leaf {
                    // One leaf, no coin: the flat weighted top-k.
                    assert_eq!(o, ring.owners(key, 5), "round {round} key {key}");
                }
            }
        }
    }

    #[test]
    fn tiny_weights_among_ones_never_repeat_a_replica() {
        // The issue's case: weights below ~1e-290 made the leaf bounds overflow,
        // and owners/3 returned the first leaf node again.
        for tiny in [1e-290, 1e-300, 1e-310, 5e-324] {
            let nodes = [(11u64, 1.0), (22, tiny), (33, 2.0), (44, tiny * 3.0)];
            for leaf in [1, 16] {
                let sk = Skeleton::build(&nodes, leaf);
                for key in 0..20_000u64 {
                    let mut o = sk.owners(key, 4);
                    o.sort_unstable();
                    assert_eq!(o, vec![0, 1, 2, 3], "tiny {tiny:e} leaf {leaf} key {key}");
                }
            }
        }
    }

    #[test]
    fn weighted_shares_hold_across_the_range() {
        // 1M keys, each set's shares within 1% of w/Σw, in leaves of 1 (coins
        // only) and 16 (one leaf), and on the ring.
        for ws in weighted::tests::share_sets() {
            let nodes: Vec<(u64, f64)> = ws
                .iter()
                .enumerate()
                .map(|(i, &w)| (i as u64 * 77 + 5, w))
                .collect();
            for leaf in [1, 16] {
                let sk = Skeleton::build(&nodes, leaf);
                weighted::tests::assert_shares(&ws, |k| sk.owner(k), 1_000_000, &format!("{ws:?}"));
            }
            let ring = crate::ring::Ring::new(&nodes);
            weighted::tests::assert_shares(&ws, |k| ring.owner(k).unwrap(), 1_000_000, "ring");
        }
    }

    #[test]
    fn pinned_owners() {
        // Placements are a contract once stored: these must never change silently.
        let nodes: Vec<(u64, f64)> = (0..100u64).map(|i| (i, 1.0)).collect();
        let sk = Skeleton::build(&nodes, 16);
        let got: Vec<usize> = (0..12u64).map(|k| sk.owner(k * 1_000_003)).collect();
        println!("pinned: {got:?}");
        let weighted: Vec<(u64, f64)> = (0..100u64).map(|i| (i, 1.0 + (i % 5) as f64)).collect();
        let sw = Skeleton::build(&weighted, 16);
        let got_w: Vec<usize> = (0..12u64).map(|k| sw.owner(k * 1_000_003)).collect();
        println!("pinned weighted: {got_w:?}");
        let got_3: Vec<Vec<usize>> = (0..4u64).map(|k| sk.owners(k * 1_000_003, 3)).collect();
        println!("pinned owners: {got_3:?}");
        assert_eq!(got, PINNED);
        assert_eq!(got_w, PINNED_WEIGHTED);
        assert_eq!(got_3, PINNED_OWNERS);
    }

    const PINNED: [usize; 12] = [58, 73, 21, 98, 30, 87, 59, 58, 72, 27, 54, 65];
    const PINNED_WEIGHTED: [usize; 12] = [58, 73, 21, 98, 42, 87, 59, 58, 72, 64, 54, 12];
    const PINNED_OWNERS: [[usize; 3]; 4] = [[58, 46, 60], [73, 81, 14], [21, 39, 59], [98, 41, 82]];
}
