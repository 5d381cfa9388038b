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
pub fn int64(value: i64) -> u64 {
    integer(value < 0, &value.unsigned_abs().to_le_bytes())
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

/// Id of a bitstring whose length `bits` is not a multiple of 8. `bytes` holds
/// `ceil(bits / 8)` bytes, the last one's unused low-order bits set to zero.
pub fn bitstring(bytes: &[u8], bits: u64) -> u64 {
    let mut buf = Encoding::new(tag::BITSTRING, 8 + bytes.len());
    buf.push(&bits.to_le_bytes());
    buf.push(bytes);
    buf.hash()
}

/// Id of a tuple from its elements' ids.
pub fn tuple(ids: &[u64]) -> u64 {
    tagged_ids(tag::TUPLE, ids, None)
}

/// Id of a proper list from its elements' ids.
pub fn list(ids: &[u64]) -> u64 {
    tagged_ids(tag::LIST, ids, None)
}

/// Id of an improper list `[e1, ..., en | tail]` (n >= 1, tail not a list).
pub fn improper_list(ids: &[u64], tail: u64) -> u64 {
    tagged_ids(tag::IMPROPER_LIST, ids, Some(tail))
}

/// Id of a map from `(key id, value id)` pairs in any order (sorted here).
pub fn map(entries: &mut [(u64, u64)]) -> u64 {
    entries.sort_unstable();
    let mut buf = Encoding::new(tag::MAP, 16 * entries.len());
    for (k, v) in entries.iter() {
        buf.push(&k.to_le_bytes());
        buf.push(&v.to_le_bytes());
    }
    buf.hash()
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

fn tagged_ids(tag: u8, ids: &[u64], tail: Option<u64>) -> u64 {
    let mut buf = Encoding::new(tag, 8 * (ids.len() + 1));
    for id in ids.iter().chain(tail.iter()) {
        buf.push(&id.to_le_bytes());
    }
    buf.hash()
}

/// A tagged encoding being assembled: on the stack when small (most terms), then
/// hashed in one shot. (One-shot XXH3 with a seed is several times cheaper than the
/// streaming hasher, which derives a seeded secret first; the digests are equal.)
struct Encoding {
    small: [u8; 64],
    len: usize,
    large: Vec<u8>,
}

impl Encoding {
    fn new(tag: u8, payload: usize) -> Encoding {
        let mut e = Encoding {
            small: [0; 64],
            len: 0,
            large: if payload < 64 {
                Vec::new()
            } else {
                Vec::with_capacity(payload + 1)
            },
        };
        e.push(&[tag]);
        e
    }

    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        if self.large.capacity() == 0 && self.len + bytes.len() <= self.small.len() {
            self.small[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        } else {
            if self.large.is_empty() {
                self.large.extend_from_slice(&self.small[..self.len]);
            }
            self.large.extend_from_slice(bytes);
        }
    }

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
    fn pinned_vectors() {
        for (name, actual, expected) in crate::vectors::term_vectors() {
            assert_eq!(actual, expected, "{name}");
        }
    }
}
