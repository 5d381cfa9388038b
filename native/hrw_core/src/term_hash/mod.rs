//! The canonical term-id scheme (contract: docs/HASHING.md, "Term ids"; its
//! version 2 changed only weighted costs, so term ids are those of version 1).
//!
//! A binary's id is plain XXH3-64 (seed 0) of its bytes, so any XXH3 implementation
//! reproduces the id of a string. Every other type hashes a tagged encoding with the
//! seed [`TERM_SEED`], so no binary can structurally collide with a non-binary term.
//! Compound terms hash their children's ids (8 bytes little-endian each), never
//! their memory layout: ids do not depend on word size, endianness or OTP version.
//!
//! Files: `mod.rs` the encodings of each type; `tags.rs` the seed and type tags
//! they share; `words.rs` XXH3 computed from the ids of a tagged encoding without
//! writing it out; `id_stack.rs` the shared buffer a term walk builds nested
//! encodings on; `tests.rs` their vectors.

mod id_stack;
mod tags;
mod words;

pub use id_stack::{IdStack, Mark};
pub use tags::{tag, TERM_SEED};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

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
    // Assembled in a register and hashed from there (`words::short`): stored
    // bytes read back as wider words stall on store forwarding.
    let sign = (negative && magnitude != 0) as u128;
    let word = tag::INTEGER as u128 | sign << 8 | (magnitude as u128) << 16;
    words::short(word, 2 + len)
}

/// Widest container [`tagged_ids`] hashes (16 ids: a tuple of 16, a map of 8).
pub const MAX_TAGGED_IDS: usize = 16;

/// The id of the encoding `tag` then `ids` (8 bytes little-endian each), as
/// [`IdStack::close`] computes it, for at most [`MAX_TAGGED_IDS`] ids given in
/// encoding order (a map's entries sorted, key then value). Computed from the ids
/// themselves, with no buffer: see [`words`].
#[inline]
pub fn tagged_ids(tag: u8, ids: &[u64]) -> u64 {
    let ids = &ids[..ids.len().min(MAX_TAGGED_IDS)];
    let tag = tag as u64;
    // One instance per width: each is straight-line code with constant keys.
    macro_rules! by_width {
        ($($n:literal)*) => {
            match ids.len() {
                0 => words::one_byte(tag),
                1 => words::nine_bytes(tag, ids[0]),
                $($n => words::medium::<$n>(tag, ids.try_into().unwrap()),)*
                _ => words::sixteen(tag, ids.try_into().unwrap()),
            }
        };
    }
    by_width!(2 3 4 5 6 7 8 9 10 11 12 13 14 15)
}

/// Id of a float: its IEEE-754 binary64 bits, little-endian; -0.0 hashes as 0.0.
pub fn float(value: f64) -> u64 {
    let value = if value == 0.0 { 0.0 } else { value };
    words::nine_bytes(tag::FLOAT as u64, value.to_bits())
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
    let mut stack = IdStack::new();
    let mark = stack.open();
    for &id in ids {
        stack.push(id);
    }
    stack.push(tail);
    stack.close(mark, tag::IMPROPER_LIST)
}

fn from_ids(tag: u8, ids: &[u64]) -> u64 {
    let mut stack = IdStack::new();
    let mark = stack.open();
    for &id in ids {
        stack.push(id);
    }
    stack.close(mark, tag)
}

/// Id of a map from `(key id, value id)` pairs in any order (`&mut` only for
/// compatibility: the pairs are left as given).
pub fn map(entries: &mut [(u64, u64)]) -> u64 {
    let mut stack = IdStack::new();
    let mark = stack.open_map();
    for &(k, v) in entries.iter() {
        stack.push_entry(k, v);
    }
    stack.close_map(mark)
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

/// Bytes of an encoding kept on the stack.
const INLINE_BYTES: usize = 64;

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
    fn hash(&self) -> u64 {
        if self.large.is_empty() {
            xxh3_64_with_seed(&self.small[..self.len], TERM_SEED)
        } else {
            xxh3_64_with_seed(&self.large, TERM_SEED)
        }
    }
}

#[cfg(test)]
mod tests;
