//! The stateless list path: hash every node term, score with N3, nothing cached.

use crate::failure::{bad_arg, twin_nifs, Budget, Outcome};
use crate::term_id::term_id;
use hrw_core::{n3, scan};
use rustler::{Encoder, Env, Term};
use smallvec::SmallVec;

/// Budget units per node beyond hashing it: the score and the bookkeeping.
const COST_PER_SCORE: u64 = 2;

/// Calls `visit(node, budget)` for every element of the non-empty proper list
/// `nodes`, in order. Walks the cells itself (rustler's iterator panics on improper
/// lists) in one pass: an improper tail is reported after the walk.
pub fn for_each_node<'a>(
    nodes: Term<'a>,
    budget: &mut Budget,
    mut visit: impl FnMut(Term<'a>, &mut Budget) -> Outcome<()>,
) -> Outcome<()> {
    if nodes.is_empty_list() {
        return bad_arg("nodes must be a non-empty list");
    }
    if !nodes.is_list() {
        return bad_arg("nodes must be a list");
    }
    let mut rest = nodes;
    while let Ok((node, tail)) = rest.list_get_cell() {
        budget.charge(COST_PER_SCORE)?;
        visit(node, budget)?;
        rest = tail;
    }
    if rest.is_empty_list() {
        Ok(())
    } else {
        bad_arg("nodes must be a proper list, got an improper list")
    }
}

/// Calls `visit(node, id)` for every node, in list order.
fn each_node<'a>(
    nodes: Term<'a>,
    budget: &mut Budget,
    mut visit: impl FnMut(Term<'a>, u64),
) -> Outcome<()> {
    for_each_node(nodes, budget, |node, budget| {
        visit(node, term_id(node, budget)?);
        Ok(())
    })
}

/// Hashes every node first, then scores them all in one SIMD scan: scoring inline
/// would leave N3's multiply chain between two term accesses for every node
/// (measured ~12 -> ~7 ns per node).
fn owner<'a>(key: Term<'a>, nodes: Term<'a>, mut budget: Budget) -> Outcome<Term<'a>> {
    let tk = n3::prepared_key(term_id(key, &mut budget)?);
    // On the stack for the usual handful of nodes: no allocation per call.
    let mut prepared: SmallVec<[u64; 32]> = SmallVec::new();
    let mut terms: SmallVec<[Term<'a>; 32]> = SmallVec::new();
    each_node(nodes, &mut budget, |node, id| {
        prepared.push(n3::linear(id));
        terms.push(node);
    })?;
    // The first index of the highest score: a repeated node keeps its first occurrence.
    match scan::argmax(&prepared, tk) {
        Some(i) => Ok(terms[i]),
        None => bad_arg("nodes must be a non-empty list"),
    }
}

fn owners<'a>(
    env: Env<'a>,
    key: Term<'a>,
    nodes: Term<'a>,
    count: usize,
    mut budget: Budget,
) -> Outcome<Term<'a>> {
    let k = n3::prep(term_id(key, &mut budget)?);
    let mut scored: Vec<(u64, usize, Term<'a>)> = Vec::new();
    each_node(nodes, &mut budget, |node, id| {
        scored.push((n3::score(k, id), scored.len(), node))
    })?;
    // Equal scores mean equal ids (N3 is a bijection per key), i.e. a repeated node:
    // sorting by (score desc, position asc) and dropping equal scores keeps its first.
    scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.dedup_by_key(|e| e.0);
    scored.truncate(count);
    let picked: Vec<Term<'a>> = scored.into_iter().map(|(_, _, node)| node).collect();
    Ok(picked.encode(env))
}

twin_nifs!(list_owner, list_owner_dirty => owner(key, nodes),
    <'a>(key: Term<'a>, nodes: Term<'a>) -> [Term<'a>]);
twin_nifs!(list_owners, list_owners_dirty => owners(env, key, nodes, count),
    <'a>(key: Term<'a>, nodes: Term<'a>, count: usize) -> [Term<'a>]);
twin_nifs!(term_id, term_id_dirty => id_of(term),
    (term: Term) -> [u64]);
twin_nifs!(score, score_dirty => score_of(key, node),
    (key: Term, node: Term) -> [u64]);

/// The canonical id of any term (docs/HASHING.md); exposed for users and tests.
fn id_of(term: Term, mut budget: Budget) -> Outcome<u64> {
    crate::term_id::term_id(term, &mut budget)
}

/// The N3 score of `node` for `key`: `HRW.owner/2` picks the node maximising it.
fn score_of(key: Term, node: Term, mut budget: Budget) -> Outcome<u64> {
    let k = n3::prep(term_id(key, &mut budget)?);
    Ok(n3::score(k, term_id(node, &mut budget)?))
}
