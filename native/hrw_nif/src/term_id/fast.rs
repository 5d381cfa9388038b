//! The fast paths of the term walk: small integers, atoms (from [`atom_cache`]),
//! whole-byte binaries, and tuples and small maps of at most [`FLAT_MAX`] of them,
//! hashed on the stack. They give the same ids as the general walk
//! ([`Walk`]), to which they hand over what they do not take without charging
//! or visiting anything twice.

use super::etf::atom_id;
use super::map_entries::MapEntries;
use super::walk::Walk;
use super::{atom_cache, charge_map, copy_cost, hash_cost, hint, ids_cost, unreadable};
use super::{COST_ATOM_CACHE, COST_PER_MAP, COST_PER_MAP_ENTRY, FLAT_MAX};
use crate::failure::{Budget, Failure, Outcome};
use hrw_core::term_hash::{self, tag};
use hrw_core::work;
use rustler::sys::{enif_get_int64, enif_inspect_binary, enif_is_atom, ErlNifBinary, ErlNifTerm};
use rustler::{Env, Term};
use std::mem::MaybeUninit;

/// What [`fast_leaf`] found: small enough to come back in registers (an
/// `Outcome<Option<u64>>` goes through memory, and its byte-wide tag then stalls
/// the wider load that reads it back).
#[derive(Clone, Copy)]
pub(super) enum Fast {
    /// The term's id.
    Id(u64),
    /// Not a fast leaf (or one whose reading failed: the general walk reads it
    /// again and reports the error); nothing was charged beyond what is counted.
    Other,
    /// The budget ran out.
    Dirty,
}

impl Fast {
    /// The id found, the budget's failure, or else `other()`.
    #[inline(always)]
    pub(super) fn or_else(self, other: impl FnOnce() -> Outcome<u64>) -> Outcome<u64> {
        match self {
            Fast::Id(id) => Ok(id),
            Fast::Dirty => Err(Failure::NeedsDirty),
            Fast::Other => other(),
        }
    }
}

/// The id of a small integer, an atom or a binary, its visit already charged and
/// counted; [`Fast::Other`] for anything else. Reads the raw term with the NIF API
/// (a rustler `Term` built per element costs a stalled reload of its env flag).
#[inline(always)]
pub(super) fn fast_leaf(term_env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
    let env = term_env.as_c_arg();
    let (small, atom) = hint(raw);
    if small {
        let mut v: i64 = 0;
        // SAFETY: `v` is a valid out-pointer; the call returns 0 unless `raw` is an
        // integer that fits an i64, and then stores it.
        if unsafe { enif_get_int64(env, raw, &mut v) } != 0 {
            return Fast::Id(term_hash::int64(v));
        }
    } else if atom {
        if budget.charge(COST_ATOM_CACHE).is_err() {
            return Fast::Dirty;
        }
        work::count(COST_ATOM_CACHE);
        if let Some(id) = atom_cache::get(raw) {
            return Fast::Id(id);
        }
        // SAFETY: a term of this call's env.
        if unsafe { enif_is_atom(env, raw) } != 0 {
            // SAFETY: a term of this call's env.
            return first_atom_id(unsafe { Term::new(term_env, raw) }, budget);
        }
    }
    binary_leaf(term_env, raw, budget)
}

/// The id of a whole-byte binary, its visit already charged and counted (its
/// hashing charged here); [`Fast::Other`] for anything else.
#[inline(always)]
pub(super) fn binary_leaf(term_env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
    let env = term_env.as_c_arg();
    // Inspecting a binary that starts off a byte boundary copies it: charged first.
    let unaligned = crate::bits::unaligned_size(raw);
    if let Some(size) = unaligned {
        if budget.charge(copy_cost(size)).is_err() {
            return Fast::Dirty;
        }
        work::count(copy_cost(size));
    }
    let mut bin: MaybeUninit<ErlNifBinary> = MaybeUninit::uninit();
    // SAFETY: `bin` is a valid out-pointer; on success (a whole-byte binary) the VM
    // fills it with the binary's size and data pointer, valid while the term is
    // (this call), and we only read them.
    if unsafe { enif_inspect_binary(env, raw, bin.as_mut_ptr()) } != 0 {
        // SAFETY: initialised by the successful call.
        let bin = unsafe { bin.assume_init() };
        if unaligned.is_some_and(|size| size != bin.size) {
            crate::bits::disable();
        }
        if budget.charge(hash_cost(bin.size)).is_err() {
            return Fast::Dirty;
        }
        budget.note_binary(bin.size);
        work::count(hash_cost(bin.size));
        let bytes = if bin.size == 0 {
            &[][..]
        } else {
            // SAFETY: `data` points at `size` readable bytes of the binary (above).
            unsafe { std::slice::from_raw_parts(bin.data, bin.size) }
        };
        return Fast::Id(term_hash::binary(bytes));
    }
    Fast::Other
}

/// An atom missing from the cache: its id, computed (charged and counted in
/// [`atom_id`]) and stored (charged and counted here).
#[inline(never)]
fn first_atom_id(term: Term, budget: &mut Budget) -> Fast {
    match atom_id(term, budget) {
        Ok(id) => {
            if budget.charge(COST_ATOM_CACHE).is_err() {
                return Fast::Dirty;
            }
            work::count(COST_ATOM_CACHE);
            atom_cache::put(term.as_c_arg(), id);
            Fast::Id(id)
        }
        Err(Failure::NeedsDirty) => Fast::Dirty,
        Err(_) => Fast::Other,
    }
}

/// A tuple of at most [`FLAT_MAX`] elements, all of them [`fast_leaf`] terms: its
/// id, hashed from a stack buffer. `None`, having charged nothing, when it is wider
/// or its first element is not such a leaf; a later element that is not hands the
/// rest of the tuple to the general walk (with the ids so far: nothing is charged
/// or visited twice).
#[inline(never)]
pub(super) fn flat_tuple(
    env: Env,
    elements: &[ErlNifTerm],
    budget: &mut Budget,
) -> Outcome<Option<u64>> {
    if elements.len() > FLAT_MAX {
        return Ok(None);
    }
    budget.charge(ids_cost(elements.len()))?;
    work::count(ids_cost(elements.len()));
    let mut ids = [0u64; FLAT_MAX];
    for (i, &element) in elements.iter().enumerate() {
        budget.charge(work::TERM)?;
        work::count(work::TERM);
        match fast_leaf(env, element, budget) {
            Fast::Dirty => return Err(Failure::NeedsDirty),
            Fast::Id(id) => ids[i] = id,
            Fast::Other => {
                let mut walk = Walk::new(budget);
                let mark = walk.ids.open();
                walk.ids.reserve(elements.len());
                for &id in &ids[..i] {
                    walk.ids.push(id);
                }
                // This element's visit is charged: go on below the fast leaves.
                // SAFETY: `element` is a term of the tuple, valid in `env` for this call.
                let id = walk.non_binary_id(unsafe { Term::new(env, element) }, 1)?;
                walk.ids.push(id);
                for &rest in &elements[i + 1..] {
                    // SAFETY: as above.
                    let rest = unsafe { Term::new(env, rest) };
                    let id = walk.id_at(rest, 1)?;
                    walk.ids.push(id);
                }
                return Ok(Some(walk.ids.close(mark, tag::TUPLE)));
            }
        }
    }
    Ok(Some(term_hash::tagged_ids(
        tag::TUPLE,
        &ids[..elements.len()],
    )))
}

/// A map of at most [`FLAT_MAX`] entries: its id. When its keys and values are all
/// [`fast_leaf`] terms the entries are sorted and hashed on the stack; the first
/// key or value that is not hands the entries read so far and the open iterator to
/// [`Walk::map_rest`], so nothing is charged or visited twice. `None`, having
/// charged nothing, for a larger map.
#[inline(never)]
pub(super) fn flat_map(term: Term, n: usize, budget: &mut Budget) -> Outcome<Option<u64>> {
    let env = term.get_env();
    if n > FLAT_MAX {
        return Ok(None);
    }
    charge_map(n, budget)?;
    let mut slot = MaybeUninit::uninit();
    let mut iter = MapEntries::new(term, &mut slot)?;
    work::count(COST_PER_MAP);
    let mut entries = [(0u64, 0u64); FLAT_MAX];
    // Exactly `n` entries (the map's size): the iterator is advanced between them
    // only, not asked past the last one (two VM calls fewer a map).
    for len in 0..n {
        if len > 0 {
            iter.advance();
        }
        let (k, v) = iter.current().ok_or_else(|| unreadable("map"))?;
        // SAFETY: both are terms of the map, valid in `env` for this call.
        let term = |raw| unsafe { Term::new(env, raw) };
        work::count(COST_PER_MAP_ENTRY + ids_cost(2) - hash_cost(1));
        budget.charge(work::TERM)?;
        work::count(work::TERM);
        let kid = match fast_leaf(env, k, budget) {
            Fast::Id(id) => id,
            Fast::Dirty => return Err(Failure::NeedsDirty),
            Fast::Other => {
                iter.advance();
                let mut walk = Walk::new(budget);
                let kid = walk.non_binary_id(term(k), 1)?;
                let vid = walk.id_at(term(v), 1)?;
                return walk
                    .map_rest(env, n, iter, &entries[..len], (kid, vid))
                    .map(Some);
            }
        };
        budget.charge(work::TERM)?;
        work::count(work::TERM);
        let vid = match fast_leaf(env, v, budget) {
            Fast::Id(id) => id,
            Fast::Dirty => return Err(Failure::NeedsDirty),
            Fast::Other => {
                iter.advance();
                let mut walk = Walk::new(budget);
                let vid = walk.non_binary_id(term(v), 1)?;
                return walk
                    .map_rest(env, n, iter, &entries[..len], (kid, vid))
                    .map(Some);
            }
        };
        entries[len] = (kid, vid);
    }
    work::count(work::sort(n) + hash_cost(1));
    // Insertion sort by (key id, value id) into the flat encoding order.
    let mut flat = [0u64; 2 * FLAT_MAX];
    for (i, &(k, v)) in entries[..n].iter().enumerate() {
        let mut j = i;
        while j > 0 && (flat[2 * j - 2], flat[2 * j - 1]) > (k, v) {
            flat[2 * j] = flat[2 * j - 2];
            flat[2 * j + 1] = flat[2 * j - 1];
            j -= 1;
        }
        flat[2 * j] = k;
        flat[2 * j + 1] = v;
    }
    Ok(Some(term_hash::tagged_ids(tag::MAP, &flat[..2 * n])))
}
