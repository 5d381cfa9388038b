//! `HRW.Ring`: the exact prepared ring in a NIF resource.

use crate::failure::{twin_nifs, Budget, Failure, Outcome};
use crate::nodeset;
use crate::resource::{self, Resource};
use crate::term_id::term_id;
use hrw_core::ring::Ring;
use rustler::sys::ErlNifResourceType;
use rustler::{Env, Term};
use std::sync::atomic::AtomicPtr;

pub struct RingResource(pub Ring);

impl Resource for RingResource {
    const NAME: &'static [u8] = b"hrw_ring\0";
    fn slot() -> &'static AtomicPtr<ErlNifResourceType> {
        static SLOT: AtomicPtr<ErlNifResourceType> = AtomicPtr::new(std::ptr::null_mut());
        &SLOT
    }
}

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
    let ring = resource::make(env, RingResource(Ring::new(&set.nodes)));
    Ok(set.reply(env, ring, KIND_RING, &[], weighted))
}

pub fn resource<'a>(term: Term<'a>) -> Outcome<&'a RingResource> {
    resource::get(term).ok_or(Failure::StaleResource)
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

twin_nifs!(ring_new, ring_new_dirty => build(env, nodes, weighted),
    <'a>(nodes: Term<'a>, weighted: bool) -> [Term<'a>]);
twin_nifs!(ring_owner, ring_owner_dirty => owner(ring, key),
    (ring: Term, key: Term) -> [usize]);
twin_nifs!(ring_owners, ring_owners_dirty => owners(ring, key, count),
    (ring: Term, key: Term, count: usize) -> [Vec<usize>]);
