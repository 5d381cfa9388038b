//! The canonical term-id scheme (contract: docs/HASHING.md, "Term ids", version 1).
//!
//! A binary's id is plain XXH3-64 (seed 0) of its bytes, so any XXH3 implementation
//! reproduces the id of a string. Every other type hashes a tagged encoding with the
//! seed [`TERM_SEED`], so no binary can structurally collide with a non-binary term.
//! Compound terms hash their children's ids (8 bytes little-endian each), never
//! their memory layout: ids do not depend on word size, endianness or OTP version.

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Seed for every non-binary term: the ASCII bytes "HRW1TERM" read big-endian.
pub const TERM_SEED: u64 = 0x4852_5731_5445_524D;

/// Type tags: the first byte of every tagged encoding.
pub mod tag {
    pub const INTEGER: u8 = 0x01;
    pub const FLOAT: u8 = 0x02;
    pub const ATOM: u8 = 0x03;
    pub const BITSTRING: u8 = 0x04;
    pub const TUPLE: u8 = 0x05;
    pub const LIST: u8 = 0x06;
    pub const IMPROPER_LIST: u8 = 0x07;
    pub const MAP: u8 = 0x08;
    pub const PID: u8 = 0x09;
    pub const PORT: u8 = 0x0A;
    pub const REFERENCE: u8 = 0x0B;
    pub const FUN: u8 = 0x0C;
}

/// Id of a binary (a bitstring whose length is a whole number of bytes).
#[inline]
pub fn binary(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// Id of an integer from its sign and little-endian magnitude bytes (trailing zero
/// bytes are ignored, so any width of the same value gives the same id; zero is
/// non-negative with an empty magnitude).
pub fn integer(negative: bool, magnitude_le: &[u8]) -> u64 {
    let len = magnitude_le
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    let magnitude = &magnitude_le[..len];
    let negative = negative && len > 0;
    let mut buf = Encoding::new(tag::INTEGER, 1 + len);
    buf.push(&[negative as u8]);
    buf.push(magnitude);
    buf.hash()
}

/// Id of an integer that fits in an `i64`.
#[inline]
pub fn int64(value: i64) -> u64 {
    word(value < 0, value.unsigned_abs())
}

/// Id of a non-negative integer that fits in a `u64`.
#[inline]
pub fn uint64(value: u64) -> u64 {
    word(false, value)
}

/// [`integer`] for a magnitude of at most 64 bits, on the stack.
#[inline]
fn word(negative: bool, magnitude: u64) -> u64 {
    let len = (64 - magnitude.leading_zeros() as usize).div_ceil(8);
    let mut buf = [0u8; 10];
    buf[0] = tag::INTEGER;
    buf[1] = (negative && magnitude != 0) as u8;
    buf[2..].copy_from_slice(&magnitude.to_le_bytes());
    xxh3_64_with_seed(&buf[..2 + len], TERM_SEED)
}

/// Id of a float: its IEEE-754 binary64 bits, little-endian; -0.0 hashes as 0.0.
pub fn float(value: f64) -> u64 {
    let value = if value == 0.0 { 0.0 } else { value };
    let mut buf = [0u8; 9];
    buf[0] = tag::FLOAT;
    buf[1..].copy_from_slice(&value.to_bits().to_le_bytes());
    xxh3_64_with_seed(&buf, TERM_SEED)
}

/// Id of an atom from its UTF-8 name.
pub fn atom(name: &[u8]) -> u64 {
    tagged_bytes(tag::ATOM, name)
}

/// Longest atom name: 255 characters.
pub const MAX_ATOM_CHARS: usize = 255;

/// Longest atom name in UTF-8 bytes (at most 4 bytes a character).
pub const MAX_ATOM_UTF8_BYTES: usize = 4 * MAX_ATOM_CHARS;

/// Id of an atom from its name in Latin-1 (one byte a character, as the VM hands out
/// names that fit Latin-1): the same id as [`atom`] of the name's UTF-8 bytes.
pub fn atom_latin1(name: &[u8]) -> u64 {
    if name.is_ascii() {
        return atom(name);
    }
    if name.len() > MAX_ATOM_CHARS {
        // No atom is this long; still give the documented id.
        let mut utf8 = Vec::with_capacity(2 * name.len());
        for &b in name {
            utf8.extend_from_slice(latin1_to_utf8(b).as_slice());
        }
        return atom(&utf8);
    }
    let mut buf = [0u8; 1 + 2 * MAX_ATOM_CHARS];
    buf[0] = tag::ATOM;
    let mut len = 1;
    for &b in name {
        let utf8 = latin1_to_utf8(b);
        buf[len..len + utf8.len()].copy_from_slice(utf8.as_slice());
        len += utf8.len();
    }
    xxh3_64_with_seed(&buf[..len], TERM_SEED)
}

/// The UTF-8 encoding of the Latin-1 character `b` (code point `b`).
#[inline]
fn latin1_to_utf8(b: u8) -> Utf8Char {
    if b < 0x80 {
        Utf8Char([b, 0], 1)
    } else {
        Utf8Char([0xC0 | (b >> 6), 0x80 | (b & 0x3F)], 2)
    }
}

struct Utf8Char([u8; 2], usize);

impl Utf8Char {
    fn as_slice(&self) -> &[u8] {
        &self.0[..self.1]
    }

    fn len(&self) -> usize {
        self.1
    }
}

/// Id of a bitstring whose length `bits` is not a multiple of 8, from its
/// `ceil(bits / 8)` bytes; the last byte's unused low-order bits are ignored (the
/// encoding sets them to zero).
pub fn bitstring(bytes: &[u8], bits: u64) -> u64 {
    let mut buf = Encoding::new(tag::BITSTRING, 8 + bytes.len());
    buf.push(&bits.to_le_bytes());
    if let Some((&last, whole)) = bytes.split_last() {
        let used = (bits % 8) as u32;
        let mask = if used == 0 {
            0xFF
        } else {
            0xFFu8 << (8 - used)
        };
        buf.push(whole);
        buf.push(&[last & mask]);
    }
    buf.hash()
}

/// Id of a tuple from its elements' ids.
pub fn tuple(ids: &[u64]) -> u64 {
    from_ids(tag::TUPLE, ids)
}

/// Id of a proper list from its elements' ids.
pub fn list(ids: &[u64]) -> u64 {
    from_ids(tag::LIST, ids)
}

/// Id of an improper list `[e1, ..., en | tail]` (n >= 1, tail not a list).
pub fn improper_list(ids: &[u64], tail: u64) -> u64 {
    let mut enc = IdEncoding::with_capacity(ids.len() + 1);
    for &id in ids {
        enc.push(id);
    }
    enc.push(tail);
    enc.finish(tag::IMPROPER_LIST)
}

fn from_ids(tag: u8, ids: &[u64]) -> u64 {
    let mut enc = IdEncoding::with_capacity(ids.len());
    for &id in ids {
        enc.push(id);
    }
    enc.finish(tag)
}

/// Id of a map from `(key id, value id)` pairs in any order (sorted here).
pub fn map(entries: &mut [(u64, u64)]) -> u64 {
    entries.sort_unstable();
    map_sorted(entries)
}

/// Id of a map from `(key id, value id)` pairs already in ascending order.
pub fn map_sorted(entries: &[(u64, u64)]) -> u64 {
    debug_assert!(entries.windows(2).all(|w| w[0] <= w[1]));
    let mut enc = IdEncoding::with_capacity(2 * entries.len());
    for &(k, v) in entries {
        enc.push(k);
        enc.push(v);
    }
    enc.finish(tag::MAP)
}

/// Id of a node-local term (pid, port, reference, fun) from an opaque encoding
/// supplied by the runtime. Stable only as long as that encoding is.
pub fn opaque(tag: u8, encoding: &[u8]) -> u64 {
    tagged_bytes(tag, encoding)
}

fn tagged_bytes(tag: u8, bytes: &[u8]) -> u64 {
    let mut buf = Encoding::new(tag, bytes.len());
    buf.push(bytes);
    buf.hash()
}

/// The encoding of a tuple, list, improper list or map, fed one child id at a time
/// (8 bytes little-endian each), so a caller walking a term needs no buffer of its
/// own. The tag is given last: a list is known to be improper only at its tail.
/// Up to [`IdEncoding::INLINE_IDS`] ids stay on the stack.
pub struct IdEncoding {
    enc: Encoding,
}

impl IdEncoding {
    /// Ids held without a heap allocation.
    pub const INLINE_IDS: usize = (INLINE_BYTES - 1) / 8;

    /// An empty encoding with room for `ids` ids (more may be pushed).
    #[inline]
    pub fn with_capacity(ids: usize) -> IdEncoding {
        IdEncoding {
            enc: Encoding::new(0, 8 * ids),
        }
    }

    #[inline]
    pub fn push(&mut self, id: u64) {
        self.enc.push(&id.to_le_bytes());
    }

    /// The id of the term with type tag `tag` whose children were pushed.
    #[inline]
    pub fn finish(mut self, tag: u8) -> u64 {
        self.enc.set_tag(tag);
        self.enc.hash()
    }
}

/// Bytes of an encoding kept on the stack.
const INLINE_BYTES: usize = 128;

/// A tagged encoding being assembled: on the stack when small (most terms), then
/// hashed in one shot. (One-shot XXH3 with a seed is several times cheaper than the
/// streaming hasher, which derives a seeded secret first; the digests are equal.)
struct Encoding {
    small: [u8; INLINE_BYTES],
    len: usize,
    large: Vec<u8>,
}

impl Encoding {
    #[inline]
    fn new(tag: u8, payload: usize) -> Encoding {
        let mut e = Encoding {
            small: [0; INLINE_BYTES],
            len: 1,
            large: if payload < INLINE_BYTES {
                Vec::new()
            } else {
                let mut v = Vec::with_capacity(payload + 1);
                v.push(tag);
                v
            },
        };
        e.small[0] = tag;
        e
    }

    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        if self.large.capacity() == 0 && self.len + bytes.len() <= INLINE_BYTES {
            self.small[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        } else {
            if self.large.is_empty() {
                self.large.extend_from_slice(&self.small[..self.len]);
            }
            self.large.extend_from_slice(bytes);
        }
    }

    #[inline]
    fn set_tag(&mut self, tag: u8) {
        self.small[0] = tag;
        if let Some(first) = self.large.first_mut() {
            *first = tag;
        }
    }

    #[inline]
    fn hash(&self) -> u64 {
        if self.large.is_empty() {
            xxh3_64_with_seed(&self.small[..self.len], TERM_SEED)
        } else {
            xxh3_64_with_seed(&self.large, TERM_SEED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_is_plain_xxh3() {
        // Reference values of XXH3-64 (seed 0) from the xxHash project's own tooling.
        assert_eq!(binary(b""), 0x2d06800538d394c2);
        assert_eq!(binary(b"a"), 0xe6c632b61e964e1f);
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
    fn id_encoding_spills_to_the_heap_unchanged() {
        // Across the inline size, the streamed encoding equals a plain buffer.
        for n in [
            0,
            1,
            IdEncoding::INLINE_IDS - 1,
            IdEncoding::INLINE_IDS,
            IdEncoding::INLINE_IDS + 1,
            1000,
        ] {
            let ids: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(0x9e3779b97f4a7c15))
                .collect();
            let mut bytes = vec![tag::LIST];
            for id in &ids {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
            let expected = xxh3_64_with_seed(&bytes, TERM_SEED);
            assert_eq!(list(&ids), expected, "{n}");
            let mut grown = IdEncoding::with_capacity(0);
            let mut sized = IdEncoding::with_capacity(n);
            for &id in &ids {
                grown.push(id);
                sized.push(id);
            }
            assert_eq!(grown.finish(tag::LIST), expected, "{n}");
            assert_eq!(sized.finish(tag::LIST), expected, "{n}");
        }
    }

    #[test]
    fn pinned_vectors() {
        for (name, actual, expected) in crate::vectors::term_vectors() {
            assert_eq!(actual, expected, "{name}");
        }
    }
}
