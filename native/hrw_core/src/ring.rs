//! The exact prepared ring: every distinct node scored per lookup, with `T(node)`
//! computed once at build. Same owners as the stateless list path, by construction.

use crate::nodes::uniform_weights;
use crate::weighted::{Standing, Weight};
use crate::{cost, n3, scan, work};

/// Immutable after build; shared by all threads without locks.
pub struct Ring {
    /// `n3::linear(id)` of each node: what the scans read.
    prepared: Vec<u64>,
    /// Weights split for cost keys, or `None` when every weight is equal (plain N3
    /// then decides, which is the same owner: docs/HASHING.md §3).
    weights: Option<Vec<Weight>>,
}

impl Ring {
    /// Builds from distinct `(id, weight)` pairs (see `nodes::distinct`).
    pub fn new(nodes: &[(u64, f64)]) -> Ring {
        work::count(cost::ring_build(nodes.len()));
        Ring {
            prepared: nodes.iter().map(|&(id, _)| n3::linear(id)).collect(),
            weights: (!uniform_weights(nodes))
                .then(|| nodes.iter().map(|n| Weight::new(n.1)).collect()),
        }
    }

    pub fn len(&self) -> usize {
        self.prepared.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prepared.is_empty()
    }

    /// Whether lookups use weighted costs (some weights differ).
    pub fn is_weighted(&self) -> bool {
        self.weights.is_some()
    }

    /// Whether the node at index `index` has the id `id` (the ring keeps
    /// `n3::linear` of each id, a bijection: equal words, equal ids).
    pub fn holds(&self, index: usize, id: u64) -> bool {
        work::count(cost::RING_HOLDS);
        self.prepared.get(index) == Some(&n3::linear(id))
    }

    /// Work units of one [`Ring::owner`], an upper bound ([`cost::ring_owner`]).
    pub fn owner_cost(&self) -> u64 {
        cost::ring_owner(self.len(), self.is_weighted())
    }

    /// Work units of one [`Ring::owners`] (any count), an upper bound
    /// ([`cost::ring_owners`]).
    pub fn owners_cost(&self) -> u64 {
        cost::ring_owners(self.len(), self.is_weighted())
    }

    /// Index of the owner of `key` (a key id), `None` for an empty ring.
    pub fn owner(&self, key: u64) -> Option<usize> {
        let tk = n3::prepared_key(key);
        match &self.weights {
            None => scan::argmax(&self.prepared, tk),
            Some(weights) => {
                work::count(cost::WEIGHTED_SCORE * weights.len() as u64);
                // The lowest rank (cost key, then the higher score) wins; equal
                // ranks would need equal ids, and keep the first index.
                let n = self.prepared.len().min(weights.len());
                let prepared = &self.prepared[..n];
                scan::first_lowest(
                    n,
                    |_| true,
                    |i| Standing::new(n3::score_prepared(tk, prepared[i]), weights[i]).rank(),
                )
            }
        }
    }

    /// Indices of the `count` best nodes for `key`, best first.
    pub fn owners(&self, key: u64, count: usize) -> Vec<usize> {
        let tk = n3::prepared_key(key);
        match &self.weights {
            None => scan::top(&self.prepared, tk, count),
            Some(weights) => {
                work::count((cost::WEIGHTED_SCORE + cost::ELEMENT) * weights.len() as u64);
                let mut all: Vec<(u128, usize)> = self
                    .prepared
                    .iter()
                    .zip(weights)
                    .enumerate()
                    .map(|(i, (&tn, &w))| (Standing::new(n3::score_prepared(tk, tn), w).rank(), i))
                    .collect();
                work::count(cost::sort(all.len()));
                all.sort_unstable();
                all.into_iter().take(count).map(|(_, i)| i).collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weighted;

    fn ids(n: u64) -> Vec<(u64, f64)> {
        (0..n)
            .map(|i| (i.wrapping_mul(0x9e3779b97f4a7c15) ^ 0x55, 1.0))
            .collect()
    }

    #[test]
    fn holds_each_id_at_its_index_only() {
        let nodes = ids(300);
        let ring = Ring::new(&nodes);
        for (i, &(id, _)) in nodes.iter().enumerate() {
            assert!(ring.holds(i, id));
            assert!(!ring.holds((i + 1) % nodes.len(), id));
            assert!(!ring.holds(i, id ^ 1));
        }
        assert!(!ring.holds(300, nodes[0].0));
    }

    #[test]
    fn owner_is_the_flat_argmax() {
        let nodes = ids(300);
        let ring = Ring::new(&nodes);
        for key in 0..3000u64 {
            let k = n3::prep(key);
            let flat = (0..nodes.len())
                .max_by_key(|&i| n3::score(k, nodes[i].0))
                .unwrap();
            assert_eq!(ring.owner(key), Some(flat));
            assert_eq!(ring.owners(key, 3)[0], flat);
        }
    }

    #[test]
    fn weighted_owner_is_the_flat_weighted_argmin() {
        let nodes: Vec<(u64, f64)> = ids(40)
            .into_iter()
            .enumerate()
            .map(|(i, (id, _))| (id, 1.0 + i as f64 * 0.5))
            .collect();
        let ring = Ring::new(&nodes);
        for key in 0..3000u64 {
            let flat = weighted::argmin(&nodes, n3::prep(key));
            assert_eq!(ring.owner(key), flat);
            assert_eq!(ring.owners(key, 5).first().copied(), flat);
        }
    }

    #[test]
    fn owners_are_distinct_and_ordered() {
        let ring = Ring::new(&ids(50));
        for key in 0..500u64 {
            let top = ring.owners(key, 50);
            let mut sorted = top.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 50);
        }
    }
}
