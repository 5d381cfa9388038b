//! `HRW.Ring`: the exact prepared ring in a NIF resource.

use crate::failure::{twin_nifs, Budget, Failure, Outcome};
use crate::nodeset;
use crate::resource::{self, Resource};
use crate::term_id::term_id;
use hrw_core::ring::Ring;
use hrw_core::work;
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

fn build<'a>(
    env: Env<'a>,
    nodes: Term<'a>,
    weighted: bool,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let set = nodeset::decode_for_build(nodes, weighted, Ring::build_cost(1), budget)?;
    budget.charge(Ring::build_cost(set.nodes.len()) + set.reply_cost(0, weighted))?;
    let ring = resource::make(env, RingResource(Ring::new(&set.nodes)));
    Ok(set.reply(env, ring, KIND_RING, &[], weighted))
}

pub fn resource<'a>(term: Term<'a>) -> Outcome<&'a RingResource> {
    resource::get(term).ok_or(Failure::StaleResource)
}

fn owner(ring: Term, key: Term, budget: &mut Budget) -> Outcome<usize> {
    let ring = resource(ring)?;
    budget.charge(ring.0.owner_cost())?;
    let key = term_id(key, budget)?;
    ring.0.owner(key).ok_or(Failure::StaleResource)
}

fn owners(ring: Term, key: Term, count: usize, budget: &mut Budget) -> Outcome<Vec<usize>> {
    let ring = resource(ring)?;
    let count = count.min(ring.0.len());
    budget.charge(ring.0.owners_cost() + work::ELEMENT * count as u64)?;
    let key = term_id(key, budget)?;
    Ok(ring.0.owners(key, count))
}

twin_nifs!(ring_new_normal, ring_new_dirty, ring_new_probe => build(env, nodes, weighted),
    <'a>(nodes: Term<'a>, weighted: bool) -> [Term<'a>]);
twin_nifs!(ring_owner_normal, ring_owner_dirty, ring_owner_probe => owner(ring, key),
    (ring: Term, key: Term) -> [usize]);
twin_nifs!(ring_owners_normal, ring_owners_dirty, ring_owners_probe => owners(ring, key, count),
    (ring: Term, key: Term, count: usize) -> [Vec<usize>]);
