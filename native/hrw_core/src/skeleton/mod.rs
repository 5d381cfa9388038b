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
//! nodes they are compared with (one N3 score per internal node instead, the
//! literal "score(prep(key), node salt)", would put a score on the load chain of
//! every level).
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
//! At 1M nodes the slots take ~2.9 MB and the leaf blocks ~16 MB: a lookup's deep
//! levels and its leaf miss the caches (TLB and DRAM), so a single lookup cannot
//! come close to a 10k-node one. [`Skeleton::owners_of`] hides the latency instead
//! of removing it: eight descents go down in lock-step (their loads are
//! independent, so they are in flight together) and all eight leaf blocks are
//! requested before the first is scanned. `examples/skeleton_layout.rs` measures
//! both, one lookup at a time and in batches, from 10 to 1M nodes
//! (bench/results/skeleton_layout-2026-12-01.txt).
//!
//! Not adopted: a copy of the trie packed three levels to a 64-byte line (the high
//! halves of seven thresholds and eight child references; the low halves apart,
//! read only on a tie), so a 1M-node path takes 6 dependent loads instead of 18.
//! What keeps a 1M-node lookup slow is its leaf block, one random load from ~16 MB
//! that misses to DRAM, which no trie layout removes; the slots' deep levels mostly
//! hit L2 and L3.
//!
//! # Churn
//!
//! Adding a node moves, at each internal node on its path, the keys whose coin falls
//! between the old and the new threshold (about 1/(2N) of all keys per level), the
//! keys it wins in its leaf (about 1/N), and, when its leaf overflows and splits,
//! about half of that leaf's keys. Removing is symmetric: never a reshuffle, at any
//! N (tests `churn_*`; keys moved per join and leave, times N, by
//! `examples/skeleton_sim.rs` in bench/results/skeleton_sim-2026-12-01.txt).
//!
//! Not adopted (`skeleton_sim --v2`, module `radix` of `examples/skeleton_sim.rs`):
//! an aligned radix-16 trie where each internal node picks its child by weighted
//! rendezvous among its children (weight = node count; monotone, so only the mass
//! that must move moves at each level). It moves fewer keys up to 100k nodes, but
//! at 1M its depth-4 subtrees hold ~15 nodes, so joins often split a leaf; and a
//! lookup costs 16 draws per level instead of one coin.
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

/// Asks the CPU to start loading the cache line holding `p` (a hint only: any
/// address is allowed, nothing is read, and other targets do nothing).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetch` is a hint that never faults and reads nothing the program
    // can observe, whatever the address (callers form it with `wrapping_add`); SSE
    // is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `floor(2^64 * wl / (wl + wr))`, saturating at `u64::MAX` (IEEE basic operations).
#[inline]
pub fn threshold(wl: f64, wr: f64) -> u64 {
    let p = wl / (wl + wr);
    // Scaling by 2^64 is exact; the cast truncates and saturates (NaN gives 0).
    (p * 18_446_744_073_709_551_616.0) as u64
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

mod build;
mod descent;
pub use descent::BATCH_LANES;
mod owners;
#[cfg(test)]
mod tests;

impl Skeleton {
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
}
