//! The owner's descent (coins along consecutive bit positions, then the leaf scan),
//! the leaf picks shared with `owners`, and the owner's work bound.

use super::coins::{coin, SEED_SALT_LINEAR};
use super::layout::{Entry, Skeleton};
use crate::n3;
use crate::scan;
use crate::weighted::{uniform_numerator, Standing, Weight};
use crate::{cost, work};

/// Keys one [`Skeleton::owners_of`] step takes down the trie together.
pub const BATCH_LANES: usize = 8;

/// Keys of one [`Skeleton::owners_of`] group between descent and leaf scan.
struct Lanes {
    tk: [u64; BATCH_LANES],
    leaf: [Entry; BATCH_LANES],
    lanes: usize,
}

/// Leaf blocks longer than this (128 KiB, beyond a core's L1 cache) are worth
/// prefetching in `owners_of`; below, the hints cost more than they save.
const BATCH_PREFETCH_FROM_WORDS: usize = 1 << 14;

/// Leaf blocks longer than this (1 MiB, a core's L2 cache here) miss the cache often
/// enough that `owner` prefetches the build indices of its leaf.
const PREFETCH_FROM_WORDS: usize = 1 << 17;

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

impl Skeleton {
    /// What bounds its lookups' work, for the cost model.
    pub(super) fn shape(&self) -> cost::SkeletonShape {
        cost::SkeletonShape {
            levels: self.levels,
            slots: self.entries.len(),
            nodes: self.len,
            max_leaf: self.max_leaf,
            max_width: self.max_width,
            weighted: self.weighted,
        }
    }

    /// Work units of one [`Skeleton::owner`], an upper bound
    /// ([`cost::skeleton_owner`]).
    pub fn owner_cost(&self) -> u64 {
        cost::skeleton_owner(&self.shape())
    }

    /// Index (into the `nodes` given to [`Skeleton::build`], first occurrence of a
    /// duplicated id) of the owner of the key with u64 id `key`. Never panics; a
    /// skeleton built from no nodes answers 0, which names nothing.
    #[inline]
    pub fn owner(&self, key: u64) -> usize {
        let tk = n3::prepared_key(key);
        let leaf = self.descend(n3::score_prepared(tk, SEED_SALT_LINEAR));
        let (off, m, width) = leaf.block();
        if m > 0 && self.blocks.len() > PREFETCH_FROM_WORDS {
            // The scan loads the ids at once; the build indices it reads next are
            // requested now, so a miss on them overlaps the scan's. (Small skeletons
            // stay in cache, and there the two hints only cost time.)
            let base = self.blocks.as_ptr().wrapping_add(off);
            let (lo, hi) = self.index_words(m, width);
            prefetch(base.wrapping_add(lo));
            prefetch(base.wrapping_add(hi - 1));
        }
        self.leaf_owner(leaf, tk)
    }

    /// Work units of one [`Skeleton::owners_of`] over `keys` keys, an upper bound
    /// ([`cost::skeleton_owners_of`]).
    pub fn owners_of_cost(&self, keys: usize) -> u64 {
        cost::skeleton_owners_of(&self.shape(), keys)
    }

    /// The owners of many keys: `out[i] = owner(keys[i])` (as a `u32`: a skeleton
    /// holds fewer than 2^32 nodes), for `i < min(keys.len(), out.len())`; the rest
    /// of `out` is left as it is. Never panics.
    ///
    /// Same answers as [`Skeleton::owner`], faster on large skeletons: keys go down
    /// the trie [`BATCH_LANES`] at a time, one level of all of them per step, so their
    /// cache misses overlap instead of following one another; their leaf blocks are
    /// requested at once, and scanned only after the next group's descent, which
    /// hides the leaves' misses behind it.
    pub fn owners_of(&self, keys: &[u64], out: &mut [u32]) {
        let n = keys.len().min(out.len());
        let (keys, out) = (&keys[..n], &mut out[..n]);
        let mut kc = keys.chunks_exact(BATCH_LANES);
        let mut oc = out.chunks_exact_mut(BATCH_LANES);
        if self.blocks.len() <= BATCH_PREFETCH_FROM_WORDS {
            // In cache: nothing to hide, and holding a group back costs time.
            for (keys, out) in (&mut kc).zip(&mut oc) {
                self.scan_lanes(&self.descend_lanes(keys), out);
            }
        } else if let Some((keys, mut pending_out)) = (&mut kc).zip(&mut oc).next() {
            let mut pending = self.descend_lanes(keys);
            for (keys, out) in (&mut kc).zip(&mut oc) {
                let next = self.descend_lanes(keys);
                self.scan_lanes(&pending, pending_out);
                (pending, pending_out) = (next, out);
            }
            self.scan_lanes(&pending, pending_out);
        }
        let (keys, out) = (kc.remainder(), oc.into_remainder());
        if !keys.is_empty() {
            self.scan_lanes(&self.descend_lanes(keys), out);
        }
    }

    /// The descents of up to [`BATCH_LANES`] keys, leaf blocks requested.
    #[inline(always)]
    fn descend_lanes(&self, keys: &[u64]) -> Lanes {
        let lanes = keys.len().min(BATCH_LANES);
        let mut tk = [0u64; BATCH_LANES];
        let mut seed = [0u64; BATCH_LANES];
        for i in 0..lanes {
            tk[i] = n3::prepared_key(keys[i]);
            seed[i] = n3::score_prepared(tk[i], SEED_SALT_LINEAR);
        }
        let entries = self.entries.as_slice();
        let mut leaf = [entries[0]; BATCH_LANES];
        work::count(cost::LEVEL * u64::from(self.levels) * lanes as u64);
        // As `descend`, lane by lane within each step: the lanes' loads are
        // independent, so the CPU has several in flight.
        for bit in self.root_bit..self.root_bit + self.levels {
            for i in 0..lanes {
                let e = leaf[i];
                let right = coin(seed[i], bit) >= e.a || e.is_leaf();
                leaf[i] = entries[e.first() + usize::from(right)];
            }
        }
        if self.blocks.len() > BATCH_PREFETCH_FROM_WORDS {
            for e in &leaf[..lanes] {
                let (off, m, width) = e.block();
                if m > 0 {
                    self.prefetch_leaf(off, m, width);
                }
            }
        }
        Lanes { tk, leaf, lanes }
    }

    /// The leaf scans of `group`, into `out` (as long as the group).
    #[inline(always)]
    fn scan_lanes(&self, group: &Lanes, out: &mut [u32]) {
        for (i, o) in out.iter_mut().enumerate().take(group.lanes) {
            *o = self.leaf_owner(group.leaf[i], group.tk[i]) as u32;
        }
    }

    /// The owner within the leaf entry `leaf` of the key prepared as `tk`.
    #[inline(always)]
    fn leaf_owner(&self, leaf: Entry, tk: u64) -> usize {
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
        work::count(cost::LEVEL * u64::from(self.levels));
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

    /// Where a leaf block of `m` nodes (`width` ids) keeps its build indices: words
    /// `lo..hi` from its start.
    #[inline(always)]
    fn index_words(&self, m: usize, width: usize) -> (usize, usize) {
        let lo = if self.weighted { 3 * m } else { width };
        (lo, lo + m.div_ceil(2))
    }

    /// Starts loading every line of the leaf block at `off` (`m > 0` nodes, `width`
    /// ids), so that the misses of several leaves overlap.
    #[inline(always)]
    fn prefetch_leaf(&self, off: usize, m: usize, width: usize) {
        let base = self.blocks.as_ptr().wrapping_add(off);
        let end = self.index_words(m, width).1;
        let mut i = 0;
        while i < end {
            prefetch(base.wrapping_add(i));
            i += 8;
        }
        prefetch(base.wrapping_add(end - 1));
    }

    /// Build-input index of node `j` of the leaf block at `off` with `m` nodes
    /// (`width` ids with the padding).
    #[inline(always)]
    pub(super) fn leaf_index(&self, off: usize, m: usize, width: usize, j: usize) -> usize {
        let base = off + self.index_words(m, width).0;
        (self.blocks[base + j / 2] >> (32 * (j & 1))) as u32 as usize
    }

    /// Position in its leaf of the weighted winner of the leaf block at `off` with
    /// `m > 0` nodes, leaving out the positions `j` for which `skip(j)` holds (at
    /// least one must stay); exactly `weighted::argmin` over the nodes it keeps.
    ///
    /// The logarithm is the expensive part (a long latency chain), so it is taken only
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
    pub(super) fn weighted_pick(
        &self,
        off: usize,
        m: usize,
        tk: u64,
        skip: impl Fn(usize) -> bool,
    ) -> usize {
        const LOG2_E: f64 = std::f64::consts::LOG2_E;
        let bounds = |j: usize| -> (u64, f64, f64) {
            work::count(2 * cost::SCORE);
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
            work::count(cost::WEIGHTED_SCORE);
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
    pub(super) fn unweighted_pick(
        &self,
        off: usize,
        m: usize,
        tk: u64,
        skip: impl Fn(usize) -> bool,
    ) -> usize {
        let ids = &self.blocks[off..off + m];
        scan::first_lowest(
            m,
            |j| !skip(j),
            |j| {
                work::count(cost::SCORE);
                !n3::score_prepared(tk, ids[j])
            },
        )
        .unwrap_or(0)
    }
}
