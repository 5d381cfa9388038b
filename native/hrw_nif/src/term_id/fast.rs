//! The flat fast paths of the term walk: tuples and small maps of at most
//! [`FLAT_MAX`] [`fast_leaf`] terms, hashed on the stack. They give the same ids as
//! the general walk ([`Walk`]), to which they hand over what they do not take
//! without charging or visiting anything twice.

use super::leaf::{fast_leaf, Fast};
use super::map_entries::MapEntries;
use super::refusals::unreadable;
use super::walk::{charge_map, Walk};
use crate::budget::{needs_dirty, Budget, Outcome};
use hrw_core::term_hash::{self, tag};
use hrw_core::{cost, work};
use rustler::sys::ErlNifTerm;
use rustler::{Env, Term};
use std::mem::MaybeUninit;

/// Widest tuple (and map, in entries) hashed on the stack by the flat fast path.
pub(super) const FLAT_MAX: usize = 8;

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
    budget.charge(cost::ids(elements.len()))?;
    work::count(cost::ids(elements.len()));
    let mut ids = [0u64; FLAT_MAX];
    for (i, &element) in elements.iter().enumerate() {
        budget.charge(cost::TERM)?;
        work::count(cost::TERM);
        match fast_leaf(env, element, budget) {
            Fast::Dirty => return needs_dirty(),
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
    work::count(cost::MAP);
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
        work::count(cost::MAP_ENTRY + cost::ids(2) - cost::hash(1));
        budget.charge(cost::TERM)?;
        work::count(cost::TERM);
        let kid = match fast_leaf(env, k, budget) {
            Fast::Id(id) => id,
            Fast::Dirty => return needs_dirty(),
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
        budget.charge(cost::TERM)?;
        work::count(cost::TERM);
        let vid = match fast_leaf(env, v, budget) {
            Fast::Id(id) => id,
            Fast::Dirty => return needs_dirty(),
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
    work::count(cost::sort(n) + cost::hash(1));
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
