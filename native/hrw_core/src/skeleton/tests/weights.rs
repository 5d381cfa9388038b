//! Weighted skeletons: shares, fairness, duplicates, the whole range of weights.

use super::*;

/// Nodes `i * 77 + 5` weighing `ws[i]`.
fn nodes_weighing(ws: &[f64]) -> Vec<(u64, f64)> {
    ws.iter()
        .enumerate()
        .map(|(i, &w)| (i as u64 * 77 + 5, w))
        .collect()
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
    let nodes = nodes_weighing(&ws);
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
    // Weights below ~1e-290 can overflow the leaf bounds; owners/3 must still
    // never return a leaf node twice.
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
        let nodes = nodes_weighing(&ws);
        for leaf in [1, 16] {
            let sk = Skeleton::build(&nodes, leaf);
            weighted::tests::assert_shares(&ws, |k| sk.owner(k), 1_000_000, &format!("{ws:?}"));
        }
        let ring = crate::ring::Ring::new(&nodes);
        weighted::tests::assert_shares(&ws, |k| ring.owner(k).unwrap(), 1_000_000, "ring");
    }
}
