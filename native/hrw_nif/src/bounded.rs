//! `HRW.Bounded.assignments/3`, native path: one call for the whole key set.

use crate::failure::{bad_arg, twin_nifs, Budget, Outcome};
use crate::nodeset;
use crate::term_id::{term_id, COST_PER_TERM};
use hrw_core::bounded::assign;
use rustler::{Env, Term};

/// Budget units per key and node (first-choice scans, occasional re-ranking).
const COST_PER_KEY_NODE: u64 = 2;

fn assignments<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    nodes: Term<'a>,
    epsilon: f64,
    mut budget: Budget,
) -> Outcome<Term<'a>> {
    let set = nodeset::decode(nodes, false, &mut budget)?;
    let per_key = COST_PER_TERM + COST_PER_KEY_NODE * set.nodes.len() as u64;
    let mut entries: Vec<(u64, Term<'a>)> = Vec::new();
    let mut rest = keys;
    while let Ok((key, tail)) = rest.list_get_cell() {
        budget.charge(per_key)?;
        entries.push((term_id(key, &mut budget)?, key));
        rest = tail;
    }
    if !rest.is_empty_list() {
        return bad_arg("keys must be a proper list");
    }
    // Equal ids are equal keys (`0.0` and `-0.0`): keep the first occurrence in
    // the input (a stable sort keeps input order within equal ids).
    entries.sort_by_key(|e| e.0);
    entries.dedup_by_key(|e| e.0);
    let ids: Vec<u64> = entries.iter().map(|e| e.0).collect();
    let node_ids: Vec<u64> = set.nodes.iter().map(|n| n.0).collect();
    let a = assign(&ids, &node_ids, epsilon);
    let key_terms: Vec<Term<'a>> = a.order.iter().map(|&i| entries[i].1).collect();
    let node_terms: Vec<Term<'a>> = a.node_of.iter().map(|&n| set.terms[n]).collect();
    Term::map_from_term_arrays(env, &key_terms, &node_terms)
        .or_else(|_| bad_arg("could not build the assignment map"))
}

twin_nifs!(bounded_assignments, bounded_assignments_dirty => assignments(env, keys, nodes, epsilon),
    <'a>(keys: Term<'a>, nodes: Term<'a>, epsilon: f64) -> [Term<'a>]);
