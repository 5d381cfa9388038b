//! Weighted rendezvous by the logarithmic method, with exact comparisons.
//!
//! A node of weight `w` draws `u` uniform in (0, 1] from its N3 score and gets the
//! cost `-log2(u) / w`; the lowest cost wins, so a node wins with probability
//! w / Σw (a cost is exponential with rate proportional to `w`). The contract is
//! docs/HASHING.md §3; in short:
//!
//! * `-log2(u)` comes from [`neg_log2_uniform`], a fixed sequence of IEEE-754 basic
//!   operations on non-negative values, each monotone in its operands. So it is
//!   bit-identical on every platform and **never rises** as the score grows:
//!   with equal weights the lowest cost is the highest score, by construction.
//! * The weight is split exactly as `w = m·2^e` with `1 <= m < 2` ([`Weight`]); the
//!   cost is `q·2^-e` with `q = c / m` (one division), kept as the integer
//!   [`Weight::key`] whose order is the exact order of the real costs. No cost ever
//!   overflows, underflows or rounds across weights: any weight from the smallest
//!   positive double to 2^53 competes exactly, and multiplying every weight by the
//!   same power of two changes nothing.
//! * Equal costs go to the higher raw score (distinct ids never tie on both).

/// `2 / ln 2`, the binary64 nearest (bits `0x40071547652b82fe`).
const TWO_OVER_LN2: f64 = 2.885_390_081_777_926_8;

/// The largest weight: 2^53 (every integer up to it is exact in binary64).
pub const MAX_WEIGHT: f64 = 9_007_199_254_740_992.0;

/// The 53-bit uniform's numerator: `u = n / 2^53`, `n = floor(score / 2^11) + 1`.
#[inline(always)]
pub fn uniform_numerator(score: u64) -> u64 {
    (score >> 11) + 1
}

/// `-log2(n / 2^53)` for `n` in `[1, 2^53]` (so in `[0, 53]`), from basic
/// operations only; non-increasing in `n` by construction (docs/HASHING.md §3).
///
/// `n = m·2^e` with `m` in `[1, 2)` (exact); `log2 m = (2 / ln 2)·atanh(s)` with
/// `s = (m - 1) / (m + 1)` in `[0, 1/3)`, the odd series to `s^21` by Horner's rule
/// (it falls short of `log2 m` by less than 1.6e-12), capped at 1; the result is `(53 - e) - log2 m`.
/// Every operation has non-negative operands and is monotone in them, so the
/// computed `log2 m` never falls as `m` grows, and the cap keeps each binade's
/// costs at or above the next one's (whose largest value is the integer `53 - e - 1`).
#[inline]
pub fn neg_log2_uniform(n: u64) -> f64 {
    debug_assert!((1..=1 << 53).contains(&n));
    let e = 63 - n.leading_zeros();
    let m = n as f64 / (1u64 << e) as f64;
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    let mut p = 1.0 / 21.0;
    for d in [19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0] {
        p = p * z + 1.0 / d;
    }
    let log2m = (s * p * TWO_OVER_LN2).min(1.0);
    f64::from(53 - e) - log2m
}

/// A weight split exactly as `m·2^e` (`1 <= m < 2`), ready for cost keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weight {
    /// `m` in `[1, 2)`.
    pub m: f64,
    /// `(53 - e) << 52`, added to the bits of `c / m` to scale it by `2^-e`.
    pub shift: u64,
}

impl Weight {
    /// Splits a valid weight (see [`valid_weight`]; others give a meaningless split).
    pub fn new(w: f64) -> Weight {
        let bits = w.to_bits();
        let field = (bits >> 52) & 0x7ff;
        let frac = bits & ((1 << 52) - 1);
        let (m, e) = if field == 0 {
            // Subnormal: w = frac·2^-1074, frac < 2^52 exact in binary64.
            let top = 63 - frac.max(1).leading_zeros();
            (frac as f64 / (1u64 << top) as f64, top as i64 - 1074)
        } else {
            (f64::from_bits(frac | 0x3ff << 52), field as i64 - 1023)
        };
        Weight {
            m,
            shift: ((53 - e.min(53)) as u64) << 52,
        }
    }

    /// The exact order key of the cost `c / w` for `c = neg_log2_uniform(n)`: lower
    /// keys are lower costs, equal keys equal costs. `0` for a zero cost, otherwise
    /// the bits of `q = c / m` (a normal double below 106) plus `shift`.
    #[inline(always)]
    pub fn key(&self, c: f64) -> u64 {
        let q = c / self.m;
        if q == 0.0 {
            0
        } else {
            q.to_bits() + self.shift
        }
    }

    /// `m` and `shift` in one word: `m`'s 52 fraction bits, `53 - e` above them
    /// (`m`'s exponent field is always 1023, so nothing is lost).
    pub fn pack(&self) -> u64 {
        (self.m.to_bits() & ((1 << 52) - 1)) | self.shift
    }

    /// The inverse of [`Weight::pack`].
    #[inline(always)]
    pub fn unpack(word: u64) -> Weight {
        Weight {
            m: f64::from_bits((word & ((1 << 52) - 1)) | 0x3ff << 52),
            shift: word & !((1 << 52) - 1),
        }
    }
}

/// A weighted candidate's standing: the lower cost key wins, then the higher raw
/// score. [`Standing::rank`] packs both into one integer (lower wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Standing {
    pub key: u64,
    pub score: u64,
}

impl Standing {
    #[inline(always)]
    pub fn new(score: u64, weight: Weight) -> Standing {
        Standing {
            key: weight.key(neg_log2_uniform(uniform_numerator(score))),
            score,
        }
    }

    /// `key·2^64 + (2^64 - 1 - score)`: the lowest rank wins.
    #[inline(always)]
    pub fn rank(&self) -> u128 {
        u128::from(self.key) << 64 | u128::from(!self.score)
    }

    /// Whether `self` beats `other`.
    #[inline(always)]
    pub fn beats(&self, other: &Standing) -> bool {
        self.rank() < other.rank()
    }
}

/// Whether `weight` is usable: finite, > 0 and at most 2^53.
pub fn valid_weight(weight: f64) -> bool {
    weight.is_finite() && weight > 0.0 && weight <= MAX_WEIGHT
}

/// Index of the weighted owner among `(node id, weight)` for the prepared key `k`
/// (`n3::prep(key)`), or `None` when empty. Equal standings keep the first index.
pub fn argmin(nodes: &[(u64, f64)], k: u64) -> Option<usize> {
    crate::scan::first_lowest(
        nodes.len(),
        |_| true,
        |i| Standing::new(crate::n3::score(k, nodes[i].0), Weight::new(nodes[i].1)).rank(),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::n3;

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A weight log-uniform over the whole valid range: 5e-324 ..= 2^53.
    fn wide_weight(s: &mut u64) -> f64 {
        let x = splitmix(s);
        match x % 8 {
            0 => f64::from_bits(1 + (x >> 8) % 64), // the smallest subnormals
            1 => MAX_WEIGHT,
            2 => ((x >> 8) % 1000 + 1) as f64,
            _ => {
                // Any bit pattern between the smallest positive double and 2^53.
                let lo = 1u64;
                let hi = MAX_WEIGHT.to_bits();
                f64::from_bits(lo + (x >> 3) % (hi - lo + 1))
            }
        }
    }

    #[test]
    fn the_constant_is_two_over_ln2() {
        assert_eq!(TWO_OVER_LN2.to_bits(), 0x4007_1547_652b_82fe);
    }

    #[test]
    fn close_to_the_true_logarithm() {
        // std's log2 is only a yardstick here: it is not what decides placements.
        let mut s = 1u64;
        let mut ns: Vec<u64> = vec![1, 2, 3, 7, 1000, 123_456_789, (1 << 53) - 1, 1 << 53];
        ns.extend((0..10_000).map(|_| 1 + splitmix(&mut s) % (1 << 53)));
        for n in ns {
            let ours = neg_log2_uniform(n);
            let exact = 53.0 - (n as f64).log2();
            assert!((ours - exact).abs() <= 1.6e-12, "{n}: {ours} vs {exact}");
        }
        assert_eq!(neg_log2_uniform(1 << 53), 0.0);
        assert_eq!(neg_log2_uniform(1), 53.0);
    }

    #[test]
    fn never_rises_across_binades_and_within_them() {
        // Every binade's first and last 4096 numerators, the pair across 2^50·√2
        // (where an argument reduction that switches there would break
        // monotonicity), and random runs.
        let mut starts: Vec<u64> = Vec::new();
        for e in 0..=53u32 {
            let b = 1u64 << e;
            starts.push(b.saturating_sub(4096).max(1));
            starts.push(b);
            starts.push((b as f64 * std::f64::consts::SQRT_2) as u64 - 2048);
        }
        starts.push(1_592_262_918_131_443 - 2048);
        let mut s = 7u64;
        starts.extend((0..200).map(|_| 1 + splitmix(&mut s) % ((1 << 53) - 8192)));
        for start in starts {
            let mut prev = neg_log2_uniform(start);
            for n in start + 1..(start + 8192).min((1 << 53) + 1) {
                let c = neg_log2_uniform(n);
                assert!(c <= prev, "cost rises from n = {} to {n}", n - 1);
                prev = c;
            }
        }
    }

    #[test]
    fn weights_split_exactly() {
        let mut s = 3u64;
        for _ in 0..100_000 {
            let w = wide_weight(&mut s);
            let p = Weight::new(w);
            assert!((1.0..2.0).contains(&p.m), "{w:e}");
            let e = 53 - (p.shift >> 52) as i32;
            // m·2^e, rebuilt in two exact steps (2^e alone may not be a double).
            let half = e / 2;
            let back = p.m * 2f64.powi(half) * 2f64.powi(e - half);
            assert_eq!(back, w, "{w:e}");
            assert_eq!(Weight::unpack(p.pack()), p);
        }
        assert_eq!(
            Weight::new(5e-324),
            Weight {
                m: 1.0,
                shift: 1127 << 52
            }
        );
        assert_eq!(Weight::new(MAX_WEIGHT), Weight { m: 1.0, shift: 0 });
    }

    #[test]
    fn keys_order_costs_exactly() {
        // Where c / w is a normal double the key must order like it; everywhere,
        // scaling all weights by a power of two must not change any comparison.
        let mut s = 11u64;
        for _ in 0..200_000 {
            let (sa, sb) = (splitmix(&mut s), splitmix(&mut s));
            let ca = neg_log2_uniform(uniform_numerator(sa));
            let cb = neg_log2_uniform(uniform_numerator(sb));
            let wa = ((splitmix(&mut s) % 5000) as f64 + 1.0) / 64.0;
            let wb = ((splitmix(&mut s) % 5000) as f64 + 1.0) / 64.0;
            let (ka, kb) = (Weight::new(wa).key(ca), Weight::new(wb).key(cb));
            // fl(c / (m·2^e)) = fl(c / m)·2^-e while nothing leaves the normal range.
            let (ra, rb) = (ca / wa, cb / wb);
            assert_eq!(
                ka.cmp(&kb),
                ra.partial_cmp(&rb).unwrap(),
                "{ca}/{wa} vs {cb}/{wb}"
            );
            for scale in [-1070, -500, -3, 1, 40] {
                let f = 2f64.powi(scale);
                let (xa, xb) = (wa * f, wb * f);
                if valid_weight(xa) && valid_weight(xb) && xa / f == wa && xb / f == wb {
                    assert_eq!(
                        Weight::new(xa).key(ca).cmp(&Weight::new(xb).key(cb)),
                        ka.cmp(&kb)
                    );
                }
            }
        }
    }

    #[test]
    fn pinned_costs() {
        // Cost keys pinned so any platform or refactor that changes them fails.
        for &(score, weight, key) in crate::vectors::WEIGHTED_VECTORS {
            let st = Standing::new(score, Weight::new(weight));
            assert_eq!(st.key, key, "score {score:#x} weight {weight:e}");
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
        assert_eq!(owners, crate::vectors::WEIGHTED_OWNERS);
    }

    #[test]
    fn equal_weights_pick_the_unweighted_owner() {
        let nodes: Vec<u64> = (0..50u64)
            .map(|i| i.wrapping_mul(0x9e3779b97f4a7c15))
            .collect();
        for w in [3.0, 5e-324, 1e-300, 0.1, MAX_WEIGHT] {
            let weighted: Vec<(u64, f64)> = nodes.iter().map(|&id| (id, w)).collect();
            for key in 0..5000u64 {
                let k = n3::prep(key);
                let flat = (0..nodes.len())
                    .max_by_key(|&i| n3::score(k, nodes[i]))
                    .unwrap();
                assert_eq!(argmin(&weighted, k), Some(flat), "weight {w:e}");
            }
        }
    }

    /// Shares of 1M keys over `weights`: each within 1% of w / Σw.
    pub(crate) fn assert_shares(
        weights: &[f64],
        owner: impl Fn(u64) -> usize,
        keys: u64,
        what: &str,
    ) {
        // Σw exactly enough: the weights of one set are within 2^10 of each other.
        let total: f64 = weights.iter().sum();
        let mut counts = vec![0u64; weights.len()];
        for key in 0..keys {
            counts[owner(key.wrapping_mul(0x9e37_79b9_7f4a_7c15))] += 1;
        }
        for (i, &w) in weights.iter().enumerate() {
            let share = counts[i] as f64 / keys as f64;
            let expected = w / total;
            assert!(
                (share - expected).abs() / expected < 0.01,
                "{what}: node {i} of weight {w:e}: {share} vs {expected}"
            );
        }
    }

    /// Weight sets whose shares are all >= 10%, scaled across the whole range.
    pub(crate) fn share_sets() -> Vec<Vec<f64>> {
        let base = [1.0, 2.0, 3.0, 4.0];
        let mut sets: Vec<Vec<f64>> = [5e-324, 1e-310, 1e-300, 1e-150, 1e-10, 1.0, 1e10]
            .iter()
            .map(|&f| base.iter().map(|b| b * f).collect())
            .collect();
        sets.push(base.iter().map(|b| b * 2f64.powi(50)).collect());
        sets.push(vec![MAX_WEIGHT, MAX_WEIGHT / 2.0, MAX_WEIGHT / 3.0]);
        sets.push(vec![1.5e-323, 5e-324, 1e-323]);
        sets
    }

    #[test]
    fn shares_follow_weights_across_the_range() {
        for ws in share_sets() {
            let nodes: Vec<(u64, f64)> = ws
                .iter()
                .enumerate()
                .map(|(i, &w)| (n3::prep(i as u64 + 1000), w))
                .collect();
            assert_shares(
                &ws,
                |key| argmin(&nodes, n3::prep(key)).unwrap(),
                1_000_000,
                &format!("{ws:?}"),
            );
        }
    }

    #[test]
    fn extreme_weights_compete_exactly() {
        // The heaviest node always beats one 2^1100 times lighter; neither cost is
        // infinite or zero, and the order among the light ones still follows them.
        let nodes = [(1u64, MAX_WEIGHT), (2, 5e-324), (3, 1e-323)];
        let mut s = 5u64;
        for _ in 0..10_000 {
            let k = n3::prep(splitmix(&mut s));
            assert_eq!(argmin(&nodes, k), Some(0));
            let light: Vec<Standing> = nodes[1..]
                .iter()
                .map(|&(id, w)| Standing::new(n3::score(k, id), Weight::new(w)))
                .collect();
            assert!(light.iter().all(|st| st.key > 0 && st.key < u64::MAX));
        }
    }
}
