//! Decoding a node list: ids, weights, distinct terms; for a prepared structure's
//! build, and for the ring a list call or a batch over a list prepares for itself
//! ([`call_ring`]).

use crate::budget::{needs_dirty, Budget, Outcome};
use crate::cells::{for_each_raw_node, longer_than};
use crate::term_id::{term_id_in, Order};
use crate::weighted::decode_weighted;
use hrw_core::nodes::{distinct, fingerprint};
use hrw_core::ring::Ring;
use hrw_core::{cost, work};
use rustler::{Encoder, Env, Term};
use std::collections::HashMap;

/// Resources that are built from node lists answer with these indices into the
/// distinct nodes, which the Elixir struct keeps in a tuple.
pub struct NodeSet<'a> {
    /// Distinct `(id, weight)` (weight 1.0 when unweighted).
    pub nodes: Vec<(u64, f64)>,
    /// The distinct node terms (bare nodes, without weights), same order: each
    /// id's first occurrence in the input.
    pub terms: Vec<Term<'a>>,
    /// Weighted only: each distinct node's weight term as given, from the first
    /// entry carrying its largest weight (so weights come back exactly as written).
    pub weight_terms: Vec<Term<'a>>,
}

/// [`decode`] for a build that then spends at least `build_per_node` units per
/// node: on a normal scheduler the list's length is first counted, up to the most
/// nodes the budget could pay for, and a longer list asks for the dirty scheduler
/// before anything is decoded, so no list is decoded twice.
pub fn decode_for_build<'a>(
    nodes: Term<'a>,
    weighted: bool,
    build_per_node: u64,
    budget: &mut Budget,
) -> Outcome<NodeSet<'a>> {
    if budget.is_limited() {
        let fits = (budget.remaining() / cost::node_least(build_per_node)) as usize;
        if longer_than(nodes, fits, budget)? {
            return needs_dirty();
        }
    }
    decode(nodes, weighted, budget)
}

/// The ring of the node list `nodes`, prepared for one call (the list path's
/// weighted owner and its owners, and a batch over a list): the same code, and
/// tie rules, as `HRW.Ring`, so list and ring agree by construction. Charges the
/// decoding and the build.
pub fn call_ring<'a>(
    nodes: Term<'a>,
    weighted: bool,
    budget: &mut Budget,
) -> Outcome<(NodeSet<'a>, Ring)> {
    let set = decode(nodes, weighted, budget)?;
    budget.charge(cost::ring_build(set.nodes.len()))?;
    let ring = Ring::new(&set.nodes);
    Ok((set, ring))
}

pub fn decode<'a>(nodes: Term<'a>, weighted: bool, budget: &mut Budget) -> Outcome<NodeSet<'a>> {
    let mut terms = Vec::new();
    let mut weight_terms = Vec::new();
    let mut pairs = Vec::new();
    let env = nodes.get_env();
    let mut order = Order::default();
    for_each_raw_node(nodes, cost::NODE_DECODE, budget, |raw, budget| {
        work::count(4 * cost::ELEMENT);
        // SAFETY: a cell of the node list, valid in `env` for this call.
        let entry = unsafe { Term::new(env, raw) };
        let node = if weighted {
            let (node, weight, term) = decode_weighted(entry)?;
            pairs.push((
                term_id_in(env, node.as_c_arg(), budget, &mut order)?,
                weight,
            ));
            weight_terms.push(term);
            node
        } else {
            pairs.push((term_id_in(env, raw, budget, &mut order)?, 1.0));
            entry
        };
        terms.push(node);
        Ok(())
    })?;
    let d = distinct(&pairs);
    let weight_terms = if !weighted {
        Vec::new()
    } else if d.nodes.len() == pairs.len() {
        weight_terms
    } else {
        // Repeated ids: the first entry whose weight is the one kept (the largest).
        work::count(cost::distinct(pairs.len()));
        let slot: HashMap<u64, usize> = d.nodes.iter().enumerate().map(|(i, n)| (n.0, i)).collect();
        let mut kept: Vec<Option<Term<'a>>> = vec![None; d.nodes.len()];
        for (&(id, w), &term) in pairs.iter().zip(&weight_terms) {
            let i = slot[&id];
            if kept[i].is_none() && w == d.nodes[i].1 {
                kept[i] = Some(term);
            }
        }
        kept.into_iter().flatten().collect()
    };
    work::count(cost::ELEMENT * d.positions.len() as u64);
    Ok(NodeSet {
        terms: d.positions.iter().map(|&p| terms[p]).collect(),
        nodes: d.nodes,
        weight_terms,
    })
}

impl<'a> NodeSet<'a> {
    /// `{resource, nodes_tuple, weights_tuple_or_nil, fingerprint}` for the struct.
    pub fn reply<R: Encoder>(
        &self,
        env: Env<'a>,
        resource: R,
        kind: u64,
        params: &[u64],
        weighted: bool,
    ) -> Term<'a> {
        work::count(cost::ELEMENT * self.terms.len() as u64);
        let nodes = rustler::types::tuple::make_tuple(env, &self.terms);
        let weights = if weighted {
            work::count(cost::ELEMENT * self.weight_terms.len() as u64);
            rustler::types::tuple::make_tuple(env, &self.weight_terms)
        } else {
            rustler::types::atom::nil().encode(env)
        };
        let fp = fingerprint(kind, &self.nodes, params);
        (resource, nodes, weights, fp).encode(env)
    }
}
