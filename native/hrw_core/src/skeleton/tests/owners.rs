//! Replicas (`owners`), batches (`owners_of`) and the pinned owners.

use super::*;

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
