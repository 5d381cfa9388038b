//! Node sets as the prepared structures see them: distinct ids with weights.

use std::collections::HashMap;

/// The distinct nodes of an input list.
pub struct Distinct {
    /// For each distinct node, the position of its first occurrence in the input.
    pub positions: Vec<usize>,
    /// `(id, weight)` of each distinct node, in first-occurrence order. A repeated id
    /// keeps its largest weight, which is the entry that wins in a plain scan.
    pub nodes: Vec<(u64, f64)>,
}

/// Work units of [`distinct`] over `n` pairs: a hash-map probe and insert each
/// (SipHash of a u64 and a possible table growth: ~20-40 ns).
pub const fn distinct_cost(n: usize) -> u64 {
    24 * crate::work::ELEMENT * n as u64
}

/// Work units of [`fingerprint`] over `n` nodes and `params` parameters.
pub const fn fingerprint_cost(n: usize, params: usize) -> u64 {
    let words = 2 + 2 * n + params;
    crate::work::ELEMENT * words as u64 + crate::work::bytes(8 * words)
}

/// Deduplicates `(id, weight)` pairs by id.
pub fn distinct(input: &[(u64, f64)]) -> Distinct {
    crate::work::count(distinct_cost(input.len()));
    let mut slot: HashMap<u64, usize> = HashMap::with_capacity(input.len());
    let mut out = Distinct {
        positions: Vec::with_capacity(input.len()),
        nodes: Vec::with_capacity(input.len()),
    };
    for (pos, &(id, weight)) in input.iter().enumerate() {
        match slot.get(&id) {
            Some(&i) => {
                if weight > out.nodes[i].1 {
                    out.nodes[i].1 = weight;
                }
            }
            None => {
                slot.insert(id, out.nodes.len());
                out.positions.push(pos);
                out.nodes.push((id, weight));
            }
        }
    }
    out
}

/// Whether every weight equals the first (an unweighted set, in effect).
pub fn uniform_weights(nodes: &[(u64, f64)]) -> bool {
    nodes.windows(2).all(|w| w[0].1 == w[1].1)
}

/// A fingerprint of a node set in a given order and structure kind: equal inputs
/// give equal fingerprints on every machine (used to cache rebuilt structures).
pub fn fingerprint(kind: u64, nodes: &[(u64, f64)], params: &[u64]) -> u64 {
    crate::work::count(fingerprint_cost(nodes.len(), params.len()));
    let mut words = Vec::with_capacity(2 + 2 * nodes.len() + params.len());
    words.push(kind);
    words.extend_from_slice(params);
    for &(id, w) in nodes {
        words.push(id);
        words.push(w.to_bits());
    }
    crate::term_hash::tuple(&words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_first_position_and_largest_weight() {
        let d = distinct(&[(7, 1.0), (9, 2.0), (7, 5.0), (9, 1.0), (3, 1.0)]);
        assert_eq!(d.positions, vec![0, 1, 4]);
        assert_eq!(d.nodes, vec![(7, 5.0), (9, 2.0), (3, 1.0)]);
    }
}
