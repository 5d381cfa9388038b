//! `HRW.Bounded.assignments/3`, native path: one call for the whole key set.

use crate::budget::{Budget, Outcome};
use crate::cells::walk_keys;
use crate::errors::bad_arg;
use crate::nif::nif;
use crate::nodeset;
use hrw_core::bounded::assign_sorted;
use hrw_core::{cost, sort, work};
use rustler::sys::{enif_make_map_from_arrays, ErlNifTerm};
use rustler::{Env, Term};
use std::mem::MaybeUninit;

fn assignments<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    nodes: Term<'a>,
    epsilon: f64,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let set = nodeset::decode(nodes, false, budget)?;
    let per_key = cost::bounded_key(set.nodes.len());
    // The keys' walks and binary bytes: what the result map's builder hashes.
    let bytes = budget.binary_bytes();
    let keys = walk_keys(keys, per_key, true, budget)?;
    let terms = keys.terms;
    // (id, position) per key.
    work::count(cost::ELEMENT * keys.ids.len() as u64);
    let mut order: Vec<(u64, usize)> = keys.ids.into_iter().zip(0..).collect();
    let k = order.len();
    // The result map hashes (or compares) every key: charged before it is built.
    let key_bytes = budget.binary_bytes().wrapping_sub(bytes);
    let map_keys = cost::map_keys(cost::map_key(keys.walk_units, key_bytes), k);
    budget.pay(map_keys)?;
    budget.charge(cost::bounded_rest(k, set.nodes.len()))?;
    // By (id, position), the order of a stable sort by id; equal ids are equal keys
    // (`0.0` and `-0.0`): the first occurrence in the input stays.
    sort::by_id(&mut order);
    order.dedup_by_key(|e| e.0);
    work::count(2 * cost::ELEMENT * k as u64 + cost::sort(k));
    let ids: Vec<u64> = order.iter().map(|e| e.0).collect();
    let node_ids: Vec<u64> = set.nodes.iter().map(|n| n.0).collect();
    let node_of = assign_sorted(&ids, &node_ids, epsilon);
    // Raw terms straight into the VM's map builder (no intermediate `Term` arrays).
    let key_terms: Vec<ErlNifTerm> = order.iter().map(|&(_, i)| terms[i]).collect();
    let node_terms: Vec<ErlNifTerm> = node_of.iter().map(|&n| set.terms[n].as_c_arg()).collect();
    if key_terms.len() != node_terms.len() {
        // No node to assign the keys to.
        return bad_arg("nodes must not be empty");
    }
    let mut map = MaybeUninit::uninit();
    // SAFETY: two arrays of `key_terms.len()` terms of this call's env (lengths
    // checked above) and a valid out-pointer; on success the VM writes the map (the
    // keys are distinct, so it does not refuse them).
    let made = unsafe {
        enif_make_map_from_arrays(
            env.as_c_arg(),
            key_terms.as_ptr(),
            node_terms.as_ptr(),
            key_terms.len(),
            map.as_mut_ptr(),
        )
    };
    if made == 0 {
        return bad_arg("could not build the assignment map");
    }
    // SAFETY: written by the successful call; a term of this call's env.
    Ok(unsafe { Term::new(env, map.assume_init()) })
}

nif!(BOUNDED_ASSIGNMENTS: "bounded_assignments" => assignments(env, keys, nodes, epsilon));
