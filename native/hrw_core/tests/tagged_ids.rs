//! `term_hash::tagged_ids` computes XXH3-64 from the ids, without the bytes: it must
//! equal the reference implementation over the bytes (docs/HASHING.md §2) for every
//! tag, every width it accepts and any ids.

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
