//! `HRW.Bounded.assignments/3`, native path: one call for the whole key set.

use crate::batch::{map_key_cost, map_keys_cost};
use crate::budget::Budget;
use crate::cells::walk_keys;
use crate::errors::{bad_arg, Outcome};
use crate::nif::nif;
use crate::nodeset;
use hrw_core::bounded::{assign_cost, assign_sorted};
use hrw_core::sort;
use hrw_core::work;
use rustler::sys::{enif_make_map_from_arrays, ErlNifTerm};
use rustler::{Env, Term};
use std::mem::MaybeUninit;

/// Budget units per key beyond hashing it: the cell, the entry, its node scans (a
/// first choice, and a second scan when that node is full), and its result entry.
fn cost_per_key(nodes: usize) -> u64 {
    6 * work::ELEMENT + assign_cost(1, nodes)
}

fn assignments<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    nodes: Term<'a>,
    epsilon: f64,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let set = nodeset::decode(nodes, false, budget)?;
    let per_key = cost_per_key(set.nodes.len());
    // The keys' walks and binary bytes: what the result map's builder hashes.
    let bytes = budget.binary_bytes();
    let keys = walk_keys(keys, per_key, true, budget)?;
    let terms = keys.terms;
    // (id, position) per key.
    work::count(work::ELEMENT * keys.ids.len() as u64);
    let mut order: Vec<(u64, usize)> = keys.ids.into_iter().zip(0..).collect();
    // Two sorts (ours, for the assignment's order, and the result map's), the
    // dedup and the id copy, the node ids, and the assignment's own pass over keys
    // and nodes; the per-key scans were charged per key above.
    let k = order.len();
    // The result map hashes (or compares) every key: charged before it is built.
    let key_bytes = budget.binary_bytes().wrapping_sub(bytes);
    let map_keys = map_keys_cost(map_key_cost(keys.walk_units, key_bytes), k);
    budget.charge(map_keys)?;
    work::count(map_keys);
    budget.charge(
        2 * work::sort(k)
            + 4 * work::ELEMENT * k as u64
            + 2 * work::ELEMENT * set.nodes.len() as u64,
    )?;
    // By (id, position), the order of a stable sort by id; equal ids are equal keys
    // (`0.0` and `-0.0`): the first occurrence in the input stays.
    sort::by_id(&mut order);
    order.dedup_by_key(|e| e.0);
    work::count(2 * work::ELEMENT * k as u64 + work::sort(k));
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

nif!(bounded_assignments => assignments(env, keys, nodes, epsilon));
