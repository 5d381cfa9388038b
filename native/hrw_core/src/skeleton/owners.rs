//! Replicas (`owners`): ranks drawn one after another with the nodes already picked
//! taken out of every weight sum and count on the way (docs/HASHING.md §4), and
//! their work bound.

use super::coins::{coin, seed_of, threshold};
use super::layout::Skeleton;
use crate::n3;
use crate::{cost, work};

impl Skeleton {
    /// Work units of one [`Skeleton::owners`] with `count` ranks, an upper bound
    /// ([`cost::skeleton_owners`]).
    pub fn owners_cost(&self, count: usize) -> u64 {
        let ranks = count.min(self.len);
        cost::skeleton_owners(&self.shape(), ranks, Taken::is_dense(ranks))
    }

    /// The `count` best distinct nodes for `key` (indices into the `nodes` given to
    /// build), best first, `min(count, len)` of them; the first is [`Skeleton::owner`].
    ///
    /// Rank `i` descends with its own coin seed, with the nodes of ranks `< i` removed
    /// from every weight sum and count it meets and skipped in its leaf (module docs).
    /// Deterministic, and each rank moves under churn about as rarely as the owner.
    pub fn owners(&self, key: u64, count: usize) -> Vec<usize> {
        let count = count.min(self.len);
        work::count(cost::ELEMENT * count as u64);
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
            work::count(cost::LEVEL);
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
pub(super) struct Taken {
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

    /// Whether `count` ranks keep per-slot tables.
    fn is_dense(count: usize) -> bool {
        count >= Taken::DENSE_FROM
    }

    fn new(sk: &Skeleton, count: usize) -> Taken {
        let dense = Taken::is_dense(count);
        if dense {
            work::count(cost::ELEMENT * (sk.entries.len() + sk.len) as u64);
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
        work::count(cost::ELEMENT * self.probe_len());
        if self.positions.is_empty() {
            self.list.iter().any(|&(p, _)| p == pos)
        } else {
            self.positions[pos]
        }
    }

    /// Count and weight taken out of `slot`'s subtree.
    fn removed(&self, sk: &Skeleton, slot: usize) -> (usize, f64) {
        work::count(cost::ELEMENT * self.probe_len());
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
            cost::ELEMENT
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
