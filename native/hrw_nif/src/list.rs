//! The stateless list path: hash every node term, score with N3, nothing cached.

use crate::failure::{bad_arg, twin_nifs, Budget, Failure, Outcome};
use crate::nodeset;
use crate::term_id::{term_id, term_id_in, Probes};
use hrw_core::ring::Ring;
use hrw_core::{n3, scan, work};
use rustler::sys::{enif_get_list_cell, enif_is_empty_list, ErlNifTerm};
use rustler::{Encoder, Env, Term};
use smallvec::SmallVec;
use std::mem::MaybeUninit;

/// Budget units per node of the allocation-free owner scan beyond hashing it: the
/// cell, two buffer pushes and the score.
const OWNER_COST_PER_NODE: u64 = 3 * work::ELEMENT + work::SCORE;

/// Calls `visit(node, budget)` with the raw term of every element of the non-empty
/// proper list `nodes`, in order, charging `per_node` before each (the caller's
/// cost of a node beyond its term id, which `visit` charges). Walks the cells itself (rustler's
/// iterator panics on improper lists) in one pass: an improper tail is reported
/// after the walk. Raw terms: see [`crate::term_id::term_id_raw`].
pub fn for_each_raw_node(
    nodes: Term,
    per_node: u64,
    budget: &mut Budget,
    mut visit: impl FnMut(ErlNifTerm, &mut Budget) -> Outcome<()>,
) -> Outcome<()> {
    if nodes.is_empty_list() {
        return bad_arg("nodes must be a non-empty list");
    }
    if !nodes.is_list() {
        return bad_arg("nodes must be a list");
    }
    let proper = for_each_raw_cell(nodes, |head| {
        budget.charge(per_node)?;
        work::count(work::ELEMENT);
        visit(head, budget)
    })?;
    if proper {
        Ok(())
    } else {
        bad_arg("nodes must be a proper list, got an improper list")
    }
}

/// Calls `visit(head)` for every cell of `list` as a raw term of its env, in
/// order, stopping at the first error; then whether the list was proper (its
/// last tail `[]`). Walks the cells itself: rustler's iterator panics on improper
/// lists, and its cells come back as `Term`s through memory.
pub fn for_each_raw_cell(
    list: Term,
    mut visit: impl FnMut(ErlNifTerm) -> Outcome<()>,
) -> Outcome<bool> {
    let env = list.get_env().as_c_arg();
    let mut rest = list.as_c_arg();
    loop {
        let mut head = MaybeUninit::uninit();
        let mut tail = MaybeUninit::uninit();
        // SAFETY: valid out-pointers; the call returns 0 unless `rest` is a cons cell,
        // and then writes its head and tail, terms of this call's env.
        if unsafe { enif_get_list_cell(env, rest, head.as_mut_ptr(), tail.as_mut_ptr()) } == 0 {
            break;
        }
        // SAFETY: written by the successful call.
        let (head, tail) = unsafe { (head.assume_init(), tail.assume_init()) };
        visit(head)?;
        rest = tail;
    }
    // SAFETY: a term of this call's env.
    Ok(unsafe { enif_is_empty_list(env, rest) } != 0)
}

/// Calls `visit(node, id)` for every node, in list order.
fn each_node<'a>(
    nodes: Term<'a>,
    budget: &mut Budget,
    mut visit: impl FnMut(ErlNifTerm, u64),
) -> Outcome<()> {
    let env = nodes.get_env();
    let mut probes = Probes::new();
    for_each_raw_node(nodes, OWNER_COST_PER_NODE, budget, |node, budget| {
        visit(node, term_id_in(env, node, budget, &mut probes)?);
        Ok(())
    })
}

/// Hashes every node first, then scores them all in one SIMD scan: scoring inline
/// would leave N3's multiply chain between two term accesses for every node
/// (measured ~12 -> ~7 ns per node).
fn owner<'a>(key: Term<'a>, nodes: Term<'a>, budget: &mut Budget) -> Outcome<Term<'a>> {
    let tk = n3::prepared_key(term_id(key, budget)?);
    // On the stack for the usual handful of nodes: no allocation per call.
    let mut prepared: SmallVec<[u64; 32]> = SmallVec::new();
    let mut terms: SmallVec<[ErlNifTerm; 32]> = SmallVec::new();
    each_node(nodes, budget, |node, id| {
        work::count(2 * work::ELEMENT);
        prepared.push(n3::linear(id));
        terms.push(node);
    })?;
    // The first index of the highest score: a repeated node keeps its first occurrence.
    match scan::argmax(&prepared, tk) {
        // SAFETY: a cell of the node list, valid in this call's env.
        Some(i) => Ok(unsafe { Term::new(nodes.get_env(), terms[i]) }),
        None => bad_arg("nodes must be a non-empty list"),
    }
}

/// Weighted owners, and `owners` of either kind, go through a ring prepared for
/// this call: the same code (and tie rules) as `HRW.Ring`, so list and ring agree by
/// construction. Plain `owner` keeps its allocation-free path above.
fn with_call_ring<'a, T>(
    key: Term<'a>,
    nodes: Term<'a>,
    weighted: bool,
    budget: &mut Budget,
    answer_cost: impl FnOnce(&Ring) -> u64,
    answer: impl FnOnce(&Ring, u64, &[Term<'a>]) -> T,
) -> Outcome<T> {
    let key = term_id(key, budget)?;
    let set = nodeset::decode(nodes, weighted, budget)?;
    budget.charge(Ring::build_cost(set.nodes.len()))?;
    let ring = Ring::new(&set.nodes);
    budget.charge(answer_cost(&ring))?;
    Ok(answer(&ring, key, &set.terms))
}

fn owner_of_kind<'a>(
    key: Term<'a>,
    nodes: Term<'a>,
    weighted: bool,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    if !weighted {
        return owner(key, nodes, budget);
    }
    with_call_ring(
        key,
        nodes,
        true,
        budget,
        Ring::owner_cost,
        |ring, key, terms| ring.owner(key).map(|i| terms[i]),
    )?
    .ok_or_else(|| Failure::BadArg("nodes must be a non-empty list".into()))
}

fn owners<'a>(
    env: Env<'a>,
    key: Term<'a>,
    nodes: Term<'a>,
    count: usize,
    weighted: bool,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let answer_cost = |ring: &Ring| ring.owners_cost() + 2 * work::ELEMENT * count as u64;
    with_call_ring(
        key,
        nodes,
        weighted,
        budget,
        answer_cost,
        |ring, key, terms| {
            let picked: Vec<Term<'a>> = ring
                .owners(key, count)
                .into_iter()
                .map(|i| terms[i])
                .collect();
            picked.encode(env)
        },
    )
}

twin_nifs!(list_owner_normal, list_owner_dirty, list_owner_probe => owner_of_kind(key, nodes, weighted),
    <'a>(key: Term<'a>, nodes: Term<'a>, weighted: bool) -> [Term<'a>]);
twin_nifs!(list_owners_normal, list_owners_dirty, list_owners_probe => owners(env, key, nodes, count, weighted),
    <'a>(key: Term<'a>, nodes: Term<'a>, count: usize, weighted: bool) -> [Term<'a>]);
twin_nifs!(term_id_normal, term_id_dirty, term_id_probe => id_of(term),
    (term: Term) -> [u64]);
twin_nifs!(score_normal, score_dirty, score_probe => score_of(key, node),
    (key: Term, node: Term) -> [u64]);

/// The canonical id of any term (docs/HASHING.md); exposed for users and tests.
fn id_of(term: Term, budget: &mut Budget) -> Outcome<u64> {
    crate::term_id::term_id(term, budget)
}

/// The N3 score of `node` for `key`: `HRW.owner/2` picks the node maximising it.
fn score_of(key: Term, node: Term, budget: &mut Budget) -> Outcome<u64> {
    let k = n3::prep(term_id(key, budget)?);
    Ok(n3::score(k, term_id(node, budget)?))
}
