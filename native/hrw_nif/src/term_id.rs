//! Any Erlang term to its canonical u64 id (docs/HASHING.md, "Term ids").
//!
//! This file only walks terms; the encodings themselves live in
//! `hrw_core::term_hash`, so the spec has one implementation.

use crate::failure::{bad_arg, Budget, Failure, Outcome};
use crate::tuple_view::TupleView;
use hrw_core::term_hash::{self, tag};
use hrw_core::work;
use rustler::types::map::MapIterator;
use rustler::{Binary, Term, TermType};

/// Deeper nesting is refused: it keeps recursion far inside a scheduler's stack.
pub const MAX_DEPTH: usize = 256;

/// Budget units (≈ ns) per term visited and per 16 bytes hashed.
pub const COST_PER_TERM: u64 = 16;
const BYTES_PER_UNIT: u64 = 16;

/// The id of `term`, charging its cost to `budget`.
pub fn term_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    id_at(term, budget, 0)
}

fn charge_bytes(budget: &mut Budget, len: usize) -> Outcome<()> {
    budget.charge(COST_PER_TERM + len as u64 / BYTES_PER_UNIT)
}

fn id_at(term: Term, budget: &mut Budget, depth: usize) -> Outcome<u64> {
    if depth > MAX_DEPTH {
        return bad_arg(format!("term nested deeper than {MAX_DEPTH} levels"));
    }
    // Binaries are by far the most common keys and nodes: try them first, which
    // skips the generic type query.
    if let Ok(bin) = Binary::from_term(term) {
        charge_bytes(budget, bin.len())?;
        work::count(work::TERM + work::bytes(bin.len()));
        return Ok(term_hash::binary(bin.as_slice()));
    }
    match term.get_type() {
        // Not a whole-byte binary (tried above): a bitstring.
        TermType::Binary => bitstring_id(term, budget),
        TermType::Integer => {
            budget.charge(COST_PER_TERM)?;
            work::count(work::TERM);
            if let Ok(v) = term.decode::<i64>() {
                Ok(term_hash::int64(v))
            } else if let Ok(v) = term.decode::<i128>() {
                Ok(term_hash::integer(v < 0, &v.unsigned_abs().to_le_bytes()))
            } else {
                big_integer_id(term, budget)
            }
        }
        TermType::Float => {
            budget.charge(COST_PER_TERM)?;
            work::count(work::TERM);
            let value: f64 = term.decode().map_err(|_| unreadable("float"))?;
            Ok(term_hash::float(value))
        }
        TermType::Atom => {
            let name = term.atom_to_string().map_err(|_| unreadable("atom"))?;
            charge_bytes(budget, name.len())?;
            work::count(work::TERM + work::bytes(name.len()));
            Ok(term_hash::atom(name.as_bytes()))
        }
        TermType::Tuple => {
            // Read in place: the arity is known before any element is touched.
            let elements = TupleView::of(term).ok_or_else(|| unreadable("tuple"))?;
            let n = elements.len();
            budget.charge(COST_PER_TERM + container_cost(n))?;
            work::count(work::TERM + container_cost(n));
            let ids = (0..n)
                .filter_map(|i| elements.get(i))
                .map(|e| id_at(e, budget, depth + 1))
                .collect::<Outcome<Vec<u64>>>()?;
            Ok(term_hash::tuple(&ids))
        }
        TermType::List => list_id(term, budget, depth),
        TermType::Map => {
            budget.charge(COST_PER_TERM)?;
            let iter = MapIterator::new(term).ok_or_else(|| unreadable("map"))?;
            work::count(work::TERM);
            let mut entries = Vec::new();
            for (k, v) in iter {
                budget.charge(2 * work::ELEMENT)?;
                work::count(2 * work::ELEMENT);
                entries.push((id_at(k, budget, depth + 1)?, id_at(v, budget, depth + 1)?));
            }
            // The entries are sorted by id (order-independence), then hashed.
            let sort = work::sort(entries.len()) + work::bytes(16 * entries.len());
            budget.charge(sort)?;
            work::count(sort);
            Ok(term_hash::map(&mut entries))
        }
        TermType::Pid => opaque_id(tag::PID, term, budget),
        TermType::Port => opaque_id(tag::PORT, term, budget),
        TermType::Ref => opaque_id(tag::REFERENCE, term, budget),
        TermType::Fun => opaque_id(tag::FUN, term, budget),
        TermType::Unknown => bad_arg("term of an unknown type cannot be hashed"),
    }
}

/// Units for a container's `n` element ids beyond visiting the elements: the id
/// buffer and hashing 8 bytes per id (rounded up per element, so that charging
/// element by element covers it).
const fn container_cost(n: usize) -> u64 {
    (2 * work::ELEMENT + 1) * n as u64
}

fn unreadable(what: &str) -> Failure {
    Failure::BadArg(format!("could not read {what} term"))
}

/// Walks cons cells itself: rustler's list iterator panics on improper lists.
fn list_id(term: Term, budget: &mut Budget, depth: usize) -> Outcome<u64> {
    let mut ids = Vec::new();
    let mut rest = term;
    loop {
        // The cell, and its id's share of the buffer and of the final hash.
        budget.charge(COST_PER_TERM + container_cost(1))?;
        work::count(work::TERM + container_cost(1));
        if rest.is_empty_list() {
            return Ok(term_hash::list(&ids));
        }
        match rest.list_get_cell() {
            Ok((head, tail)) => {
                ids.push(id_at(head, budget, depth + 1)?);
                rest = tail;
            }
            Err(_) => {
                let tail = id_at(rest, budget, depth + 1)?;
                return Ok(term_hash::improper_list(&ids, tail));
            }
        }
    }
}

/// The external term format of `term` (documented and stable; used only to read the
/// value of bignums and the bits of bitstrings, never hashed as such for those).
/// `small` says the encoding has a small fixed bound (pids, ports, references);
/// others (bignums, bitstrings, funs with their environment) can be arbitrarily
/// large and their size is unknown until encoded, so a normal-scheduler call hands
/// them to a dirty scheduler instead of encoding first.
fn external(term: Term, small: bool, budget: &mut Budget) -> Outcome<rustler::OwnedBinary> {
    if !small && budget.is_limited() {
        return Err(Failure::NeedsDirty);
    }
    budget.charge(COST_PER_TERM)?;
    // Bounded here (a small term, or any term on a dirty scheduler).
    let ext = term.to_binary();
    charge_bytes(budget, ext.as_slice().len())?;
    work::count(work::TERM + work::bytes(ext.as_slice().len()));
    Ok(ext)
}

fn big_integer_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    let ext = external(term, false, budget)?;
    let bytes = ext.as_slice();
    // 131, then SMALL_BIG_EXT (110, n:u8, sign:u8, digits) or LARGE_BIG_EXT
    // (111, n:u32 big-endian, sign:u8, digits); digits are the magnitude, little-endian.
    let (len, rest) = match bytes {
        [131, 110, n, rest @ ..] => (*n as usize, rest),
        [131, 111, a, b, c, d, rest @ ..] => (u32::from_be_bytes([*a, *b, *c, *d]) as usize, rest),
        _ => return Err(unreadable("integer")),
    };
    match rest {
        [sign, digits @ ..] if digits.len() == len => Ok(term_hash::integer(*sign != 0, digits)),
        _ => Err(unreadable("integer")),
    }
}

fn bitstring_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    let ext = external(term, false, budget)?;
    // 131, BIT_BINARY_EXT (77, len:u32 big-endian, bits-in-last-byte:u8, data).
    match ext.as_slice() {
        [131, 77, a, b, c, d, last_bits, data @ ..]
            if data.len() == u32::from_be_bytes([*a, *b, *c, *d]) as usize && !data.is_empty() =>
        {
            let bits = (data.len() as u64 - 1) * 8 + *last_bits as u64;
            // The spec wants the unused low bits of the last byte zero; do not rely on
            // the encoder for that.
            let mut data = data.to_vec();
            if let Some(last) = data.last_mut() {
                *last &= 0xFFu8 << (8 - (*last_bits).clamp(1, 8) as u32) as u8;
            }
            Ok(term_hash::bitstring(&data, bits))
        }
        _ => Err(unreadable("bitstring")),
    }
}

/// Pids, ports, references and funs name things inside one running cluster; their
/// ids hash the external term format and are stable only within that cluster.
fn opaque_id(tag: u8, term: Term, budget: &mut Budget) -> Outcome<u64> {
    let ext = external(term, tag != tag::FUN, budget)?;
    Ok(term_hash::opaque(tag, ext.as_slice()))
}
