//! `HRW.Bounded.assignments/3`, native path: one call for the whole key set.

use crate::failure::{bad_arg, twin_nifs, Budget, Outcome};
use crate::nodeset;
use crate::term_id::term_id_raw;
use hrw_core::bounded::{assign, assign_cost};
use hrw_core::work;
use rustler::{Env, Term};

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
    mut budget: Budget,
) -> Outcome<Term<'a>> {
    let set = nodeset::decode(nodes, false, &mut budget)?;
    let per_key = cost_per_key(set.nodes.len());
    // Sized once on a dirty scheduler (growing a large vector copies it).
    let expected = if budget.is_limited() {
        0
    } else {
        keys.list_length().unwrap_or(0)
    };
    let mut entries: Vec<(u64, Term<'a>)> = Vec::with_capacity(expected);
    let proper = crate::list::for_each_raw_cell(keys, |key| {
        budget.charge(per_key)?;
        work::count(2 * work::ELEMENT);
        let id = term_id_raw(env, key, &mut budget)?;
        // SAFETY: a cell of the key list, valid in `env` for this call.
        entries.push((id, unsafe { Term::new(env, key) }));
        Ok(())
    })?;
    if !proper {
        return bad_arg("keys must be a proper list");
    }
    // The sorts: ours, the assignment's own and the result map's.
    let k = entries.len();
    budget.charge(
        3 * work::sort(k)
            + assign_cost(k, 0)
            + 2 * work::ELEMENT * set.nodes.len() as u64
            + 2 * work::ELEMENT * k as u64,
    )?;
    // Equal ids are equal keys (`0.0` and `-0.0`): keep the first occurrence in
    // the input (a stable sort keeps input order within equal ids).
    work::count(work::sort(k) + 2 * work::ELEMENT * k as u64);
    // By (id, position): the order of a stable sort by id, without its buffer.
    let mut order: Vec<(u64, usize)> = entries.iter().enumerate().map(|(i, e)| (e.0, i)).collect();
    order.sort_unstable();
    order.dedup_by_key(|e| e.0);
    let ids: Vec<u64> = order.iter().map(|e| e.0).collect();
    let entries: Vec<(u64, Term<'a>)> = order.iter().map(|&(_, i)| entries[i]).collect();
    let node_ids: Vec<u64> = set.nodes.iter().map(|n| n.0).collect();
    let a = assign(&ids, &node_ids, epsilon);
    work::count(2 * work::ELEMENT * ids.len() as u64 + work::sort(ids.len()));
    let key_terms: Vec<Term<'a>> = a.order.iter().map(|&i| entries[i].1).collect();
    let node_terms: Vec<Term<'a>> = a.node_of.iter().map(|&n| set.terms[n]).collect();
    Term::map_from_term_arrays(env, &key_terms, &node_terms)
        .or_else(|_| bad_arg("could not build the assignment map"))
}

twin_nifs!(bounded_assignments_normal, bounded_assignments_dirty, bounded_assignments_probe => assignments(env, keys, nodes, epsilon),
    <'a>(keys: Term<'a>, nodes: Term<'a>, epsilon: f64) -> [Term<'a>]);
