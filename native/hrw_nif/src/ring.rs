//! `HRW.Ring`: the exact prepared ring in a NIF resource (its NIFs are written once
//! for both prepared structures, in prepared.rs).

use crate::budget::{Budget, Outcome};
use crate::nif::nif;
use crate::prepared::{self, owner, owners, Lookup, Prepared};
use crate::resource::{resource_slot, Resource};
use hrw_core::cost;
use hrw_core::ring::Ring;
use rustler::sys::ErlNifResourceType;
use rustler::{Env, Term};
use std::sync::atomic::AtomicPtr;

/// The resource of an `HRW.Ring`: the core's ring itself.
pub type RingResource = Ring;

impl Resource for Ring {
    const NAME: &'static [u8] = b"hrw_ring\0";
    fn slot() -> &'static AtomicPtr<ErlNifResourceType> {
        resource_slot!()
    }
}

impl Lookup for Ring {
    fn len(&self) -> usize {
        Ring::len(self)
    }
    fn holds(&self, index: usize, id: u64) -> bool {
        Ring::holds(self, index, id)
    }
    fn holds_cost(&self) -> u64 {
        cost::RING_HOLDS
    }
    #[inline]
    fn owner(&self, key: u64) -> Option<usize> {
        Ring::owner(self, key)
    }
    fn owner_cost(&self) -> u64 {
        Ring::owner_cost(self)
    }
    fn owners(&self, key: u64, count: usize) -> Vec<usize> {
        Ring::owners(self, key, count)
    }
    fn owners_cost(&self, _count: usize) -> u64 {
        Ring::owners_cost(self)
    }
}

impl Prepared for Ring {
    const KIND: u64 = 1;
    type Options = ();
    fn build_cost(nodes: usize) -> u64 {
        cost::ring_build(nodes)
    }
    fn build(nodes: &[(u64, f64)], _options: ()) -> Ring {
        Ring::new(nodes)
    }
    fn option_words(_options: ()) -> Vec<u64> {
        Vec::new()
    }
}

fn build<'a>(env: Env<'a>, nodes: Term<'a>, weighted: bool, b: &mut Budget) -> Outcome<Term<'a>> {
    prepared::build::<Ring>(env, nodes, weighted, (), b)
}

nif!(RING_NEW: "ring_new" => build(env, nodes, weighted));
nif!(RING_OWNER: "ring_owner" => owner::<Ring>(env, ring, key));
nif!(RING_OWNERS: "ring_owners" => owners::<Ring>(env, ring, key, count));
