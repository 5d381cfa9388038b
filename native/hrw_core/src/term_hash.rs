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

/// XXH3-64 with the seed [`TERM_SEED`] over the encoding `tag` then ids (8 bytes
/// little-endian each), computed straight from the ids: the algorithm only reads
/// the input as 64-bit little-endian words, and the words of such an encoding are
/// ids shifted by the tag byte (read from the front: `prev >> 56 | id << 8`, with
/// the tag as the first `prev`) or whole ids (read from the back: the input is
/// `1 + 8n` bytes long, so a word ending at the end starts just after a tag).
/// A float's encoding (the tag and its bits) is the 9-byte case.
/// Written from the published description of XXH3 (xxHash's `doc/xxhash_spec.md`,
/// 64-bit variant, inputs of 1, 9, 17..=128 and 129 bytes); equal bit for bit to
/// `xxhash_rust::xxh3::xxh3_64_with_seed` of the same bytes (tested below and in
/// `tests/xxh3_words.rs`).
mod words {
    use super::TERM_SEED;

    /// The first 136 bytes (the minimum secret size, all that inputs of at most
    /// 240 bytes read) of XXH3's default secret, from the specification.
    const SECRET: [u8; 136] = [
        0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad,
        0x1c, 0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3,
        0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc,
        0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6,
        0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65,
        0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19,
        0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9,
        0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31,
        0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb,
        0xc3,
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
    /// store forwarding (an integer's `HRW.term_id` measured 27.6 -> 26.1 ns).
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

/// The encodings of nested tuples, lists and maps, built on one shared buffer as a
/// walker visits a term depth first: [`open`](IdStack::open) a container,
/// [`push`](IdStack::push) its children's ids as they are known (a child container
/// is opened and closed above its parent's ids meanwhile), then
/// [`close`](IdStack::close) it with its tag (a list is known to be improper only at
/// its tail) to get its id. Maps collect `(key id, value id)` entries instead, sorted
/// when closed. Nothing is allocated until the buffers outgrow their inline part,
/// and a walker's stack frames need no buffer of their own.
pub struct IdStack {
    bytes: Spill<u8, 192>,
    entries: Spill<(u64, u64), 8>,
}

/// Where a container's encoding starts in an [`IdStack`].
#[derive(Clone, Copy)]
pub struct Mark(usize);

impl Default for IdStack {
    fn default() -> Self {
        IdStack::new()
    }
}

impl IdStack {
    #[inline]
    pub fn new() -> IdStack {
        IdStack {
            bytes: Spill::new(),
            entries: Spill::new(),
        }
    }

    /// Starts a tuple or list (its tag is given at [`close`](IdStack::close)).
    #[inline]
    pub fn open(&mut self) -> Mark {
        let mark = Mark(self.bytes.len());
        self.bytes.extend(&[0]);
        mark
    }

    /// Room for `ids` more ids without growing (an optimisation only).
    #[inline]
    pub fn reserve(&mut self, ids: usize) {
        self.bytes.reserve(8 * ids);
    }

    /// Appends the next child id of the innermost open tuple or list.
    #[inline]
    pub fn push(&mut self, id: u64) {
        self.bytes.extend(&id.to_le_bytes());
    }

    /// Ends the innermost open tuple or list, which has type tag `tag`; its id.
    #[inline]
    pub fn close(&mut self, mark: Mark, tag: u8) -> u64 {
        let encoding = &mut self.bytes.as_mut_slice()[mark.0..];
        encoding[0] = tag;
        let id = xxh3_64_with_seed(encoding, TERM_SEED);
        self.bytes.truncate(mark.0);
        id
    }

    /// Starts a map.
    #[inline]
    pub fn open_map(&mut self) -> Mark {
        Mark(self.entries.len())
    }

    /// Room for `n` more map entries without growing (an optimisation only).
    #[inline]
    pub fn reserve_entries(&mut self, n: usize) {
        self.entries.reserve(n);
    }

    /// Appends an entry of the innermost open map.
    #[inline]
    pub fn push_entry(&mut self, key: u64, value: u64) {
        self.entries.extend(&[(key, value)]);
    }

    /// The number of entries pushed since `mark`.
    #[inline]
    pub fn entries_since(&self, mark: Mark) -> usize {
        self.entries.len() - mark.0
    }

    /// Ends the innermost open map: sorts its entries by (key id, value id) and
    /// returns its id. (Not inlined: the sort's scratch space then stays off the
    /// stack frames of a recursive walker.)
    #[inline(never)]
    pub fn close_map(&mut self, mark: Mark) -> u64 {
        let entries = &mut self.entries.as_mut_slice()[mark.0..];
        entries.sort_unstable();
        let at = Mark(self.bytes.len());
        self.bytes.reserve(1 + 16 * entries.len());
        self.bytes.extend(&[0]);
        for &(k, v) in entries.iter() {
            self.bytes.extend(&k.to_le_bytes());
            self.bytes.extend(&v.to_le_bytes());
        }
        self.entries.truncate(mark.0);
        self.close(at, tag::MAP)
    }
}

/// A stack of `T` held inline up to `N` items, on the heap beyond.
struct Spill<T: Copy + Default, const N: usize> {
    inline: [T; N],
    len: usize,
    heap: Vec<T>,
}

impl<T: Copy + Default, const N: usize> Spill<T, N> {
    #[inline]
    fn new() -> Self {
        Spill {
            inline: [T::default(); N],
            len: 0,
            heap: Vec::new(),
        }
    }

    #[inline]
    fn spilled(&self) -> bool {
        self.heap.capacity() != 0
    }

    #[inline]
    fn len(&self) -> usize {
        if self.spilled() {
            self.heap.len()
        } else {
            self.len
        }
    }

    #[inline]
    fn reserve(&mut self, more: usize) {
        if self.spilled() || self.len + more > N {
            self.reserve_heap(more);
        }
    }

    #[inline(never)]
    fn reserve_heap(&mut self, more: usize) {
        if self.spilled() {
            self.heap.reserve(more);
        } else {
            let mut heap = Vec::with_capacity((self.len + more).max(2 * N));
            heap.extend_from_slice(&self.inline[..self.len]);
            self.heap = heap;
        }
    }

    #[inline]
    fn extend(&mut self, items: &[T]) {
        if !self.spilled() && self.len + items.len() <= N {
            self.inline[self.len..self.len + items.len()].copy_from_slice(items);
            self.len += items.len();
        } else {
            self.grow(items);
        }
    }

    #[inline(never)]
    fn grow(&mut self, items: &[T]) {
        self.reserve_heap(items.len());
        self.heap.extend_from_slice(items);
    }

    #[inline]
    fn truncate(&mut self, len: usize) {
        if self.spilled() {
            self.heap.truncate(len);
        } else {
            self.len = self.len.min(len);
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [T] {
        if self.spilled() {
            &mut self.heap
        } else {
            &mut self.inline[..self.len]
        }
    }
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
mod tests {
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
}
