//! The stateless list path: hash every node term, score with N3, nothing cached.

use crate::failure::{bad_arg, Budget, Outcome};
use crate::term_id::{term_id, COST_PER_TERM};
use hrw_core::n3;
use rustler::{Encoder, Env, NifResult, Term};

/// Budget units per node beyond hashing it: the score and the bookkeeping.
const COST_PER_SCORE: u64 = 2;

fn checked_length(nodes: Term) -> Outcome<usize> {
    match nodes.list_length() {
        Ok(0) => bad_arg("nodes must be a non-empty list"),
        Ok(len) => Ok(len),
        Err(_) if nodes.is_list() => bad_arg("nodes must be a proper list, got an improper list"),
        Err(_) => bad_arg("nodes must be a list"),
    }
}

/// Calls `visit(index, node, id)` for every node, in list order.
fn each_node<'a>(
    nodes: Term<'a>,
    budget: &mut Budget,
    mut visit: impl FnMut(Term<'a>, u64),
) -> Outcome<()> {
    let len = checked_length(nodes)?;
    // Refuse early when the list alone is over budget, before hashing anything.
    budget.charge(len as u64 * (COST_PER_TERM + COST_PER_SCORE))?;
    let mut rest = nodes;
    while let Ok((node, tail)) = rest.list_get_cell() {
        visit(node, term_id(node, budget)?);
        rest = tail;
    }
    Ok(())
}

fn owner<'a>(key: Term<'a>, nodes: Term<'a>, mut budget: Budget) -> Outcome<Term<'a>> {
    let k = n3::prep(term_id(key, &mut budget)?);
    let mut best: Option<(u64, Term<'a>)> = None;
    each_node(nodes, &mut budget, |node, id| {
        let s = n3::score(k, id);
        // Strictly greater: a repeated node keeps its first occurrence.
        if best.is_none_or(|(b, _)| s > b) {
            best = Some((s, node));
        }
    })?;
    match best {
        Some((_, node)) => Ok(node),
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

#[rustler::nif]
fn list_owner<'a>(key: Term<'a>, nodes: Term<'a>) -> NifResult<Term<'a>> {
    Ok(owner(key, nodes, Budget::normal())?)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn list_owner_dirty<'a>(key: Term<'a>, nodes: Term<'a>) -> NifResult<Term<'a>> {
    Ok(owner(key, nodes, Budget::dirty())?)
}

#[rustler::nif]
fn list_owners<'a>(
    env: Env<'a>,
    key: Term<'a>,
    nodes: Term<'a>,
    count: usize,
) -> NifResult<Term<'a>> {
    Ok(owners(env, key, nodes, count, Budget::normal())?)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn list_owners_dirty<'a>(
    env: Env<'a>,
    key: Term<'a>,
    nodes: Term<'a>,
    count: usize,
) -> NifResult<Term<'a>> {
    Ok(owners(env, key, nodes, count, Budget::dirty())?)
}
