//! Property tests over `hrw_core`'s public API (proptest).
//!
//! Each property runs 256 random cases by default, a few seconds for the file even in
//! a debug build. For a longer search set `PROPTEST_CASES`:
//!
//! ```sh
//! PROPTEST_CASES=10000 cargo test --release -p hrw_core --test properties
//! ```
//!
//! A failing case is shrunk to a minimal input and reported; proptest also records
//! its seed in `tests/properties.proptest-regressions` so the next run tries it
//! first (commit that file to keep the case).

use hrw_core::scan::{self, Backend};
use hrw_core::skeleton::Skeleton;
use hrw_core::{bounded, n3, nodes, ring::Ring, term_hash, weighted};
use proptest::collection::{hash_set, vec};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// 256 cases (proptest's usual default), or `PROPTEST_CASES`.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        // Integration tests have no lib.rs beside them for the default persistence.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

// -- helpers -------------------------------------------------------------------------

/// Ids that are often structured (small, sequential, shifted), as real ids are, and
/// otherwise anything.
fn id() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..64,
        (0u64..1 << 20).prop_map(|i| i << 32),
        Just(u64::MAX),
    ]
}

/// Valid weights: finite and > 0, small integers (the common case, with ties)
/// reals over many orders of magnitude, and any double from 5e-324 to 2^53.
fn weight() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(1.0),
        (1u32..10).prop_map(f64::from),
        1e-6f64..1e6,
        // Any valid weight, the smallest subnormal to 2^53.
        (1u64..=weighted::MAX_WEIGHT.to_bits()).prop_map(f64::from_bits),
    ]
}

/// Fisher-Yates with a splitmix64 stream: a permutation chosen by `seed`.
fn shuffled<T: Clone>(items: &[T], seed: u64) -> Vec<T> {
    let mut out = items.to_vec();
    let mut s = seed;
    for i in (1..out.len()).rev() {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        out.swap(i, (z % (i as u64 + 1)) as usize);
    }
    out
}

/// The flat HRW owner: first index of the highest N3 score.
fn flat_owner(ids: &[u64], key: u64) -> Option<usize> {
    let k = n3::prep(key);
    let mut best: Option<(u64, usize)> = None;
    for (i, &id) in ids.iter().enumerate() {
        let s = n3::score(k, id);
        if best.is_none_or(|(b, _)| s > b) {
            best = Some((s, i));
        }
    }
    best.map(|(_, i)| i)
}

fn unweighted(ids: &[u64]) -> Vec<(u64, f64)> {
    ids.iter().map(|&id| (id, 1.0)).collect()
}

fn assert_distinct(indices: &[usize]) -> Result<(), TestCaseError> {
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    prop_assert_eq!(
        sorted.len(),
        indices.len(),
        "repeated index in {:?}",
        indices
    );
    Ok(())
}

// -- N3 ------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn n3_split_form_equals_the_full_score(key in any::<u64>(), node in any::<u64>()) {
        prop_assert_eq!(
            n3::score_prepared(n3::prepared_key(key), n3::linear(node)),
            n3::score(n3::prep(key), node)
        );
    }

    #[test]
    fn n3_linear_layer_is_linear_over_xor(a in any::<u64>(), b in any::<u64>()) {
        prop_assert_eq!(n3::linear(a ^ b), n3::linear(a) ^ n3::linear(b));
    }

    #[test]
    fn n3_distinct_nodes_never_tie(key in any::<u64>(), a in id(), delta in 1u64..) {
        // Any two distinct ids: `a` and `a ^ delta`, delta != 0.
        let b = a ^ delta;
        let k = n3::prep(key);
        prop_assert_ne!(n3::score(k, a), n3::score(k, b));
    }
}

// -- scans ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_scan_backend_agrees_with_portable(
        prepared in vec(any::<u64>(), 0..300),
        repeats in vec(any::<prop::sample::Index>(), 0..8),
        tk in any::<u64>(),
    ) {
        // Repeated values (duplicated nodes): the first index of the maximum wins.
        let mut prepared = prepared;
        if !prepared.is_empty() {
            for r in &repeats {
                let v = prepared[r.index(prepared.len())];
                prepared.push(v);
            }
        }
        let expected = scan::portable::argmax(&prepared, tk);
        prop_assert_eq!(expected.is_none(), prepared.is_empty());
        for backend in Backend::available() {
            prop_assert_eq!(backend.argmax(&prepared, tk), expected, "{:?}", backend);
        }
        prop_assert_eq!(scan::argmax(&prepared, tk), expected);
    }

    #[test]
    fn top_is_distinct_ordered_and_starts_with_argmax(
        prepared in vec(0u64..64, 0..100),
        tk in any::<u64>(),
        count in 0usize..120,
    ) {
        let top = scan::top(&prepared, tk, count);
        let distinct = {
            let mut p = prepared.clone();
            p.sort_unstable();
            p.dedup();
            p.len()
        };
        prop_assert_eq!(top.len(), count.min(distinct));
        if count > 0 {
            prop_assert_eq!(top.first().copied(), scan::argmax(&prepared, tk));
        }
        let scores: Vec<u64> = top.iter().map(|&i| n3::score_prepared(tk, prepared[i])).collect();
        prop_assert!(scores.windows(2).all(|w| w[0] > w[1]), "not strictly decreasing");
        for &i in &top {
            // Each is the first occurrence of its value.
            prop_assert_eq!(prepared.iter().position(|&v| v == prepared[i]), Some(i));
        }
    }
}

// -- node sets -----------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn distinct_keeps_first_positions_and_largest_weights(
        input in vec((0u64..20, weight()), 0..60),
    ) {
        let d = nodes::distinct(&input);
        prop_assert_eq!(d.positions.len(), d.nodes.len());
        for (&pos, &(id, w)) in d.positions.iter().zip(&d.nodes) {
            prop_assert_eq!(input.iter().position(|n| n.0 == id), Some(pos));
            let max = input.iter().filter(|n| n.0 == id).map(|n| n.1).fold(f64::MIN, f64::max);
            prop_assert_eq!(w, max);
        }
        let mut ids: Vec<u64> = input.iter().map(|n| n.0).collect();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), d.nodes.len());
    }
}

// -- ring ----------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ring_owner_is_the_flat_argmax(
        ids in hash_set(id(), 1..200),
        keys in vec(any::<u64>(), 1..50),
        count in 0usize..10,
    ) {
        let ids: Vec<u64> = ids.into_iter().collect();
        let ring = Ring::new(&unweighted(&ids));
        prop_assert_eq!(ring.len(), ids.len());
        prop_assert!(!ring.is_weighted());
        for key in keys {
            let owner = ring.owner(key);
            prop_assert_eq!(owner, flat_owner(&ids, key));
            let owners = ring.owners(key, count);
            prop_assert_eq!(owners.len(), count.min(ids.len()));
            assert_distinct(&owners)?;
            if count > 0 {
                prop_assert_eq!(owners.first().copied(), owner);
            }
        }
    }

    #[test]
    fn weighted_ring_owner_is_the_flat_weighted_argmin(
        nodes in vec((id(), weight()), 1..80),
        keys in vec(any::<u64>(), 1..50),
    ) {
        let d = nodes::distinct(&nodes);
        let ring = Ring::new(&d.nodes);
        for key in keys {
            let owner = ring.owner(key);
            prop_assert_eq!(owner, weighted::argmin(&d.nodes, n3::prep(key)));
            let owners = ring.owners(key, 3);
            assert_distinct(&owners)?;
            prop_assert_eq!(owners.first().copied(), owner);
        }
    }

    #[test]
    fn equal_weights_give_the_unweighted_owner(
        ids in hash_set(id(), 1..60),
        w in weight(),
        key in any::<u64>(),
    ) {
        let ids: Vec<u64> = ids.into_iter().collect();
        let same: Vec<(u64, f64)> = ids.iter().map(|&id| (id, w)).collect();
        prop_assert_eq!(weighted::argmin(&same, n3::prep(key)), flat_owner(&ids, key));
        prop_assert_eq!(Ring::new(&same).owner(key), flat_owner(&ids, key));
    }
}

// -- skeleton ------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn skeleton_owner_is_a_node_and_ignores_input_order_and_duplicates(
        ids in hash_set(id(), 1..300),
        extra in vec(any::<prop::sample::Index>(), 0..20),
        seed in any::<u64>(),
        leaf in 1usize..40,
        keys in vec(any::<u64>(), 1..40),
    ) {
        let ids: Vec<u64> = ids.into_iter().collect();
        let nodes = unweighted(&ids);
        let sk = Skeleton::build(&nodes, leaf);
        prop_assert_eq!(sk.len(), ids.len());
        prop_assert!(!sk.is_empty());

        // The same set, shuffled and with some ids repeated: the same owners.
        let mut other = shuffled(&nodes, seed);
        for e in &extra {
            other.push(nodes[e.index(nodes.len())]);
        }
        let sh = Skeleton::build(&other, leaf);
        prop_assert_eq!(sh.len(), ids.len());

        for key in keys {
            let owner = sk.owner(key);
            prop_assert!(owner < ids.len());
            prop_assert_eq!(sk.owner(key), owner, "deterministic");
            let o2 = sh.owner(key);
            prop_assert!(o2 < other.len());
            prop_assert_eq!(other[o2].0, ids[owner]);
            // Duplicates answer with their first occurrence.
            prop_assert_eq!(other.iter().position(|n| n.0 == other[o2].0), Some(o2));
            if ids.len() <= leaf {
                prop_assert_eq!(Some(owner), flat_owner(&ids, key), "a single leaf is flat HRW");
            }
        }
    }

    #[test]
    fn skeleton_owners_are_distinct_nodes_led_by_the_owner(
        ids in hash_set(id(), 1..200),
        leaf in 1usize..20,
        key in any::<u64>(),
        count in 0usize..60,
    ) {
        let ids: Vec<u64> = ids.into_iter().collect();
        let sk = Skeleton::build(&unweighted(&ids), leaf);
        let owners = sk.owners(key, count);
        prop_assert_eq!(owners.len(), count.min(ids.len()));
        assert_distinct(&owners)?;
        prop_assert!(owners.iter().all(|&i| i < ids.len()));
        if count > 0 {
            prop_assert_eq!(owners[0], sk.owner(key));
        }
        // A longer request extends a shorter one.
        let more = sk.owners(key, count + 5);
        prop_assert_eq!(&more[..owners.len()], &owners[..]);
    }

    #[test]
    fn weighted_skeleton_is_order_independent_and_flat_within_a_leaf(
        nodes in vec((id(), weight()), 1..120),
        seed in any::<u64>(),
        leaf in 1usize..24,
        keys in vec(any::<u64>(), 1..30),
    ) {
        let d = nodes::distinct(&nodes);
        let sk = Skeleton::build(&nodes, leaf);
        let sh = Skeleton::build(&shuffled(&nodes, seed), leaf);
        let shuffled_nodes = shuffled(&nodes, seed);
        prop_assert_eq!(sk.len(), d.nodes.len());
        for key in keys {
            let a = sk.owner(key);
            let b = sh.owner(key);
            prop_assert!(a < nodes.len() && b < nodes.len());
            prop_assert_eq!(nodes[a].0, shuffled_nodes[b].0);
            if d.nodes.len() <= leaf {
                let flat = weighted::argmin(&d.nodes, n3::prep(key)).map(|i| d.nodes[i].0);
                prop_assert_eq!(Some(nodes[a].0), flat);
            }
            let owners = sk.owners(key, 4);
            assert_distinct(&owners)?;
            prop_assert_eq!(owners[0], a);
        }
    }

    #[test]
    fn an_empty_skeleton_answers_without_panicking(key in any::<u64>(), leaf in 0usize..8) {
        let sk = Skeleton::build(&[], leaf);
        prop_assert!(sk.is_empty());
        prop_assert_eq!(sk.owner(key), 0);
        prop_assert!(sk.owners(key, 3).is_empty());
    }
}

// -- term ids ------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn map_ids_ignore_entry_order(
        entries in prop::collection::hash_map(any::<u64>(), any::<u64>(), 0..40),
        seed in any::<u64>(),
    ) {
        let mut a: Vec<(u64, u64)> = entries.into_iter().collect();
        let mut b = shuffled(&a, seed);
        prop_assert_eq!(term_hash::map(&mut a), term_hash::map(&mut b));
    }

    #[test]
    fn map_ids_depend_on_which_value_goes_with_which_key(
        k1 in any::<u64>(), k2 in any::<u64>(), v1 in any::<u64>(), v2 in any::<u64>(),
    ) {
        prop_assume!(k1 != k2 && v1 != v2);
        prop_assert_ne!(
            term_hash::map(&mut [(k1, v1), (k2, v2)]),
            term_hash::map(&mut [(k1, v2), (k2, v1)])
        );
    }

    #[test]
    fn integer_ids_ignore_width(
        value in any::<i64>(),
        padding in 0usize..24,
    ) {
        let mut magnitude = value.unsigned_abs().to_le_bytes().to_vec();
        magnitude.extend(std::iter::repeat_n(0u8, padding));
        prop_assert_eq!(term_hash::integer(value < 0, &magnitude), term_hash::int64(value));
    }

    #[test]
    fn containers_of_the_same_ids_differ_by_kind(ids in vec(any::<u64>(), 0..20), tail in any::<u64>()) {
        let list = term_hash::list(&ids);
        prop_assert_ne!(list, term_hash::tuple(&ids));
        if !ids.is_empty() {
            prop_assert_ne!(term_hash::improper_list(&ids, tail), list);
        }
    }

    #[test]
    fn a_binary_id_is_plain_xxh3_and_differs_from_its_atom(bytes in vec(any::<u8>(), 0..200)) {
        prop_assert_eq!(term_hash::binary(&bytes), xxh3(&bytes));
        prop_assert_ne!(term_hash::binary(&bytes), term_hash::atom(&bytes));
    }
}

/// XXH3-64 (seed 0) through the same crate the core uses, called another way.
fn xxh3(bytes: &[u8]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(bytes);
    h.digest()
}

// -- weighted costs and bounded loads -------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn higher_scores_cost_less(a in any::<u64>(), b in any::<u64>(), w in weight()) {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let cost = |s: u64| weighted::neg_log2_uniform(weighted::uniform_numerator(s));
        prop_assert!(cost(hi) <= cost(lo));
        let w = weighted::Weight::new(w);
        let (x, y) = (weighted::Standing::new(lo, w), weighted::Standing::new(hi, w));
        prop_assert!(cost(lo).is_finite() && cost(lo) >= 0.0);
        if lo != hi {
            prop_assert!(y.beats(&x) && !x.beats(&y));
        }
    }

    #[test]
    fn the_cost_never_rises_with_the_score(
        e in 0u32..53,
        anchor_sqrt2 in any::<bool>(),
        offset in -2000i64..2000,
    ) {
        // Adjacent 53-bit uniforms at powers of two (where the binade changes), at
        // sqrt(2) times them (where contract v1's argument reduction switched), and
        // anywhere else by chance. A rise would let a higher score lose to a lower
        // one at equal weights.
        let base = if anchor_sqrt2 {
            ((1u64 << e) as f64 * std::f64::consts::SQRT_2) as i64
        } else {
            1i64 << e
        };
        let n = (base + offset).clamp(1, (1 << 53) - 1) as u64;
        prop_assert!(
            weighted::neg_log2_uniform(n + 1) <= weighted::neg_log2_uniform(n),
            "cost rises from uniform {} to {}", n, n + 1
        );
    }

    #[test]
    fn bounded_assignment_respects_caps_and_takes_the_best_open_node(
        keys in hash_set(any::<u64>(), 0..400),
        nodes in hash_set(id(), 1..16),
        epsilon in prop_oneof![Just(0.0), 0.0f64..2.0, Just(1e300)],
        seed in any::<u64>(),
    ) {
        let keys: Vec<u64> = keys.into_iter().collect();
        let nodes: Vec<u64> = nodes.into_iter().collect();
        let a = bounded::assign(&keys, &nodes, epsilon);
        prop_assert_eq!(a.node_of.len(), keys.len());
        prop_assert_eq!(a.order.len(), keys.len());

        // Keys in ascending id order, each on its best node that was not yet full.
        let cap = bounded::cap(keys.len(), nodes.len(), epsilon).max(1);
        let prepared: Vec<u64> = nodes.iter().map(|&n| n3::linear(n)).collect();
        let mut load = vec![0usize; nodes.len()];
        let mut last = None;
        for (&i, &n) in a.order.iter().zip(&a.node_of) {
            prop_assert!(last < Some(keys[i]), "keys out of order");
            last = Some(keys[i]);
            let ranked = scan::top(&prepared, n3::prepared_key(keys[i]), nodes.len());
            let expected = ranked.into_iter().find(|&r| load[r] < cap);
            prop_assert_eq!(Some(n), expected);
            load[n] += 1;
        }
        prop_assert!(load.iter().all(|&l| l <= cap));

        // The input order of keys and nodes does not matter.
        let (k2, n2) = (shuffled(&keys, seed), shuffled(&nodes, seed ^ 1));
        let b = bounded::assign(&k2, &n2, epsilon);
        let placed = |keys: &[u64], nodes: &[u64], x: &bounded::Assignment| -> Vec<(u64, u64)> {
            x.order.iter().zip(&x.node_of).map(|(&i, &n)| (keys[i], nodes[n])).collect()
        };
        prop_assert_eq!(placed(&keys, &nodes, &a), placed(&k2, &n2, &b));
    }
}
