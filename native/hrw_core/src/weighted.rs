//! Weighted rendezvous by the logarithmic method, without libm.
//!
//! A node of weight `w` draws `u` uniform in (0, 1] from its N3 score and gets the
//! cost `-ln(u) / w`; the lowest cost wins, so a node wins with probability w / Σw.
//! `ln` is computed here from IEEE-754 basic operations only (+, -, *, /, exact
//! exponent extraction), which every conforming platform rounds identically, so a
//! weighted owner is bit-identical everywhere (contract: docs/HASHING.md).
//! Equal costs are broken by the higher raw score, so equal weights pick exactly
//! the unweighted owner.

const LN2: f64 = core::f64::consts::LN_2;
const SQRT2: f64 = core::f64::consts::SQRT_2;

/// Natural log of an integer `n` in [1, 2^53], from basic operations only.
fn ln_int(n: u64) -> f64 {
    debug_assert!((1..=1 << 53).contains(&n));
    // n = m * 2^e with m in [1, 2): both exact in f64.
    let e = 63 - n.leading_zeros() as i32;
    let mut m = n as f64 / (1u64 << e) as f64;
    let mut e = e as f64;
    if m > SQRT2 {
        m *= 0.5;
        e += 1.0;
    }
    // ln(m) = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716: the odd series to s^21 is
    // accurate to ~1e-17 relative.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut poly = 1.0 / 21.0;
    for d in [19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0] {
        poly = poly * s2 + 1.0 / d;
    }
    e * LN2 + 2.0 * s * poly
}

/// `-ln(u)` for the uniform `u = (top53(score) + 1) / 2^53` in (0, 1].
#[inline]
pub fn neg_ln_uniform(score: u64) -> f64 {
    53.0 * LN2 - ln_int((score >> 11) + 1)
}

/// A weighted candidate's standing: lower cost wins, then the higher raw score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Standing {
    pub cost: f64,
    pub score: u64,
}

impl Standing {
    #[inline]
    pub fn new(score: u64, weight: f64) -> Standing {
        Standing {
            cost: neg_ln_uniform(score) / weight,
            score,
        }
    }

    /// Whether `self` beats `other`.
    #[inline]
    pub fn beats(&self, other: &Standing) -> bool {
        self.cost < other.cost || (self.cost == other.cost && self.score > other.score)
    }
}

/// Whether `weight` is usable: finite and > 0.
pub fn valid_weight(weight: f64) -> bool {
    weight.is_finite() && weight > 0.0
}

/// Index of the weighted owner among `(node id, weight)` for the prepared key `k`
/// (`n3::prep(key)`), or `None` when empty. Equal standings keep the first index.
pub fn argmin(nodes: &[(u64, f64)], k: u64) -> Option<usize> {
    let mut best: Option<(Standing, usize)> = None;
    for (i, &(id, w)) in nodes.iter().enumerate() {
        let st = Standing::new(crate::n3::score(k, id), w);
        if best.as_ref().is_none_or(|(b, _)| st.beats(b)) {
            best = Some((st, i));
        }
    }
    best.map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::n3;

    #[test]
    fn ln_matches_std_closely() {
        // std's ln is only a yardstick here: it is not what decides placements.
        for n in [1u64, 2, 3, 7, 1000, 123_456_789, (1 << 53) - 1, 1 << 53] {
            let ours = ln_int(n);
            let std = (n as f64).ln();
            assert!(
                (ours - std).abs() <= 4.0 * f64::EPSILON * std.max(1.0),
                "{n}: {ours} vs {std}"
            );
        }
    }

    #[test]
    fn pinned_costs() {
        // Bit patterns pinned so any platform or refactor that changes them fails.
        for &(score, weight, bits) in crate::vectors::WEIGHTED_VECTORS {
            let st = Standing::new(score, weight);
            assert_eq!(st.cost.to_bits(), bits, "score {score:#x} weight {weight}");
        }
    }

    #[test]
    fn pinned_weighted_owners() {
        // docs/reference.py: owners of "key-1".."key-20" over these weighted nodes.
        let names = ["a", "b", "c", "d", "e"];
        let weights = [1.0, 2.0, 3.0, 10.0, 0.5];
        let nodes: Vec<(u64, f64)> = names
            .iter()
            .zip(weights)
            .map(|(n, w)| (crate::term_hash::binary(n.as_bytes()), w))
            .collect();
        let owners: String = (1..=20)
            .map(|i| {
                let key = crate::term_hash::binary(format!("key-{i}").as_bytes());
                names[argmin(&nodes, n3::prep(key)).unwrap()]
            })
            .collect();
        assert_eq!(owners, "ddddddddbdccdedddcdd");
    }

    #[test]
    fn equal_weights_pick_the_unweighted_owner() {
        let nodes: Vec<u64> = (0..50u64)
            .map(|i| i.wrapping_mul(0x9e3779b97f4a7c15))
            .collect();
        let weighted: Vec<(u64, f64)> = nodes.iter().map(|&id| (id, 3.0)).collect();
        for key in 0..5000u64 {
            let k = n3::prep(key);
            let flat = (0..nodes.len())
                .max_by_key(|&i| n3::score(k, nodes[i]))
                .unwrap();
            assert_eq!(argmin(&weighted, k), Some(flat));
        }
    }

    #[test]
    fn shares_follow_weights() {
        let nodes = [(11u64, 1.0), (22, 2.0), (33, 3.0), (44, 10.0)];
        let total: f64 = nodes.iter().map(|n| n.1).sum();
        let mut counts = [0usize; 4];
        let keys = 400_000u64;
        for key in 0..keys {
            counts[argmin(&nodes, n3::prep(key)).unwrap()] += 1;
        }
        for (i, &(_, w)) in nodes.iter().enumerate() {
            let share = counts[i] as f64 / keys as f64;
            let expected = w / total;
            assert!(
                (share - expected).abs() / expected < 0.02,
                "node {i}: {share} vs {expected}"
            );
        }
    }
}
