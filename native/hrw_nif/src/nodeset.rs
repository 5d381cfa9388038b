//! Decoding a node list for a prepared structure: ids, weights, distinct terms.

use crate::failure::{Budget, Outcome};
use crate::list::for_each_node;
use crate::term_id::term_id;
use crate::weighted::decode_weighted;
use hrw_core::nodes::{distinct, distinct_cost, fingerprint, fingerprint_cost};
use hrw_core::work;
use rustler::{Encoder, Env, Term};

/// Resources that are built from node lists answer with these indices into the
/// distinct nodes, which the Elixir struct keeps in a tuple.
pub struct NodeSet<'a> {
    /// Distinct `(id, weight)` (weight 1.0 when unweighted).
    pub nodes: Vec<(u64, f64)>,
    /// The distinct node terms (bare nodes, without weights), same order.
    pub terms: Vec<Term<'a>>,
}

/// Budget units per node beyond its term id: the cell, the weight decode, two
/// pushes, the copy into the distinct terms, and deduplication.
const DECODE_COST_PER_NODE: u64 = 5 * work::ELEMENT + distinct_cost(1);

pub fn decode<'a>(nodes: Term<'a>, weighted: bool, budget: &mut Budget) -> Outcome<NodeSet<'a>> {
    let mut terms = Vec::new();
    let mut pairs = Vec::new();
    for_each_node(nodes, DECODE_COST_PER_NODE, budget, |entry, budget| {
        work::count(3 * work::ELEMENT);
        let (node, weight) = if weighted {
            decode_weighted(entry)?
        } else {
            (entry, 1.0)
        };
        pairs.push((term_id(node, budget)?, weight));
        terms.push(node);
        Ok(())
    })?;
    let d = distinct(&pairs);
    work::count(work::ELEMENT * d.positions.len() as u64);
    Ok(NodeSet {
        terms: d.positions.iter().map(|&p| terms[p]).collect(),
        nodes: d.nodes,
    })
}

impl<'a> NodeSet<'a> {
    /// Budget units of [`NodeSet::reply`] with `params` parameters: the nodes tuple,
    /// the weights tuple and the fingerprint.
    pub fn reply_cost(&self, params: usize, weighted: bool) -> u64 {
        let n = self.nodes.len();
        let weights = if weighted {
            2 * work::ELEMENT * n as u64
        } else {
            0
        };
        work::ELEMENT * n as u64 + weights + fingerprint_cost(n, params) + work::TERM
    }

    /// `{resource, nodes_tuple, weights_tuple_or_nil, fingerprint}` for the struct.
    pub fn reply<R: Encoder>(
        &self,
        env: Env<'a>,
        resource: R,
        kind: u64,
        params: &[u64],
        weighted: bool,
    ) -> Term<'a> {
        work::count(work::ELEMENT * self.terms.len() as u64);
        let nodes = rustler::types::tuple::make_tuple(env, &self.terms);
        let weights = if weighted {
            work::count(2 * work::ELEMENT * self.nodes.len() as u64);
            let ws: Vec<Term> = self.nodes.iter().map(|n| weight_term(env, n.1)).collect();
            rustler::types::tuple::make_tuple(env, &ws)
        } else {
            rustler::types::atom::nil().encode(env)
        };
        let fp = fingerprint(kind, &self.nodes, params);
        (resource, nodes, weights, fp).encode(env)
    }
}

/// Integral weights come back as integers, so a rebuilt struct equals the original.
fn weight_term(env: Env, w: f64) -> Term {
    if w.fract() == 0.0 && w.abs() <= 9_007_199_254_740_992.0 {
        (w as i64).encode(env)
    } else {
        w.encode(env)
    }
}
