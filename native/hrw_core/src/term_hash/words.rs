//! XXH3-64 with the seed [`TERM_SEED`] over the encoding `tag` then ids (8 bytes
//! little-endian each), computed straight from the ids: the algorithm only reads
//! the input as 64-bit little-endian words, and the words of such an encoding are
//! ids shifted by the tag byte (read from the front: `prev >> 56 | id << 8`, with
//! the tag as the first `prev`) or whole ids (read from the back: the input is
//! `1 + 8n` bytes long, so a word ending at the end starts just after a tag).
//! A float's encoding (the tag and its bits) is the 9-byte case.
//! Written from the published description of XXH3 (xxHash's `doc/xxhash_spec.md`,
//! 64-bit variant, inputs of 1, 9, 17..=128 and 129 bytes); equal bit for bit to
//! `xxhash_rust::xxh3::xxh3_64_with_seed` of the same bytes (tested below and in
//! `tests/xxh3_words.rs`).

use super::tags::TERM_SEED;

/// The first 136 bytes (the minimum secret size, all that inputs of at most
/// 240 bytes read) of XXH3's default secret, from the specification.
const SECRET: [u8; 136] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3,
];

const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const PRIME_MX1: u64 = 0x1656_6791_9E37_79F9;

/// The secret's little-endian 64-bit word at byte `at`.
const fn secret64(at: usize) -> u64 {
    let mut word = 0u64;
    let mut i = 0;
    while i < 8 {
        word |= (SECRET[at + i] as u64) << (8 * i);
        i += 1;
    }
    word
}

/// The secret's little-endian 32-bit word at byte `at`.
const fn secret32(at: usize) -> u64 {
    secret64(at) & 0xFFFF_FFFF
}

/// The two keys a 16-byte mixing step at secret offset `at` xors into its
/// input words: the secret words plus and minus the seed.
const fn keys(at: usize) -> (u64, u64) {
    (
        secret64(at).wrapping_add(TERM_SEED),
        secret64(at + 8).wrapping_sub(TERM_SEED),
    )
}

/// [`keys`] at secret offsets 0, 16, ..., 112.
const KEYS: [(u64, u64); 8] = {
    let mut k = [(0, 0); 8];
    let mut i = 0;
    while i < 8 {
        k[i] = keys(16 * i);
        i += 1;
    }
    k
};

/// The keys of the last step of a 129..=240-byte input (secret offset 119).
const LAST_KEYS: (u64, u64) = keys(119);

/// The 9..=16-byte case's keys (secret bytes 24..56 and the seed).
const FLIP_LOW: u64 = (secret64(24) ^ secret64(32)).wrapping_add(TERM_SEED);
const FLIP_HIGH: u64 = (secret64(40) ^ secret64(48)).wrapping_sub(TERM_SEED);

/// The 1..=3-byte case's key (secret bytes 0..8, read as two 32-bit words).
const FLIP_TINY: u64 = (secret32(0) ^ secret32(4)).wrapping_add(TERM_SEED);

/// The 4..=8-byte case's key (secret bytes 8..24, minus the seed xored with
/// its low 32 bits byte-swapped and shifted into the high half).
const FLIP_SMALL: u64 = (secret64(8) ^ secret64(16))
    .wrapping_sub(TERM_SEED ^ ((TERM_SEED as u32).swap_bytes() as u64) << 32);

/// 128-bit product of `a` and `b`, its halves xored.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = a as u128 * b as u128;
    p as u64 ^ (p >> 64) as u64
}

/// One mixing step over the input words `lo`, `hi` with `keys`.
#[inline(always)]
fn mix(lo: u64, hi: u64, keys: (u64, u64)) -> u64 {
    fold(lo ^ keys.0, hi ^ keys.1)
}

#[inline(always)]
fn avalanche(mut x: u64) -> u64 {
    x ^= x >> 37;
    x = x.wrapping_mul(PRIME_MX1);
    x ^ (x >> 32)
}

/// Word `j` of the encoding read from the front: bytes `8j..8j + 8`.
#[inline(always)]
fn front(tag: u64, ids: &[u64], j: usize) -> u64 {
    let prev = if j == 0 { tag } else { ids[j - 1] >> 56 };
    prev | ids[j] << 8
}

/// The 9..=16-byte case from the first and the last 8 bytes.
#[inline(always)]
fn nine_to_sixteen(len: u64, first: u64, last: u64) -> u64 {
    let low = FLIP_LOW ^ first;
    let high = FLIP_HIGH ^ last;
    let acc = len
        .wrapping_add(low.swap_bytes())
        .wrapping_add(high)
        .wrapping_add(fold(low, high));
    avalanche(acc)
}

#[inline(always)]
fn avalanche_xxh64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(PRIME64_2);
    x ^= x >> 29;
    x = x.wrapping_mul(PRIME64_3);
    x ^ (x >> 32)
}

/// The 4..=8-byte case's finish (xxHash's "rrmxmx").
#[inline(always)]
fn rrmxmx(mut x: u64, len: u64) -> u64 {
    const M: u64 = 0x9FB2_1C65_1E98_DF25;
    x ^= x.rotate_left(49) ^ x.rotate_left(24);
    x = x.wrapping_mul(M);
    x ^= (x >> 35).wrapping_add(len);
    x = x.wrapping_mul(M);
    x ^ (x >> 28)
}

/// XXH3-64 with [`TERM_SEED`] of the first `len` bytes (1..=16) of the
/// little-endian `bytes` (the 1..=3, 4..=8 and 9..=16-byte cases), read out of
/// the register: storing the bytes and loading narrower words back stalls on
/// store forwarding.
#[inline(always)]
pub fn short(bytes: u128, len: usize) -> u64 {
    let at = |byte: usize| bytes >> (8 * byte);
    let len64 = len as u64;
    if len <= 3 {
        // First, middle and last byte, and the length.
        let byte = |i: usize| at(i) as u64 & 0xFF;
        let combined = byte(0) << 16 | byte(len >> 1) << 24 | byte(len - 1) | len64 << 8;
        avalanche_xxh64(FLIP_TINY ^ combined)
    } else if len <= 8 {
        // The first and the last four bytes.
        let (first, last) = (bytes as u32 as u64, at(len - 4) as u32 as u64);
        rrmxmx(last.wrapping_add(first << 32) ^ FLIP_SMALL, len64)
    } else {
        nine_to_sixteen(len64, bytes as u64, at(len - 8) as u64)
    }
}

/// The tag alone (1 byte: the 1..=3-byte case).
#[inline]
pub fn one_byte(tag: u64) -> u64 {
    // Last byte, the length, the first byte, the middle byte: all the tag but
    // the length.
    avalanche_xxh64(FLIP_TINY ^ (tag | 1 << 8 | tag << 16 | tag << 24))
}

/// The tag and one id (9 bytes: the 9..=16-byte case).
#[inline]
pub fn nine_bytes(tag: u64, id: u64) -> u64 {
    nine_to_sixteen(9, tag | id << 8, id)
}

/// The tag and `N` ids, 2 ≤ `N` ≤ 15 (17..=121 bytes: the 17..=128-byte case).
/// Round `i` mixes bytes `16i..16i + 16` (front words `2i`, `2i + 1`) with the
/// keys at secret offset `32i`, and the 16 bytes ending `16i` before the end
/// (ids `N - 2 - 2i`, `N - 1 - 2i`) with those at `32i + 16`.
#[inline]
pub fn medium<const N: usize>(tag: u64, ids: &[u64; N]) -> u64 {
    let len = (1 + 8 * N) as u64;
    let mut acc = len.wrapping_mul(PRIME64_1);
    for i in 0..=(N / 4) {
        let a = mix(
            front(tag, ids, 2 * i),
            front(tag, ids, 2 * i + 1),
            KEYS[2 * i],
        );
        let b = mix(ids[N - 2 - 2 * i], ids[N - 1 - 2 * i], KEYS[2 * i + 1]);
        acc = acc.wrapping_add(a).wrapping_add(b);
    }
    avalanche(acc)
}

/// The tag and 16 ids (129 bytes: the 129..=240-byte case, with its eight
/// full chunks, no middle chunk, and the last 16 bytes: ids 14 and 15).
#[inline]
pub fn sixteen(tag: u64, ids: &[u64; 16]) -> u64 {
    let mut acc = 129u64.wrapping_mul(PRIME64_1);
    for (i, &keys) in KEYS.iter().enumerate() {
        let m = mix(front(tag, ids, 2 * i), front(tag, ids, 2 * i + 1), keys);
        acc = acc.wrapping_add(m);
    }
    acc = avalanche(acc);
    avalanche(acc.wrapping_add(mix(ids[14], ids[15], LAST_KEYS)))
}
