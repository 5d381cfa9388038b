//! `HRW.Skeleton`: the O(log n) churn-stable skeleton in a NIF resource (its NIFs
//! are written once for both prepared structures, in prepared.rs).

use crate::nif::nif;
use crate::prepared::{build, owner, owners, Lookup, Prepared};
use crate::resource::{resource_slot, Resource};
use hrw_core::cost;
use hrw_core::skeleton::Skeleton;
use rustler::sys::ErlNifResourceType;
use std::sync::atomic::AtomicPtr;

/// The resource of an `HRW.Skeleton`: the core's skeleton itself.
pub type SkeletonResource = Skeleton;

impl Resource for Skeleton {
    const NAME: &'static [u8] = b"hrw_skeleton\0";
    fn slot() -> &'static AtomicPtr<ErlNifResourceType> {
        resource_slot!()
    }
}

impl Lookup for Skeleton {
    fn len(&self) -> usize {
        Skeleton::len(self)
    }
    fn holds(&self, index: usize, id: u64) -> bool {
        Skeleton::holds(self, index, id)
    }
    fn holds_cost(&self) -> u64 {
        Skeleton::holds_cost(self)
    }
    #[inline]
    fn owner(&self, key: u64) -> Option<usize> {
        Some(Skeleton::owner(self, key))
    }
    fn owner_cost(&self) -> u64 {
        Skeleton::owner_cost(self)
    }
    fn owners(&self, key: u64, count: usize) -> Vec<usize> {
        Skeleton::owners(self, key, count)
    }
    fn owners_cost(&self, count: usize) -> u64 {
        Skeleton::owners_cost(self, count)
    }
    /// Many keys at once: their descents overlap their cache misses.
    fn owners_of(&self, keys: &[u64], out: &mut [u32]) {
        Skeleton::owners_of(self, keys, out)
    }
}

impl Prepared for Skeleton {
    const KIND: u64 = 2;
    /// The leaf size (`cluster_size`).
    type Options = usize;
    fn build_cost(nodes: usize) -> u64 {
        cost::skeleton_build(nodes)
    }
    fn build(nodes: &[(u64, f64)], leaf_size: usize) -> Skeleton {
        Skeleton::build(nodes, leaf_size)
    }
    fn option_words(leaf_size: usize) -> Vec<u64> {
        vec![leaf_size as u64]
    }
}

nif!(SKELETON_NEW: "skeleton_new" => build::<Skeleton>(env, nodes, weighted, leaf_size));
nif!(SKELETON_OWNER: "skeleton_owner" => owner::<Skeleton>(env, skeleton, key));
nif!(SKELETON_OWNERS: "skeleton_owners" => owners::<Skeleton>(env, skeleton, key, count));
