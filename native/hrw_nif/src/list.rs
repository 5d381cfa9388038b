//! The stateless list path: hash every node term, score with N3, nothing cached.

use crate::budget::{Budget, Outcome};
use crate::cells::for_each_raw_node;
use crate::errors::{bad_arg, Failure};
use crate::nif::nif;
use crate::nodeset::call_ring;
use crate::term_id::{term_id, term_id_in, Order};
use hrw_core::ring::Ring;
use hrw_core::{cost, n3, scan, work};
use rustler::sys::ErlNifTerm;
use rustler::{Encoder, Env, Term};
use smallvec::SmallVec;

/// Calls `visit(node, id)` for every node, in list order.
fn each_node<'a>(
    nodes: Term<'a>,
    budget: &mut Budget,
    mut visit: impl FnMut(ErlNifTerm, u64),
) -> Outcome<()> {
    let env = nodes.get_env();
    let mut order = Order::default();
    for_each_raw_node(nodes, cost::LIST_OWNER_NODE, budget, |node, budget| {
        visit(node, term_id_in(env, node, budget, &mut order)?);
        Ok(())
    })
}

/// Hashes every node first, then scores them all in one SIMD scan: scoring inline
/// would put N3's multiply chain between two term accesses for every node.
fn owner<'a>(key: Term<'a>, nodes: Term<'a>, budget: &mut Budget) -> Outcome<Term<'a>> {
    let tk = n3::prepared_key(term_id(key, budget)?);
    // On the stack for the usual handful of nodes: no allocation per call.
    let mut prepared: SmallVec<[u64; 32]> = SmallVec::new();
    let mut terms: SmallVec<[ErlNifTerm; 32]> = SmallVec::new();
    each_node(nodes, budget, |node, id| {
        work::count(2 * cost::ELEMENT);
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
/// this call ([`call_ring`]). Plain `owner` keeps its allocation-free path above.
fn with_call_ring<'a, T>(
    key: Term<'a>,
    nodes: Term<'a>,
    weighted: bool,
    budget: &mut Budget,
    answer_cost: impl FnOnce(&Ring) -> u64,
    answer: impl FnOnce(&Ring, u64, &[Term<'a>]) -> T,
) -> Outcome<T> {
    let key = term_id(key, budget)?;
    let (set, ring) = call_ring(nodes, weighted, budget)?;
    budget.charge(answer_cost(&ring))?;
    Ok(answer(&ring, key, &set.terms))
}

fn owner_of_kind<'a>(
    _env: Env<'a>,
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
    let answer_cost = |ring: &Ring| ring.owners_cost() + cost::owner_terms(count);
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

nif!(LIST_OWNER: "list_owner" => owner_of_kind(env, key, nodes, weighted));
nif!(LIST_OWNERS: "list_owners" => owners(env, key, nodes, count, weighted));
