//! Building a skeleton: routing keys, the breadth-first trie with its fillers, leaf
//! blocks, weight sums and thresholds (docs/HASHING.md §4); and its work bound.

use super::coins::threshold;
use super::layout::{Entry, Skeleton, LEAF};
use crate::n3;
use crate::scan;
use crate::weighted::Weight;
use crate::{cost, work};

/// How many ids an unweighted leaf of `m` nodes scans (`m` plus padding). With a
/// SIMD scan backend, leaves of the usual sizes are padded to one fixed multiple of
/// 8 lanes: no scalar remainder, and the same trip count on every lookup. The
/// portable scan gains
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

/// `v` again, in a buffer that Linux is asked to back with transparent huge pages
/// when it spans at least two of them (4 MiB; smaller vectors come back as they
/// are). At 1M nodes a lookup reads a random trie path out of ~3 MB and a random
/// leaf block out of ~16 MB: with 4 KiB pages most of those reads also miss the
/// TLB, which huge pages spare; the copy is small next to such a build. Only a
/// hint: no value changes, failure is ignored.
fn on_huge_pages<T: Copy>(v: Vec<T>) -> Vec<T> {
    const HUGE: usize = 2 << 20;
    let bytes = std::mem::size_of_val(v.as_slice());
    if !cfg!(target_os = "linux") || bytes < 2 * HUGE {
        return v;
    }
    let mut fresh: Vec<T> = Vec::with_capacity(v.len());
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn madvise(
                addr: *mut core::ffi::c_void,
                len: usize,
                advice: core::ffi::c_int,
            ) -> core::ffi::c_int;
        }
        const MADV_HUGEPAGE: core::ffi::c_int = 14;
        // The whole huge pages inside the new, still untouched, buffer.
        let start = (fresh.as_ptr() as usize).next_multiple_of(HUGE);
        let end = (fresh.as_ptr() as usize + bytes) & !(HUGE - 1);
        if start < end {
            // SAFETY: the range lies inside an allocation we own (`fresh`'s buffer,
            // `bytes` long), starts page-aligned, and MADV_HUGEPAGE only changes how
            // the kernel backs those pages: it reads and writes none of our memory,
            // and an error (e.g. THP disabled) leaves everything as it was.
            unsafe {
                madvise(start as *mut core::ffi::c_void, end - start, MADV_HUGEPAGE);
            }
        }
    }
    fresh.extend_from_slice(&v);
    fresh
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
        work::count(cost::skeleton_build(nodes.len()));
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
            entries: on_huge_pages(entries),
            root_bit,
            levels,
            blocks: on_huge_pages(blocks),
            span,
            mass,
            weights: if weighted { weights } else { Vec::new() },
            linear: nodes.iter().map(|&(id, _)| n3::linear(id)).collect(),
            weighted,
            len: n,
            depth,
            max_leaf,
            max_width,
        }
    }
}
