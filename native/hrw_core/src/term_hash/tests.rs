use super::*;

#[test]
fn binary_is_plain_xxh3() {
    // Reference values of XXH3-64 (seed 0) from the xxHash project's own tooling.
    assert_eq!(binary(b""), 0x2d06800538d394c2);
    assert_eq!(binary(b"a"), 0xe6c632b61e964e1f);
}

#[test]
fn short_inputs_hash_from_a_register_as_from_their_bytes() {
    // Every length 1..=16, every byte value in every position, the other bytes
    // varying.
    let mut x = 0x9E37_79B9_7F4A_7C15u128 * 0x0123_4567_89AB_CDEF;
    for len in 1..=16 {
        for pos in 0..len {
            for value in 0..=u8::MAX {
                x = x.wrapping_mul(0x2545_F491_4F6C_DD1D).wrapping_add(1);
                // An LCG's low bits cycle quickly: fold the high ones down.
                let mut bytes = (x ^ x >> 67).to_le_bytes();
                bytes[pos] = value;
                bytes[len..].fill(0);
                let word = u128::from_le_bytes(bytes);
                assert_eq!(
                    words::short(word, len),
                    xxh3_64_with_seed(&bytes[..len], TERM_SEED),
                    "len {len} byte {pos} = {value}"
                );
            }
        }
    }
}

#[test]
fn tagged_ids_is_the_container_encoding() {
    let ids: Vec<u64> = (0..MAX_TAGGED_IDS as u64)
        .map(|i| 0x0123_4567_89AB_CDEFu64.rotate_left(i as u32 * 7) ^ i)
        .collect();
    for n in 0..=MAX_TAGGED_IDS {
        assert_eq!(
            tagged_ids(tag::TUPLE, &ids[..n]),
            tuple(&ids[..n]),
            "tuple of {n}"
        );
        assert_eq!(
            tagged_ids(tag::LIST, &ids[..n]),
            list(&ids[..n]),
            "list of {n}"
        );
    }
    let mut pairs = [(9u64, 1u64), (3, u64::MAX), (3, 2), (u64::MAX, 0)];
    let mut sorted = pairs;
    sorted.sort_unstable();
    let flat: Vec<u64> = sorted.iter().flat_map(|&(k, v)| [k, v]).collect();
    assert_eq!(tagged_ids(tag::MAP, &flat), map(&mut pairs));
}

#[test]
fn integer_width_does_not_matter() {
    assert_eq!(integer(false, &[5, 0, 0, 0]), integer(false, &[5]));
    assert_eq!(int64(0), integer(true, &[]));
    assert_eq!(int64(-7), integer(true, &[7, 0]));
    assert_ne!(int64(7), int64(-7));
}

#[test]
fn distinct_types_get_distinct_ids() {
    let ids = [
        int64(1),
        float(1.0),
        atom(b"a"),
        binary(b"a"),
        list(&[int64(1)]),
        tuple(&[int64(1)]),
        list(&[]),
        tuple(&[]),
        map(&mut []),
    ];
    for i in 0..ids.len() {
        for j in 0..i {
            assert_ne!(ids[i], ids[j], "{i} vs {j}");
        }
    }
}

#[test]
fn map_ignores_entry_order() {
    let a = (atom(b"a"), int64(1));
    let b = (atom(b"b"), int64(2));
    assert_eq!(map(&mut [a, b]), map(&mut [b, a]));
    assert_ne!(map(&mut [a, b]), map(&mut [(a.0, b.1), (b.0, a.1)]));
}

#[test]
fn negative_zero_float_is_zero() {
    assert_eq!(float(-0.0), float(0.0));
}

#[test]
fn latin1_names_hash_as_their_utf8() {
    for b in 0..=255u8 {
        let utf8 = char::from(b).to_string();
        assert_eq!(atom_latin1(&[b]), atom(utf8.as_bytes()), "{b}");
        let long: Vec<u8> = std::iter::repeat_n(b, 255).collect();
        assert_eq!(atom_latin1(&long), atom(utf8.repeat(255).as_bytes()), "{b}");
    }
}

#[test]
fn word_integers_match_the_general_encoding() {
    for v in [0i64, 1, -1, 255, 256, -256, i64::MAX, i64::MIN, 1 << 40] {
        assert_eq!(
            int64(v),
            integer(v < 0, &v.unsigned_abs().to_le_bytes()),
            "{v}"
        );
    }
    for v in [0u64, 1, u64::MAX, 1 << 63] {
        assert_eq!(uint64(v), integer(false, &v.to_le_bytes()), "{v}");
    }
}

#[test]
fn bitstring_ignores_unused_bits() {
    for bits in 1..64u64 {
        if bits % 8 == 0 {
            continue;
        }
        let n = bits.div_ceil(8) as usize;
        let used = 0xFFu8 << (8 - bits % 8);
        let mut clean = vec![0xA5u8; n];
        clean[n - 1] &= used;
        let mut dirty_same = clean.clone();
        dirty_same[n - 1] |= !used;
        assert_eq!(
            bitstring(&clean, bits),
            bitstring(&dirty_same, bits),
            "{bits}"
        );
    }
}

#[test]
fn id_stack_spills_to_the_heap_unchanged() {
    // Across the inline sizes, nested encodings equal plain buffers.
    for n in [0usize, 1, 15, 31, 32, 33, 100, 1000] {
        let ids: Vec<u64> = (0..n as u64)
            .map(|i| i.wrapping_mul(0x9e3779b97f4a7c15))
            .collect();
        let plain = |tag: u8, ids: &[u64]| {
            let mut bytes = vec![tag];
            for id in ids {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
            xxh3_64_with_seed(&bytes, TERM_SEED)
        };
        let pairs: Vec<(u64, u64)> = ids.iter().map(|&i| (i, !i)).collect();
        let mut sorted = pairs.clone();
        sorted.sort_unstable();
        let flat: Vec<u64> = sorted.iter().flat_map(|&(k, v)| [k, v]).collect();
        assert_eq!(list(&ids), plain(tag::LIST, &ids), "{n}");
        assert_eq!(map(&mut pairs.clone()), plain(tag::MAP, &flat), "{n}");

        // [ids..., {ids...}, %{pairs}, 7] built in one stack, with reservations.
        let mut stack = IdStack::new();
        let outer = stack.open();
        for &id in &ids {
            stack.push(id);
        }
        let inner = stack.open();
        stack.reserve(n);
        for &id in &ids {
            stack.push(id);
        }
        let t = stack.close(inner, tag::TUPLE);
        stack.push(t);
        let m = stack.open_map();
        stack.reserve_entries(n);
        for &(k, v) in pairs.iter().rev() {
            stack.push_entry(k, v);
        }
        assert_eq!(stack.entries_since(m), n);
        let m = stack.close_map(m);
        stack.push(m);
        let mut expected = ids.clone();
        expected.extend([tuple(&ids), map(&mut pairs.clone()), 7]);
        stack.push(7);
        assert_eq!(stack.close(outer, tag::LIST), list(&expected), "{n}");
    }
}

#[test]
fn pinned_vectors() {
    for (name, actual, expected) in crate::vectors::term_vectors() {
        assert_eq!(actual, expected, "{name}");
    }
}
