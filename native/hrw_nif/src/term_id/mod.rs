//! Any Erlang term to its canonical u64 id (docs/HASHING.md, "Term ids"), and the
//! `term_id` and `score` NIFs.
//!
//! This module only walks terms; the encodings themselves live in
//! `hrw_core::term_hash`, so the spec has one implementation. Its files, each
//! importing only those below it in this table:
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the entry ([`term_id_in`]: probe order, dispatch) and the NIFs |
//! | `fast.rs` | flat tuples and small maps of fast leaves, hashed on the stack |
//! | `walk.rs` | the general walk: nested tuples, lists and maps on one id stack |
//! | `leaf.rs` | the fast leaves: small integers, cached atoms, whole-byte binaries |
//! | `etf.rs` | the other leaves: floats, wide integers, atom names, bitstrings, pids, funs (read through the external term format where the NIF API cannot) |
//! | `map_entries.rs` | a map's entries, straight from the VM's map iterator |
//! | `atom_cache.rs` | the per-VM table from an atom's term value to its id |
//! | `refusals.rs` | why a term has no id: the walk's error messages |
//!
//! Budget: every step that costs more than a constant is charged *before* it runs,
//! by a named constant or function of the cost model (`hrw_core::cost`, which holds
//! the term walk's figures too). A visit costs [`cost::TERM`]; hashing costs one
//! unit per [`cost::BYTES_PER_UNIT`] bytes, a sort [`cost::sort`]; a tuple, list or
//! map also pays for the buffer of its children's ids, a map for its iteration and
//! the sort of its entries, and every use of the external term format (ETF) for its
//! bytes. The only reads whose size is not known in advance (the ETF of a
//! bitstring, a fun, or an integer wider than [`etf::MAX_NORMAL_BIG_BYTES`]) never
//! run on a normal scheduler: they ask for a dirty one first, and are charged once
//! their size is known (a dirty budget is unlimited; the charge keeps the count
//! honest). Test builds count the work beside each step (`work::count`), at the
//! step itself, for test/hrw/budget_test.exs.

mod atom_cache;
mod etf;
mod fast;
mod leaf;
mod map_entries;
mod refusals;
mod walk;

use crate::budget::{needs_dirty, Budget, Outcome};
use crate::nif::nif;
use crate::tuple_view::TupleView;
use etf::leaf_id;
use fast::{flat_map, flat_tuple};
use hrw_core::{cost, n3, work};
use leaf::{binary_leaf, boxed, fast_leaf, Fast};
use refusals::unreadable;
use rustler::sys::{enif_get_map_size, ErlNifTerm};
use rustler::{Env, Term, TermType};
use walk::{tuple_elements, Walk};

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
/// VM call. A key, and the first term of a walk, is asked whether it is a binary
/// (the most common boxed key), and if not its type is queried. Once a walk over
/// many terms has met a boxed term that is not a binary, it asks the next ones
/// whether they are a tuple or a map, then a binary, and goes back to binaries
/// first at the next term that is neither: a list of tuples pays one failed probe
/// and one type query, on its first element, instead of both on every element,
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
    budget.charge(cost::TERM)?;
    work::count(cost::TERM);
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
        Fast::Dirty => needs_dirty(),
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

/// The canonical id of any term (docs/HASHING.md); exposed for users and tests.
fn id_of(term: Term, budget: &mut Budget) -> Outcome<u64> {
    term_id(term, budget)
}

/// The N3 score of `node` for `key`: `HRW.owner/2` picks the node maximising it.
fn score_of(key: Term, node: Term, budget: &mut Budget) -> Outcome<u64> {
    let k = n3::prep(term_id(key, budget)?);
    Ok(n3::score(k, term_id(node, budget)?))
}

nif!(term_id => id_of(term));
nif!(score => score_of(key, node));
