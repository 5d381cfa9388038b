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
//! both, one lookup at a time and in batches, from 10 to 1M nodes.
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
//! `examples/skeleton_sim.rs`).
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

/// Default leaf size, chosen with `examples/skeleton_sim.rs` against 8 and 32: as
/// fast as 8 up to 10k nodes and faster above; 32 is faster still at 100k+ but a
/// leaf split or merge of 33 nodes moves up to ~24/N of the keys (16: ~15/N).
pub const DEFAULT_LEAF_SIZE: usize = 16;

mod build;
mod coins;
mod descent;
mod layout;
mod owners;
/// Checking a node against the skeleton (for callers holding node terms).
impl Skeleton {
    /// Whether the node given at build index `index` has the id `id`: one read of
    /// the build's ids, so that a batch can check every node it names for a
    /// fraction of a lookup.
    pub fn holds(&self, index: usize, id: u64) -> bool {
        crate::work::count(self.holds_cost());
        self.linear.get(index) == Some(&crate::n3::linear(id))
    }

    /// Work units of one [`Skeleton::holds`], an upper bound.
    pub fn holds_cost(&self) -> u64 {
        crate::cost::SKELETON_HOLDS
    }
}

#[cfg(test)]
mod tests;

pub use coins::{coin, rank_salt, threshold, SEED_SALT};
pub use descent::BATCH_LANES;
pub use layout::Skeleton;

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
