//! Unit and statistical tests of the skeleton (placements, fairness, churn, replicas,
//! weights, pinned owners).

use super::*;
use crate::scan;
use crate::weighted;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn random_nodes(n: usize, seed: u64) -> Vec<(u64, f64)> {
    let mut s = seed;
    (0..n).map(|_| (splitmix(&mut s), 1.0)).collect()
}

/// The three namings the balance suite uses: random, sequential, `i << 32`.
fn namings(n: usize) -> Vec<(&'static str, Vec<(u64, f64)>)> {
    vec![
        ("random", random_nodes(n, n as u64)),
        ("sequential", (0..n as u64).map(|i| (i, 1.0)).collect()),
        ("i<<32", (0..n as u64).map(|i| (i << 32, 1.0)).collect()),
    ]
}

fn flat_owner(nodes: &[(u64, f64)], key: u64) -> usize {
    let k = n3::prep(key);
    let mut best = 0;
    for i in 1..nodes.len() {
        if n3::score(k, nodes[i].0) > n3::score(k, nodes[best].0) {
            best = i;
        }
    }
    best
}

fn chi_square(counts: &[u64], expected: &[f64]) -> f64 {
    counts
        .iter()
        .zip(expected)
        .map(|(&c, &e)| (c as f64 - e).powi(2) / e)
        .sum()
}

fn chi_bound(n: usize) -> f64 {
    let df = (n - 1) as f64;
    df + 8.0 * (2.0 * df).sqrt()
}

/// Owner ids of keys `base..base + keys`.
fn owner_ids(sk: &Skeleton, nodes: &[(u64, f64)], base: u64, keys: u64) -> Vec<u64> {
    (base..base + keys).map(|k| nodes[sk.owner(k)].0).collect()
}

fn moved(a: &[u64], b: &[u64]) -> f64 {
    a.iter().zip(b).filter(|(x, y)| x != y).count() as f64 / a.len() as f64
}

#[test]
fn helpers_match_n3() {
    assert_eq!(SEED_SALT_LINEAR, n3::linear(SEED_SALT));
    assert_eq!(rank_salt(0), SEED_SALT);
    assert_eq!(threshold(1.0, 1.0), 1 << 63);
    assert_eq!(threshold(1.0, 3.0), 1 << 62);
    assert_eq!(threshold(0.0, 1.0), 0);
    assert_eq!(threshold(1.0, 0.0), u64::MAX);
    assert_eq!(threshold(1e300, 1e-300), u64::MAX);
}

#[test]
fn shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Skeleton>();
}

#[test]
fn single_node_leaves_on_structured_ids() {
    // Leaves of one node over ids that share long routing-key prefixes in places:
    // many fillers, paths up to the 64-bit limit; answers agree with the generic
    // owners() descent and stay fair.
    for nodes in [
        (0..300u64).map(|i| (i, 1.0)).collect::<Vec<_>>(),
        (0..300u64).map(|i| (i << 32, 1.0)).collect(),
    ] {
        let sk = Skeleton::build(&nodes, 1);
        assert!(sk.depth() <= 64);
        let mut counts = vec![0u64; nodes.len()];
        for key in 0..60_000u64 {
            let o = sk.owner(key);
            counts[o] += 1;
            if key % 16 == 0 {
                assert_eq!(sk.owners(key, 2)[0], o);
            }
        }
        let e = vec![60_000.0 / nodes.len() as f64; nodes.len()];
        assert!(chi_square(&counts, &e) <= chi_bound(nodes.len()));
    }
}

#[test]
fn empty_and_single_node() {
    let empty = Skeleton::build(&[], DEFAULT_LEAF_SIZE);
    assert!(empty.is_empty());
    assert_eq!((empty.len(), empty.depth()), (0, 0));
    assert_eq!(empty.owner(42), 0);
    assert!(empty.owners(42, 3).is_empty());
    let one = Skeleton::build(&[(7, 2.5)], 1);
    for key in 0..100 {
        assert_eq!(one.owner(key), 0);
        assert_eq!(one.owners(key, 5), vec![0]);
    }
}

#[test]
fn small_sets_give_the_flat_owner() {
    for (n, leaf) in [
        (2, 16),
        (3, 16),
        (7, 16),
        (16, 16),
        (8, 8),
        (1, 1),
        (32, 32),
    ] {
        for (name, nodes) in namings(n) {
            let sk = Skeleton::build(&nodes, leaf);
            assert_eq!(sk.depth(), 0);
            for key in 0..20_000u64 {
                let key = key.wrapping_mul(0x2545_f491_4f6c_dd1d);
                assert_eq!(
                    sk.owner(key),
                    flat_owner(&nodes, key),
                    "{name} n={n} key={key}"
                );
                // No coin in a single leaf: the ranks are the flat top-k.
                if key % 16 == 0 {
                    let prepared: Vec<u64> = nodes.iter().map(|x| n3::linear(x.0)).collect();
                    let top = scan::top(&prepared, n3::prepared_key(key), 4);
                    assert_eq!(sk.owners(key, 4), top, "{name} n={n} key={key}");
                }
            }
        }
    }
}

#[test]
fn small_weighted_sets_give_the_flat_weighted_owner() {
    // Weights over six orders of magnitude also exercise the skipped logarithms.
    let mut s = 5u64;
    for (n, spread) in [(2usize, true), (5, true), (16, true), (16, false)] {
        // Six orders of magnitude, or weights a few ulps apart.
        let nodes: Vec<(u64, f64)> = (0..n)
            .map(|i| {
                let w = if spread {
                    10f64.powi((splitmix(&mut s) % 7) as i32 - 3) * 1.7
                } else {
                    1.0 + i as f64 * f64::EPSILON
                };
                (splitmix(&mut s), w)
            })
            .collect();
        let sk = Skeleton::build(&nodes, 16);
        assert!(sk.is_weighted());
        for key in 0..50_000u64 {
            let flat = weighted::argmin(&nodes, n3::prep(key)).unwrap();
            assert_eq!(sk.owner(key), flat, "n={n} key={key}");
        }
    }
}

#[test]
fn adding_to_a_single_leaf_moves_keys_only_to_the_new_node() {
    let nodes = random_nodes(10, 3);
    let mut grown = nodes.clone();
    grown.push((0xfeed, 1.0));
    let (a, b) = (Skeleton::build(&nodes, 16), Skeleton::build(&grown, 16));
    for key in 0..50_000u64 {
        let (x, y) = (a.owner(key), b.owner(key));
        assert!(x == y || y == 10, "key {key} moved from {x} to {y}");
    }
}

#[test]
fn fair_over_1000_nodes() {
    for (name, nodes) in namings(1000) {
        let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
        for (kname, keys) in [
            ("sequential", (0..100_000u64).collect::<Vec<_>>()),
            ("i<<32", (0..100_000u64).map(|i| i << 32).collect()),
        ] {
            let mut counts = vec![0u64; nodes.len()];
            for &key in &keys {
                counts[sk.owner(key)] += 1;
            }
            let e = vec![keys.len() as f64 / nodes.len() as f64; nodes.len()];
            let chi = chi_square(&counts, &e);
            println!(
                "1000 {name} ids, {kname} keys: chi2 {chi:.0} (bound {:.0})",
                chi_bound(1000)
            );
            assert!(chi <= chi_bound(1000), "{name}/{kname}: chi2 {chi}");
        }
    }
}

#[test]
fn fair_over_10000_nodes() {
    for (name, nodes) in namings(10_000) {
        let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
        let keys = 200_000u64;
        let mut counts = vec![0u64; nodes.len()];
        for key in 0..keys {
            counts[sk.owner(key.wrapping_mul(0x9e37_79b9))] += 1;
        }
        let e = vec![keys as f64 / nodes.len() as f64; nodes.len()];
        let chi = chi_square(&counts, &e);
        println!(
            "10000 {name} ids: chi2 {chi:.0} (bound {:.0})",
            chi_bound(10_000)
        );
        assert!(chi <= chi_bound(10_000), "{name}: chi2 {chi}");
    }
}

#[test]
fn fair_with_tiny_leaves_and_skipped_levels() {
    // Leaves of 1-3 nodes make many levels where all nodes go one way (skipped),
    // which takes the exact slow descent: still fair, still the same answers as
    // the generic owners() path.
    for leaf in [1usize, 2, 3] {
        let nodes = random_nodes(500, 11);
        let sk = Skeleton::build(&nodes, leaf);
        let keys = 100_000u64;
        let mut counts = vec![0u64; nodes.len()];
        for key in 0..keys {
            let o = sk.owner(key);
            counts[o] += 1;
            if key % 8 == 0 {
                assert_eq!(sk.owners(key, 1), vec![o]);
            }
        }
        let e = vec![keys as f64 / nodes.len() as f64; nodes.len()];
        let chi = chi_square(&counts, &e);
        assert!(chi <= chi_bound(nodes.len()), "leaf {leaf}: chi2 {chi}");
    }
}

/// (mean, max) of moved fraction × N over `trials` adds and as many removes.
fn churn(n: usize, trials: usize, keys: u64, leaf: usize, seed: u64) -> [(f64, f64); 2] {
    let mut s = seed ^ 0xabc;
    churn_of(&random_nodes(n, seed), trials, keys, leaf, &mut s, splitmix)
}

/// (mean, max) of moved fraction × N over `trials` joins of the ids `join(s)` names
/// and as many leaves of random members of `nodes` (drawn from `s` after each join).
fn churn_of(
    nodes: &[(u64, f64)],
    trials: usize,
    keys: u64,
    leaf: usize,
    s: &mut u64,
    mut join: impl FnMut(&mut u64) -> u64,
) -> [(f64, f64); 2] {
    let n = nodes.len();
    let before = owner_ids(&Skeleton::build(nodes, leaf), nodes, 0, keys);
    let (mut adds, mut removes) = (Vec::new(), Vec::new());
    for _ in 0..trials {
        let mut grown = nodes.to_vec();
        grown.push((join(s), 1.0));
        let after = owner_ids(&Skeleton::build(&grown, leaf), &grown, 0, keys);
        adds.push(moved(&before, &after) * n as f64);
        let mut shrunk = nodes.to_vec();
        shrunk.remove((splitmix(s) % n as u64) as usize);
        let after = owner_ids(&Skeleton::build(&shrunk, leaf), &shrunk, 0, keys);
        removes.push(moved(&before, &after) * n as f64);
    }
    let stat = |v: &[f64]| {
        (
            v.iter().sum::<f64>() / v.len() as f64,
            v.iter().cloned().fold(0.0, f64::max),
        )
    };
    [stat(&adds), stat(&removes)]
}

#[test]
fn churn_moves_few_keys_on_sequential_names() {
    // A naming the other churn tests do not use: ids 0..N, the next ids joining.
    for n in [1000usize, 10_000] {
        let nodes: Vec<(u64, f64)> = (0..n as u64).map(|i| (i, 1.0)).collect();
        let mut next = n as u64;
        let mut s = 5;
        let [(am, ax), (rm, rx)] = churn_of(&nodes, 10, 100_000, DEFAULT_LEAF_SIZE, &mut s, |_| {
            next += 1;
            next
        });
        println!("N={n} sequential: add mean {am:.2} max {ax:.2}, remove mean {rm:.2} max {rx:.2}");
        // 100k keys are only 10 per node at 10k nodes: the means are noisy (the
        // simulation, with 1M keys, measures ~6 at 10k), so the bound has slack.
        assert!(
            am <= 10.0 && rm <= 10.0,
            "N={n}: mean add {am}, remove {rm}"
        );
        assert!(ax <= 20.0 && rx <= 20.0, "N={n}: max add {ax}, remove {rx}");
    }
}

fn assert_churn(sizes: &[usize], trials: usize, keys: u64) {
    for &n in sizes {
        let [(am, ax), (rm, rx)] = churn(n, trials, keys, DEFAULT_LEAF_SIZE, n as u64 * 7);
        println!("N={n}: moved x N: add mean {am:.2} max {ax:.2}, remove mean {rm:.2} max {rx:.2}");
        assert!(am <= 8.0 && rm <= 8.0, "N={n}: mean add {am}, remove {rm}");
        assert!(ax <= 20.0 && rx <= 20.0, "N={n}: max add {ax}, remove {rx}");
    }
}

#[test]
fn churn_moves_few_keys_near_1000() {
    // Powers of two and multiples of the leaf size, and one past them.
    assert_churn(&[1000, 1023, 1024, 1025, 16 * 63, 16 * 63 + 1], 20, 100_000);
}

#[test]
fn churn_moves_few_keys_near_10000() {
    assert_churn(&[10_000, 8191, 8192, 8193, 16 * 625 + 1], 20, 100_000);
}

#[test]
#[ignore = "heavier: more sizes and keys (~1 min in release)"]
fn churn_moves_few_keys_full() {
    assert_churn(
        &[
            1000, 1023, 1024, 1025, 1008, 1009, 2047, 2048, 2049, 4096, 4097, 9999, 10_000, 10_001,
            16_383, 16_384, 16_385,
        ],
        20,
        400_000,
    );
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
    let nodes: Vec<(u64, f64)> = ws
        .iter()
        .enumerate()
        .map(|(i, &w)| (i as u64 * 77 + 5, w))
        .collect();
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

#[test]
fn owners_are_distinct_best_first() {
    let mut s = 3u64;
    for (n, weighted) in [
        (1usize, false),
        (5, false),
        (40, true),
        (3000, false),
        (3000, true),
    ] {
        let nodes: Vec<(u64, f64)> = (0..n)
            .map(|_| {
                let w = if weighted {
                    1.0 + (splitmix(&mut s) % 10) as f64
                } else {
                    1.0
                };
                (splitmix(&mut s), w)
            })
            .collect();
        let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
        for key in 0..1000u64 {
            let ks: &[usize] = if n <= 40 {
                &[0, 1, 2, 3, 7, n, n + 2]
            } else {
                &[0, 1, 2, 3, 7, 60]
            };
            for &k in ks {
                let o = sk.owners(key, k);
                assert_eq!(o.len(), k.min(n));
                if k > 0 {
                    assert_eq!(o[0], sk.owner(key));
                }
                let mut d = o.clone();
                d.sort_unstable();
                d.dedup();
                assert_eq!(d.len(), o.len(), "n={n} k={k} key={key}: {o:?}");
                // Each request is a prefix of any longer one (also across the
                // switch to per-slot tables for large requests).
                let longer = sk.owners(key, k + 50);
                assert_eq!(&longer[..o.len()], &o[..], "n={n} k={k} key={key}");
            }
        }
    }
}

#[test]
fn second_owners_are_fair() {
    let nodes = random_nodes(1000, 23);
    let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
    let keys = 100_000u64;
    let mut counts = vec![0u64; nodes.len()];
    for key in 0..keys {
        counts[sk.owners(key, 2)[1]] += 1;
    }
    let e = vec![keys as f64 / nodes.len() as f64; nodes.len()];
    let chi = chi_square(&counts, &e);
    assert!(chi <= chi_bound(nodes.len()), "chi2 {chi}");
}

#[test]
fn owners_are_stable_under_churn() {
    // A set of k replicas changes when any rank moves, so expect about k times
    // the owner's movement; flat HRW would change k/(N+1) of the sets.
    let k = 3;
    for n in [1000usize, 10_000] {
        let nodes = random_nodes(n, 31);
        let keys = 50_000u64;
        let sets = |sk: &Skeleton, nodes: &[(u64, f64)]| -> Vec<Vec<u64>> {
            (0..keys)
                .map(|key| {
                    let mut v: Vec<u64> = sk.owners(key, k).iter().map(|&i| nodes[i].0).collect();
                    v.sort_unstable();
                    v
                })
                .collect()
        };
        let before = sets(&Skeleton::build(&nodes, DEFAULT_LEAF_SIZE), &nodes);
        let mut s = 77u64;
        let (mut changed, mut trials) = (0.0, 0);
        for t in 0..10 {
            let mut other = nodes.clone();
            if t % 2 == 0 {
                other.push((splitmix(&mut s), 1.0));
            } else {
                other.remove((splitmix(&mut s) % n as u64) as usize);
            }
            let after = sets(&Skeleton::build(&other, DEFAULT_LEAF_SIZE), &other);
            changed +=
                before.iter().zip(&after).filter(|(a, b)| a != b).count() as f64 / keys as f64;
            trials += 1;
        }
        let per_n = changed / trials as f64 * n as f64;
        println!("N={n}: owners({k}) set changed for {per_n:.2}/N of keys per add/remove");
        assert!(per_n <= 8.0 * k as f64, "N={n}: {per_n}/N");
    }
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
    // The case: weights below ~1e-290 made the leaf bounds overflow,
    // and owners/3 returned the first leaf node again.
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
        let nodes: Vec<(u64, f64)> = ws
            .iter()
            .enumerate()
            .map(|(i, &w)| (i as u64 * 77 + 5, w))
            .collect();
        for leaf in [1, 16] {
            let sk = Skeleton::build(&nodes, leaf);
            weighted::tests::assert_shares(&ws, |k| sk.owner(k), 1_000_000, &format!("{ws:?}"));
        }
        let ring = crate::ring::Ring::new(&nodes);
        weighted::tests::assert_shares(&ws, |k| ring.owner(k).unwrap(), 1_000_000, "ring");
    }
}

#[test]
fn owners_of_gives_each_keys_owner() {
    let mut s = 0x0b47_c4ed_u64;
    let weighted: Vec<(u64, f64)> = random_nodes(3000, 9)
        .into_iter()
        .enumerate()
        .map(|(i, (id, _))| (id, 1.0 + (i % 7) as f64))
        .collect();
    let sets = [
        (Vec::new(), DEFAULT_LEAF_SIZE),
        (vec![(7, 1.0)], 1),
        (random_nodes(5, 1), DEFAULT_LEAF_SIZE),
        (random_nodes(1000, 2), DEFAULT_LEAF_SIZE),
        (random_nodes(20_000, 3), DEFAULT_LEAF_SIZE),
        (random_nodes(2000, 4), 1),
        ((0..500u64).map(|i| (i << 32, 1.0)).collect(), 4),
        (weighted, DEFAULT_LEAF_SIZE),
    ];
    for (nodes, leaf) in &sets {
        let sk = Skeleton::build(nodes, *leaf);
        // Lengths around the batch width, so that full and partial groups both run.
        for len in [0, 1, BATCH_LANES - 1, BATCH_LANES, BATCH_LANES + 3, 1000] {
            let keys: Vec<u64> = (0..len).map(|_| splitmix(&mut s)).collect();
            let mut out = vec![u32::MAX; len];
            sk.owners_of(&keys, &mut out);
            let want: Vec<u32> = keys.iter().map(|&k| sk.owner(k) as u32).collect();
            assert_eq!(out, want, "{} nodes, leaf {leaf}, {len} keys", nodes.len());
        }
    }
}

#[test]
fn large_skeletons_answer_as_their_reordered_twin() {
    // 300k nodes: trie and leaf blocks large enough to be moved onto huge pages.
    let nodes = random_nodes(300_000, 8);
    let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
    let mut reversed = nodes.clone();
    reversed.reverse();
    let twin = Skeleton::build(&reversed, DEFAULT_LEAF_SIZE);
    let keys: Vec<u64> = (0..20_000u64)
        .map(|k| k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    let mut out = vec![0u32; keys.len()];
    sk.owners_of(&keys, &mut out);
    for (&k, &o) in keys.iter().zip(&out) {
        let owner = sk.owner(k);
        assert_eq!(o as usize, owner);
        assert_eq!(nodes.len() - 1 - twin.owner(k), owner);
    }
}

#[test]
fn owners_of_fills_only_the_common_length() {
    let nodes = random_nodes(100, 5);
    let sk = Skeleton::build(&nodes, DEFAULT_LEAF_SIZE);
    let keys: Vec<u64> = (0..20).collect();
    let mut short = vec![u32::MAX; 11];
    sk.owners_of(&keys, &mut short);
    assert!(short
        .iter()
        .zip(&keys)
        .all(|(&o, &k)| o == sk.owner(k) as u32));
    let mut long = vec![u32::MAX; 30];
    sk.owners_of(&keys, &mut long);
    assert!(long[..20]
        .iter()
        .zip(&keys)
        .all(|(&o, &k)| o == sk.owner(k) as u32));
    assert!(long[20..].iter().all(|&o| o == u32::MAX));
}

#[test]
fn owners_of_matches_the_pinned_owners() {
    let nodes: Vec<(u64, f64)> = (0..100u64).map(|i| (i, 1.0)).collect();
    let sk = Skeleton::build(&nodes, 16);
    let keys: Vec<u64> = (0..12u64).map(|k| k * 1_000_003).collect();
    let mut out = [0u32; 12];
    sk.owners_of(&keys, &mut out);
    assert_eq!(out.map(|o| o as usize), PINNED);
}

#[cfg(feature = "work-count")]
#[test]
fn owners_of_counts_within_its_cost() {
    for (n, leaf) in [(0, 16), (1, 1), (300, 16), (5000, 16), (5000, 3)] {
        let sk = Skeleton::build(&random_nodes(n, 6), leaf);
        let _ = crate::work::take();
        for len in [0, 3, BATCH_LANES, 100] {
            let keys: Vec<u64> = (0..len as u64).map(|k| k * 0x9e37_79b9).collect();
            let mut out = vec![0u32; len];
            sk.owners_of(&keys, &mut out);
            let (_, counted) = crate::work::take();
            assert!(counted <= sk.owners_of_cost(len), "{n} nodes, {len} keys");
            assert!(len == 0 || n < 2 || counted > 0);
        }
    }
}

#[test]
fn pinned_owners() {
    // Placements are a contract once stored: these must never change silently.
    let nodes: Vec<(u64, f64)> = (0..100u64).map(|i| (i, 1.0)).collect();
    let sk = Skeleton::build(&nodes, 16);
    let got: Vec<usize> = (0..12u64).map(|k| sk.owner(k * 1_000_003)).collect();
    println!("pinned: {got:?}");
    let weighted: Vec<(u64, f64)> = (0..100u64).map(|i| (i, 1.0 + (i % 5) as f64)).collect();
    let sw = Skeleton::build(&weighted, 16);
    let got_w: Vec<usize> = (0..12u64).map(|k| sw.owner(k * 1_000_003)).collect();
    println!("pinned weighted: {got_w:?}");
    let got_3: Vec<Vec<usize>> = (0..4u64).map(|k| sk.owners(k * 1_000_003, 3)).collect();
    println!("pinned owners: {got_3:?}");
    assert_eq!(got, PINNED);
    assert_eq!(got_w, PINNED_WEIGHTED);
    assert_eq!(got_3, PINNED_OWNERS);
}

const PINNED: [usize; 12] = [58, 73, 21, 98, 30, 87, 59, 58, 72, 27, 54, 65];
const PINNED_WEIGHTED: [usize; 12] = [58, 73, 21, 98, 42, 87, 59, 58, 72, 64, 54, 12];
const PINNED_OWNERS: [[usize; 3]; 4] = [[58, 46, 60], [73, 81, 14], [21, 39, 59], [98, 41, 82]];
