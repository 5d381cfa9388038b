//! `term_hash` computes XXH3-64 of some short encodings from their words (the ids of
//! a container, a float's bits), without the bytes, and of an integer's from a word
//! stored whole: each must equal the reference implementation over the bytes
//! (docs/HASHING.md §2) for every tag, every width it accepts and any values.

use hrw_core::term_hash::{self, tagged_ids, MAX_TAGGED_IDS, TERM_SEED};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The encoding as the contract writes it: the tag, then each id in 8 bytes LE.
fn reference(tag: u8, ids: &[u64]) -> u64 {
    let mut bytes = vec![tag];
    for id in ids {
        bytes.extend_from_slice(&id.to_le_bytes());
    }
    xxh3_64_with_seed(&bytes, TERM_SEED)
}

/// Ids that exercise every byte: random, with some all-zero and all-one words.
fn ids() -> impl Strategy<Value = Vec<u64>> {
    let id = prop_oneof![
        6 => any::<u64>(),
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => Just(0xFF00_0000_0000_0000u64),
        1 => Just(0x0000_0000_0000_00FFu64),
    ];
    prop::collection::vec(id, MAX_TAGGED_IDS..=MAX_TAGGED_IDS)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        // Integration tests have no lib.rs beside them for the default persistence.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_tag_and_width_matches_the_bytes(ids in ids()) {
        for tag in 0..=u8::MAX {
            for n in 0..=MAX_TAGGED_IDS {
                prop_assert_eq!(
                    tagged_ids(tag, &ids[..n]),
                    reference(tag, &ids[..n]),
                    "tag {} n {}", tag, n
                );
            }
        }
    }

    #[test]
    fn tuples_lists_and_maps_use_it(ids in ids()) {
        for n in 0..=MAX_TAGGED_IDS {
            prop_assert_eq!(tagged_ids(term_hash::tag::TUPLE, &ids[..n]), term_hash::tuple(&ids[..n]));
            prop_assert_eq!(tagged_ids(term_hash::tag::LIST, &ids[..n]), term_hash::list(&ids[..n]));
        }
    }
}

#[test]
fn ids_beyond_the_widest_are_ignored() {
    let ids: Vec<u64> = (1..=MAX_TAGGED_IDS as u64 + 3).collect();
    assert_eq!(
        tagged_ids(term_hash::tag::TUPLE, &ids),
        reference(term_hash::tag::TUPLE, &ids[..MAX_TAGGED_IDS])
    );
}

#[test]
fn fixed_vectors_of_the_reference() {
    // Every byte value in every position of every width, against the reference.
    for n in 0..=MAX_TAGGED_IDS {
        for byte in 0..=u8::MAX {
            let ids: Vec<u64> = (0..n as u64)
                .map(|i| u64::from_le_bytes([byte.wrapping_add(i as u8); 8]).rotate_left(i as u32))
                .collect();
            for tag in [0u8, 1, 5, 6, 8, 0x80, 0xFF] {
                assert_eq!(
                    tagged_ids(tag, &ids),
                    reference(tag, &ids),
                    "n {n} byte {byte} tag {tag}"
                );
            }
        }
    }
}

/// The contract's integer encoding: tag, sign, the magnitude's significant bytes.
fn reference_int(negative: bool, magnitude: u64) -> u64 {
    let len = (64 - magnitude.leading_zeros() as usize).div_ceil(8);
    let mut bytes = vec![term_hash::tag::INTEGER, (negative && magnitude != 0) as u8];
    bytes.extend_from_slice(&magnitude.to_le_bytes()[..len]);
    xxh3_64_with_seed(&bytes, TERM_SEED)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4096,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    })]

    /// Integers (assembled in one word) and floats (hashed from their bits): still
    /// the reference's hash of their bytes, at every magnitude width.
    #[test]
    fn integers_and_floats_match_the_bytes(raw in any::<u64>(), width in 0u32..=64) {
        let magnitude = if width == 64 { raw } else { raw & ((1u64 << width) - 1) };
        prop_assert_eq!(term_hash::uint64(magnitude), reference_int(false, magnitude));
        if magnitude <= i64::MAX as u64 {
            let v = magnitude as i64;
            prop_assert_eq!(term_hash::int64(v), reference_int(false, magnitude));
            prop_assert_eq!(term_hash::int64(-v), reference_int(true, magnitude));
        }
        prop_assert_eq!(term_hash::int64(i64::MIN), reference_int(true, 1 << 63));
        let f = f64::from_bits(raw);
        if f == f && f != 0.0 {
            let mut bytes = vec![term_hash::tag::FLOAT];
            bytes.extend_from_slice(&raw.to_le_bytes());
            prop_assert_eq!(term_hash::float(f), xxh3_64_with_seed(&bytes, TERM_SEED));
        }
    }
}

#[test]
fn every_integer_width_and_edge_matches_the_bytes() {
    for bits in 0..=64u32 {
        for m in [
            0u64,
            1,
            (1u128 << bits).wrapping_sub(1) as u64,
            1u64.checked_shl(bits.saturating_sub(1)).unwrap_or(0),
            0x0123_4567_89AB_CDEF >> (64 - bits.max(1)),
        ] {
            assert_eq!(term_hash::uint64(m), reference_int(false, m), "{m}");
            if m <= i64::MAX as u64 {
                assert_eq!(
                    term_hash::int64(-(m as i64)),
                    reference_int(true, m),
                    "-{m}"
                );
            }
        }
    }
}
