//! The leaves that are neither a small integer, a cached atom nor a whole-byte
//! binary: floats, integers (those outside `i64` and `u64` from their external
//! term format, ETF), atom names (Latin-1 through the NIF API, others from their
//! ETF), bitstrings, pids, ports, references and funs (from their ETF).

use super::refusals::{unencodable, unknown_type, unreadable};
use crate::budget::{needs_dirty, Budget, Outcome};
use hrw_core::term_hash::{self, tag, MAX_ATOM_CHARS, MAX_ATOM_UTF8_BYTES};
use hrw_core::{cost, work};
use rustler::sys::{
    enif_get_atom, enif_get_atom_length, enif_term_to_binary, ErlNifBinary, ErlNifCharEncoding,
};
use rustler::{Encoder, Env, OwnedBinary, Term, TermType};
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_uint};

/// Widest integer magnitude, in bytes, read on a normal scheduler (up to 2^2040 − 1).
/// Its size is proved by two comparisons with fixed limits before it is encoded.
pub const MAX_NORMAL_BIG_BYTES: usize = 255;
/// The narrower limit tried first, so that 65- to 128-bit integers pay for a small
/// limit term only.
const SMALL_BIG_BYTES: usize = 16;

/// Largest ETF of an atom: version, tag, a 2-byte length, the UTF-8 name.
const MAX_ATOM_ETF: usize = 4 + MAX_ATOM_UTF8_BYTES;
/// Largest ETF of a pid, port or reference: the node name (an atom) plus at most
/// 5 words of 4 bytes, a creation, lengths and tags.
const MAX_OPAQUE_ETF: usize = MAX_ATOM_ETF + 64;

/// The id of a term that is neither a binary nor a container, its visit charged.
pub(super) fn leaf_id(term: Term, kind: TermType, budget: &mut Budget) -> Outcome<u64> {
    match kind {
        // Not a whole-byte binary (tried first): a bitstring.
        TermType::Binary => bitstring_id(term, budget),
        TermType::Integer => integer_id(term, budget),
        TermType::Float => {
            let value: f64 = term.decode().map_err(|_| unreadable("float"))?;
            Ok(term_hash::float(value))
        }
        TermType::Atom => atom_id(term, budget),
        TermType::Pid => opaque_id(tag::PID, term, budget),
        TermType::Port => opaque_id(tag::PORT, term, budget),
        TermType::Ref => opaque_id(tag::REFERENCE, term, budget),
        TermType::Fun => opaque_id(tag::FUN, term, budget),
        TermType::Tuple | TermType::List | TermType::Map => Err(unreadable("container as a leaf")),
        TermType::Unknown => Err(unknown_type()),
    }
}

fn integer_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    if let Ok(v) = term.decode::<i64>() {
        return Ok(term_hash::int64(v));
    }
    if let Ok(v) = term.decode::<u64>() {
        return Ok(term_hash::uint64(v));
    }
    big_integer_id(term, budget)
}

/// An integer outside `i64` and `u64`: the NIF API cannot read it, the ETF can.
/// (rustler's `decode::<i128>` is not used: it encodes the whole integer before
/// looking at its size, and wraps negative values below −2^127.)
#[inline(never)]
fn big_integer_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    let ext = if budget.is_limited() {
        let Some(bytes) = bounded_big_bytes(term, budget)? else {
            return needs_dirty();
        };
        // SMALL_BIG_EXT of `bytes` digits: version, tag, length, sign, digits.
        budget.charge(cost::etf(4 + bytes))?;
        to_etf(term)?
    } else {
        // Dirty scheduler: the size is unknown until encoded; charged after.
        let ext = to_etf(term)?;
        budget.charge(cost::etf(ext.len()))?;
        ext
    };
    // 131, then SMALL_BIG_EXT (110, n:u8, sign:u8, digits) or LARGE_BIG_EXT
    // (111, n:u32 big-endian, sign:u8, digits); digits are the magnitude, little-endian.
    let (len, rest) = match ext.as_slice() {
        [131, 110, n, rest @ ..] => (*n as usize, rest),
        [131, 111, a, b, c, d, rest @ ..] => (u32::from_be_bytes([*a, *b, *c, *d]) as usize, rest),
        _ => return Err(unreadable("integer")),
    };
    match rest {
        [sign @ (0 | 1), digits @ ..] if digits.len() == len => {
            budget.pay(cost::hash(2 + len))?;
            Ok(term_hash::integer(*sign == 1, digits))
        }
        _ => Err(unreadable("integer")),
    }
}

/// On a normal scheduler: the number of magnitude bytes that bounds `term` (a
/// bignum), or `None` when it is wider than [`MAX_NORMAL_BIG_BYTES`]. Compares it
/// with ±(2^(8·n) − 1), built from a fixed ETF; comparing two bignums of different
/// sizes looks at their sizes only, so each comparison costs at most the limit's size.
#[inline(never)]
fn bounded_big_bytes(term: Term, budget: &mut Budget) -> Outcome<Option<usize>> {
    let env = term.get_env();
    let negative = term < 0i64.encode(env);
    for bytes in [SMALL_BIG_BYTES, MAX_NORMAL_BIG_BYTES] {
        // Decoding the limit and one comparison with it.
        budget.pay(cost::etf(4 + bytes) + cost::hash(bytes))?;
        let limit = big_limit(env, bytes, negative)?;
        let inside = if negative {
            term >= limit
        } else {
            term <= limit
        };
        if inside {
            return Ok(Some(bytes));
        }
    }
    Ok(None)
}

/// The integer `2^(8·bytes) − 1`, negated when `negative` (`bytes` ≤ 255).
fn big_limit(env: Env, bytes: usize, negative: bool) -> Outcome<Term> {
    let mut etf = [0xFFu8; 4 + MAX_NORMAL_BIG_BYTES];
    etf[..4].copy_from_slice(&[131, 110, bytes as u8, negative as u8]);
    env.binary_to_term(&etf[..4 + bytes])
        .map(|(term, _)| term)
        .ok_or_else(|| unreadable("integer"))
}

#[inline(never)]
pub(super) fn atom_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    // The name's length first (O(1) in the VM), so its read, conversion and hash
    // are charged before they run.
    let mut chars: c_uint = 0;
    // SAFETY: `chars` is a valid out-pointer; the call returns 0 unless `term` is an
    // atom whose name fits Latin-1, and then stores its length.
    let latin1 = unsafe {
        enif_get_atom_length(
            term.get_env().as_c_arg(),
            term.as_c_arg(),
            &mut chars,
            ErlNifCharEncoding::ERL_NIF_LATIN1,
        )
    } != 0;
    if latin1 {
        budget.charge(cost::atom_read(chars as usize))?;
    }
    // Names that fit Latin-1 (nearly all): read straight into a stack buffer, at
    // most 255 characters and a NUL (left uninitialised: the VM writes it).
    let mut buf: MaybeUninit<[u8; MAX_ATOM_CHARS + 1]> = MaybeUninit::uninit();
    // SAFETY: `buf` is writable for the `len` bytes passed; the VM writes at most
    // that many (the name and a NUL) and returns 0 when the term is not an atom,
    // its name does not fit Latin-1, or the buffer is too small.
    let written = unsafe {
        enif_get_atom(
            term.get_env().as_c_arg(),
            term.as_c_arg(),
            buf.as_mut_ptr() as *mut c_char,
            (MAX_ATOM_CHARS + 1) as c_uint,
            ErlNifCharEncoding::ERL_NIF_LATIN1,
        )
    };
    if latin1 && written > 0 && written as usize <= MAX_ATOM_CHARS + 1 {
        // SAFETY: the VM wrote `written` bytes (the name, then a NUL) from the start.
        let name =
            unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, written as usize - 1) };
        // Charged from the length above (the same atom: names never change).
        work::count(cost::atom_read(name.len()));
        return Ok(term_hash::atom_latin1(name));
    }
    // A name outside Latin-1: NIF 2.16 cannot read it, but the ETF carries it in
    // UTF-8 (ATOM_UTF8_EXT / SMALL_ATOM_UTF8_EXT), at most 255 characters.
    budget.charge(cost::etf(MAX_ATOM_ETF))?;
    let ext = to_etf(term)?;
    let (utf8, name) = match ext.as_slice() {
        [131, 119, len, name @ ..] if name.len() == *len as usize => (true, name),
        [131, 115, len, name @ ..] if name.len() == *len as usize => (false, name),
        [131, 118 | 100, hi, lo, name @ ..]
            if name.len() == u16::from_be_bytes([*hi, *lo]) as usize =>
        {
            (ext.as_slice()[1] == 118, name)
        }
        _ => return Err(unreadable("atom")),
    };
    budget.pay(cost::hash(1 + 2 * name.len()))?;
    Ok(if utf8 {
        term_hash::atom(name)
    } else {
        term_hash::atom_latin1(name)
    })
}

#[inline(never)]
fn bitstring_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    if budget.is_limited() {
        // Its size cannot be read without encoding it.
        return needs_dirty();
    }
    let ext = to_etf(term)?;
    budget.charge(cost::etf(ext.len()) + cost::hash(ext.len()))?;
    // 131, BIT_BINARY_EXT (77, len:u32 big-endian, bits-in-last-byte:u8, data).
    match ext.as_slice() {
        [131, 77, a, b, c, d, last_bits @ 1..=8, data @ ..]
            if data.len() == u32::from_be_bytes([*a, *b, *c, *d]) as usize && !data.is_empty() =>
        {
            let bits = (data.len() as u64 - 1) * 8 + *last_bits as u64;
            // term_hash::bitstring zeroes the unused low bits of the last byte.
            Ok(term_hash::bitstring(data, bits))
        }
        _ => Err(unreadable("bitstring")),
    }
}

/// Pids, ports, references and funs name things inside one running cluster; their
/// ids hash the ETF and are stable only within that cluster. A pid, port or
/// reference has a small bounded ETF; a fun carries its environment, of any size.
#[inline(never)]
fn opaque_id(tag: u8, term: Term, budget: &mut Budget) -> Outcome<u64> {
    let ext = if tag == tag::FUN {
        if budget.is_limited() {
            return needs_dirty();
        }
        let ext = to_etf(term)?;
        budget.charge(cost::etf(ext.len()))?;
        ext
    } else {
        budget.charge(cost::etf(MAX_OPAQUE_ETF))?;
        let ext = to_etf(term)?;
        // Never expected; keeps the charge an upper bound whatever the VM writes.
        budget.charge(cost::etf(ext.len()).saturating_sub(cost::etf(MAX_OPAQUE_ETF)))?;
        ext
    };
    budget.pay(cost::hash(ext.len() + 1))?;
    Ok(term_hash::opaque(tag, ext.as_slice()))
}

/// `term_to_binary(term)`: the documented, stable external term format. Charged by
/// the caller.
fn to_etf(term: Term) -> Outcome<OwnedBinary> {
    let mut bin: MaybeUninit<ErlNifBinary> = MaybeUninit::uninit();
    // SAFETY: `bin` is a valid out-pointer; on success the VM initialises it with a
    // newly allocated binary that we own (released when the `OwnedBinary` drops).
    let ok = unsafe {
        enif_term_to_binary(term.get_env().as_c_arg(), term.as_c_arg(), bin.as_mut_ptr())
    };
    if ok == 0 {
        return Err(unencodable());
    }
    // SAFETY: initialised by the successful call above, and owned by nobody else.
    let bin = unsafe { OwnedBinary::from_raw(bin.assume_init()) };
    work::count(cost::etf(bin.as_slice().len()));
    Ok(bin)
}
