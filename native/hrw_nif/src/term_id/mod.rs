//! Any Erlang term to its canonical u64 id (docs/HASHING.md, "Term ids").
//!
//! This module only walks terms; the encodings themselves live in
//! `hrw_core::term_hash`, so the spec has one implementation. Its files:
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the entry ([`term_id_in`]: probe order, dispatch), the cost model |
//! | `fast.rs` | fast paths: small integers, cached atoms, binaries, flat tuples and maps |
//! | `walk.rs` | the general walk: nested tuples, lists and maps on one id stack |
//! | `map_entries.rs` | a map's entries, straight from the VM's map iterator |
//! | `atom_cache.rs` | the per-VM table from an atom's term value to its id |
//! | `etf.rs` | the other leaves: floats, wide integers, atom names, bitstrings, pids, funs (read through the external term format where the NIF API cannot) |
//!
//! Budget: every step that costs more than a constant is charged *before* it runs,
//! with a named cost constant beside it (units ≈ ns, see `failure.rs`). A visit
//! costs [`work::TERM`]; hashing costs one unit per [`work::BYTES_PER_UNIT`] bytes
//! (the core's cost model, `hrw_core::work`, as is a sort's [`work::sort`]);
//! a tuple, list or map also pays for the buffer of its children's ids, a map for
//! its iteration and the sort of its entries, and every use of the external term
//! format (ETF) for its bytes. The only reads whose size is not known in advance
//! (the ETF of a bitstring, a fun, or an integer wider than [`MAX_NORMAL_BIG_BYTES`])
//! never run on a normal scheduler: they ask for the dirty twin first, and are
//! charged once their size is known (a dirty budget is unlimited; the charge keeps
//! the count honest). Test builds count the work beside each step (`work::count`),
//! at the step itself, for test/hrw/budget_test.exs.

mod atom_cache;
mod etf;
mod fast;
mod map_entries;
mod walk;

use crate::failure::{Budget, Failure, Outcome};
use crate::tuple_view::TupleView;
use etf::leaf_id;
use fast::{binary_leaf, fast_leaf, flat_map, flat_tuple, Fast};
use hrw_core::term_hash::MAX_ATOM_UTF8_BYTES;
use hrw_core::work;
use rustler::sys::{enif_get_map_size, ErlNifTerm};
use rustler::{Env, Term, TermType};
use walk::Walk;

/// Deeper nesting is refused: it keeps recursion far inside a scheduler's stack.
/// The term itself is at depth 0, the elements of a container at depth `d` are at
/// `d + 1`; a term at a depth above this is refused.
pub const MAX_DEPTH: usize = 256;

/// Holding one child id of a tuple, list or map in its encoding (the 8 bytes of
/// every id are also charged as hashed bytes).
const COST_PER_ID: u64 = 4;
/// Setting up and releasing the VM's iterator over one map.
const COST_PER_MAP: u64 = 64;
/// One step of the VM's map iterator (fetching an entry, advancing), besides the
/// visits of the entry's key and value. Large maps are HAMTs: iterating them is
/// several times slower than a list walk.
const COST_PER_MAP_ENTRY: u64 = 24;
/// One call into the VM's external term format (allocating the result binary, or
/// decoding a limit term; measured 110-290 ns a pid, ref or 2040-bit bignum warm,
/// several times that on a loaded machine).
const COST_PER_ETF_CALL: u64 = 240;
/// ETF bytes written or read per unit (digits and names are copied as they are).
const ETF_BYTES_PER_UNIT: u64 = 2;

/// Widest integer magnitude, in bytes, read on a normal scheduler (up to 2^2040 − 1).
/// Its size is proved by two comparisons with fixed limits before it is encoded.
pub const MAX_NORMAL_BIG_BYTES: usize = 255;
/// The narrower limit tried first, so that 65- to 128-bit integers pay for a small
/// limit term only.
const SMALL_BIG_BYTES: usize = 16;

/// Largest ETF of an atom: version, tag, a 2-byte length, the UTF-8 name.
const MAX_ATOM_ETF: usize = 4 + MAX_ATOM_UTF8_BYTES;
/// Largest ETF of a pid, port or reference: the node name (an atom) plus at most
/// 5 words of 4 bytes, a creation, lengths and tags (OTP 25 writes at most ~30
/// bytes besides the name).
const MAX_OPAQUE_ETF: usize = MAX_ATOM_ETF + 64;

/// One lookup (or first store) in the per-VM atom-id cache: a hash of the atom's
/// term value and one or two probes of a static table.
const COST_ATOM_CACHE: u64 = 4;

/// Reading an atom's name on a cache miss, besides its characters.
const COST_ATOM_READ: u64 = 48;

/// Widest tuple (and map, in entries) hashed on the stack by the flat fast path.
const FLAT_MAX: usize = 8;

/// The id of `term`, charging its cost to `budget`.
///
/// Fast paths first, for the keys people use: small integers, atoms (from the
/// per-VM cache, [`atom_cache`]), binaries, then tuples and small maps whose
/// elements are all of those, hashed on the stack. Every other term, and any
/// container holding one, takes the general walk. Both give the same ids
/// (docs/HASHING.md §2); the fast paths only skip the type query, the name copy of
/// an atom and the shared encoding buffer.
#[inline]
pub fn term_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    term_id_raw(term.get_env(), term.as_c_arg(), budget)
}

/// [`term_id`] of a raw term of `env`'s call: walkers over many terms pass raw
/// terms (a rustler `Term` carries a one-byte env kind, and moving one through
/// memory stalls the wider load that reads it back, per element).
#[inline]
pub fn term_id_raw(env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Outcome<u64> {
    term_id_in(env, raw, budget, &mut Probes::new())
}

/// In which order [`term_id_in`] asks what a boxed term is. Each failed probe is a
/// VM call (~2-3.5 ns here). A key, and the first term of a walk, is asked whether
/// it is a binary, and if not its type is queried (asking tuples and maps first
/// made binary keys 10-25% slower in `bench/keys.exs`, and other boxed keys
/// slower too). Once a walk over many terms has met a boxed term that is not a
/// binary, it asks the next ones whether they are a tuple or a map, then a
/// binary, and goes back to binaries first at the next term that is neither: a
/// list of tuples pays one failed probe and one type query, on its first element,
/// instead of both on every element (a batch of `{:user, i}` keys ~10% faster),
/// and a list of floats no more than a single float does.
#[derive(Clone, Copy)]
pub struct Probes {
    binaries_first: bool,
}

impl Probes {
    /// Binaries first (one key, or the start of a walk).
    pub fn new() -> Probes {
        Probes {
            binaries_first: true,
        }
    }
}

/// [`term_id_raw`], asking what a boxed term is in the order of `probes` (which it
/// updates: see [`Probes`]). Only the speed depends on the order.
#[inline]
pub fn term_id_in(
    env: Env,
    raw: ErlNifTerm,
    budget: &mut Budget,
    probes: &mut Probes,
) -> Outcome<u64> {
    budget.charge(work::TERM)?;
    work::count(work::TERM);
    if !boxed(raw) {
        return fast_leaf(env, raw, budget).or_else(|| slow_id(env, raw, budget, probes));
    }
    if probes.binaries_first {
        return binary_leaf(env, raw, budget).or_else(|| slow_id(env, raw, budget, probes));
    }
    if let Some(id) = container_id(env, raw, budget) {
        return id;
    }
    match binary_leaf(env, raw, budget) {
        Fast::Id(id) => {
            probes.binaries_first = true;
            Ok(id)
        }
        Fast::Dirty => Err(Failure::NeedsDirty),
        Fast::Other => slow_id(env, raw, budget, probes),
    }
}

/// The id of `raw` if it is a tuple or a map (`None` otherwise, nothing charged).
#[inline(always)]
fn container_id(env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Option<Outcome<u64>> {
    // SAFETY: a term of this call's env.
    let term = unsafe { Term::new(env, raw) };
    if let Some(tuple) = TupleView::of(term) {
        return Some(tuple_id(term, tuple.raw(), budget));
    }
    map_size(env, raw).map(|n| map_id(term, n, budget))
}

/// The id of the tuple `term` with `elements`, its visit charged.
#[inline(always)]
fn tuple_id(term: Term, elements: &[ErlNifTerm], budget: &mut Budget) -> Outcome<u64> {
    if let Some(id) = flat_tuple(term.get_env(), elements, budget)? {
        return Ok(id);
    }
    Walk::new(budget).container_id(term, TermType::Tuple, 0)
}

/// The id of the map `term` of `n` entries, its visit charged.
#[inline(always)]
fn map_id(term: Term, n: usize, budget: &mut Budget) -> Outcome<u64> {
    if let Some(id) = flat_map(term, n, budget)? {
        return Ok(id);
    }
    Walk::new(budget).container_id(term, TermType::Map, 0)
}

/// A term that no probe of [`term_id_in`] took, its visit charged: its type is
/// queried, then read as that type. The next term of a walk is probed as a
/// container first when this one is a tuple or a map, else as a binary first.
#[inline(never)]
fn slow_id(env: Env, raw: ErlNifTerm, budget: &mut Budget, probes: &mut Probes) -> Outcome<u64> {
    // SAFETY: a term of this call's env.
    let term = unsafe { Term::new(env, raw) };
    let kind = term.get_type();
    probes.binaries_first = !matches!(kind, TermType::Tuple | TermType::Map);
    match kind {
        TermType::Tuple => tuple_id(term, tuple_elements(term)?, budget),
        TermType::Map => {
            let n = map_size(env, raw).ok_or_else(|| unreadable("map"))?;
            map_id(term, n, budget)
        }
        TermType::List => Walk::new(budget).container_id(term, TermType::List, 0),
        kind => leaf_id(term, kind, budget),
    }
}

/// The number of entries of `raw` if it is a map.
#[inline(always)]
fn map_size(env: Env, raw: ErlNifTerm) -> Option<usize> {
    let mut size: usize = 0;
    // SAFETY: `size` is a valid out-pointer; the call returns 0 unless `raw` (a
    // term of `env`'s call) is a map, and then stores its size.
    (unsafe { enif_get_map_size(env.as_c_arg(), raw, &mut size) } != 0).then_some(size)
}

/// Where the VM's term layout hints at a small integer (low 4 bits `1111`) or an
/// atom (low 6 bits `001011`). Only an ordering hint: every value is still read
/// through the NIF API, so a different layout only makes the fast path slower.
#[inline(always)]
fn hint(term: ErlNifTerm) -> (bool, bool) {
    let raw = atom_cache::bits(term);
    (raw & 0xF == 0xF, raw & 0x3F == 0x0B)
}

/// Where the term layout hints at a boxed term (low 2 bits `10`: a tuple, binary,
/// map, bignum, float, ...). A hint as [`hint`] is.
#[inline(always)]
fn boxed(term: ErlNifTerm) -> bool {
    atom_cache::bits(term) & 0x3 == 0x2
}

/// The elements of a tuple term, in place (raw: the fast paths read them as such).
fn tuple_elements<'a>(term: Term<'a>) -> Outcome<&'a [ErlNifTerm]> {
    TupleView::of(term)
        .map(|t| t.raw())
        .ok_or_else(|| unreadable("tuple"))
}

#[inline]
fn hash_cost(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(work::BYTES_PER_UNIT)
}

/// Reading an atom's name of `chars` Latin-1 characters (the VM converts its
/// UTF-8 name a character at a time: ~40 ns + 0.4 ns a character measured on cache
/// misses) and hashing it (UTF-8 takes at most two bytes a Latin-1 character).
#[inline]
fn atom_read_cost(chars: usize) -> u64 {
    COST_ATOM_READ + (chars as u64).div_ceil(2) + hash_cost(1 + 2 * chars)
}

/// Copying an unaligned binary to an aligned buffer, bit-shifting every byte
/// (measured ~0.4 ns a byte warm, 1.2 on a loaded machine).
#[inline]
fn copy_cost(bytes: usize) -> u64 {
    bytes as u64
}

#[inline]
fn etf_cost(bytes: usize) -> u64 {
    COST_PER_ETF_CALL + (bytes as u64).div_ceil(ETF_BYTES_PER_UNIT)
}

/// Buffer and hash of `ids` child ids.
#[inline]
fn ids_cost(ids: usize) -> u64 {
    ids as u64 * COST_PER_ID + hash_cost(8 * ids + 1)
}

fn unreadable(what: &str) -> Failure {
    Failure::BadArg(format!("could not read {what} term"))
}

/// What a map of `n` entries costs besides its keys' and values' visits, charged
/// before it is read: the iteration, the entries' room and the encoding's hash,
/// and the sort.
fn charge_map(n: usize, budget: &mut Budget) -> Outcome<()> {
    budget.charge(COST_PER_MAP + n as u64 * COST_PER_MAP_ENTRY)?;
    budget.charge(ids_cost(2 * n))?;
    budget.charge(work::sort(n))
}
