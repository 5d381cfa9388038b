//! `HRW.Ring`: the exact prepared ring in a NIF resource.

use crate::failure::{Budget, Failure, Outcome};
use crate::nodeset;
use crate::term_id::term_id;
use hrw_core::ring::Ring;
use rustler::{Env, NifResult, Resource, ResourceArc, Term};

pub struct RingResource(pub Ring);

#[rustler::resource_impl]
impl Resource for RingResource {}

/// Fingerprint kind of a ring (see `hrw_core::nodes::fingerprint`).
const KIND_RING: u64 = 1;

/// Budget units per node scanned: ~2 ns portable, less with SIMD; weighted costs
/// the log on every node.
const COST_PER_NODE: u64 = 2;
const COST_PER_WEIGHTED_NODE: u64 = 8;

fn build<'a>(
    env: Env<'a>,
    nodes: Term<'a>,
    weighted: bool,
    mut budget: Budget,
) -> Outcome<Term<'a>> {
    let set = nodeset::decode(nodes, weighted, &mut budget)?;
    let ring = ResourceArc::new(RingResource(Ring::new(&set.nodes)));
    Ok(set.reply(env, ring, KIND_RING, &[], weighted))
}

pub fn resource(term: Term) -> Outcome<ResourceArc<RingResource>> {
    term.decode().map_err(|_| Failure::StaleResource)
}

fn charge_scan(ring: &Ring, budget: &mut Budget) -> Outcome<()> {
    let per = if ring.is_weighted() {
        COST_PER_WEIGHTED_NODE
    } else {
        COST_PER_NODE
    };
    budget.charge(ring.len() as u64 * per)
}

fn owner(ring: Term, key: Term, mut budget: Budget) -> Outcome<usize> {
    let ring = resource(ring)?;
    charge_scan(&ring.0, &mut budget)?;
    let key = term_id(key, &mut budget)?;
    ring.0.owner(key).ok_or(Failure::StaleResource)
}

fn owners(ring: Term, key: Term, count: usize, mut budget: Budget) -> Outcome<Vec<usize>> {
    let ring = resource(ring)?;
    charge_scan(&ring.0, &mut budget)?;
    // Sorting every score: charge it as a second pass.
    charge_scan(&ring.0, &mut budget)?;
    let key = term_id(key, &mut budget)?;
    Ok(ring.0.owners(key, count))
}

#[rustler::nif]
fn ring_new<'a>(env: Env<'a>, nodes: Term<'a>, weighted: bool) -> NifResult<Term<'a>> {
    Ok(build(env, nodes, weighted, Budget::normal())?)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn ring_new_dirty<'a>(env: Env<'a>, nodes: Term<'a>, weighted: bool) -> NifResult<Term<'a>> {
    Ok(build(env, nodes, weighted, Budget::dirty())?)
}

#[rustler::nif]
fn ring_owner(ring: Term, key: Term) -> NifResult<usize> {
    Ok(owner(ring, key, Budget::normal())?)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn ring_owner_dirty(ring: Term, key: Term) -> NifResult<usize> {
    Ok(owner(ring, key, Budget::dirty())?)
}

#[rustler::nif]
fn ring_owners(ring: Term, key: Term, count: usize) -> NifResult<Vec<usize>> {
    Ok(owners(ring, key, count, Budget::normal())?)
}

#[rustler::nif(schedule = "DirtyCpu")]
fn ring_owners_dirty(ring: Term, key: Term, count: usize) -> NifResult<Vec<usize>> {
    Ok(owners(ring, key, count, Budget::dirty())?)
}
