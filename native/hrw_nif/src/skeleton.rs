//! `HRW.Skeleton`: the O(log n) churn-stable skeleton in a NIF resource.

use crate::failure::{twin_nifs, Budget, Failure, Outcome};
use crate::nodeset;
use crate::resource::{self, Resource};
use crate::term_id::term_id;
use hrw_core::skeleton::Skeleton;
use hrw_core::work;
use rustler::sys::ErlNifResourceType;
use rustler::{Env, Term};
use std::sync::atomic::AtomicPtr;

pub struct SkeletonResource(pub Skeleton);

impl Resource for SkeletonResource {
    const NAME: &'static [u8] = b"hrw_skeleton\0";
    fn slot() -> &'static AtomicPtr<ErlNifResourceType> {
        static SLOT: AtomicPtr<ErlNifResourceType> = AtomicPtr::new(std::ptr::null_mut());
        &SLOT
    }
}

/// Fingerprint kind of a skeleton (see `hrw_core::nodes::fingerprint`).
const KIND_SKELETON: u64 = 2;

fn build<'a>(
    env: Env<'a>,
    nodes: Term<'a>,
    weighted: bool,
    leaf_size: usize,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let set = nodeset::decode_for_build(nodes, weighted, Skeleton::build_cost(1), budget)?;
    budget.charge(Skeleton::build_cost(set.nodes.len()) + set.reply_cost(1, weighted))?;
    let skeleton = Skeleton::build(&set.nodes, leaf_size);
    let resource = resource::make(env, SkeletonResource(skeleton));
    Ok(set.reply(env, resource, KIND_SKELETON, &[leaf_size as u64], weighted))
}

pub fn resource<'a>(term: Term<'a>) -> Outcome<&'a SkeletonResource> {
    resource::get(term).ok_or(Failure::StaleResource)
}

fn owner(skeleton: Term, key: Term, budget: &mut Budget) -> Outcome<usize> {
    let skeleton = resource(skeleton)?;
    budget.charge(skeleton.0.owner_cost())?;
    let key = term_id(key, budget)?;
    Ok(skeleton.0.owner(key))
}

fn owners(skeleton: Term, key: Term, count: usize, budget: &mut Budget) -> Outcome<Vec<usize>> {
    let skeleton = resource(skeleton)?;
    let count = count.min(skeleton.0.len());
    // The descents and leaf picks of every rank, and the result list.
    budget.charge(skeleton.0.owners_cost(count) + work::ELEMENT * count as u64)?;
    let key = term_id(key, budget)?;
    Ok(skeleton.0.owners(key, count))
}

twin_nifs!(skeleton_new_normal, skeleton_new_dirty, skeleton_new_probe => build(env, nodes, weighted, leaf_size),
    <'a>(nodes: Term<'a>, weighted: bool, leaf_size: usize) -> [Term<'a>]);
twin_nifs!(skeleton_owner_normal, skeleton_owner_dirty, skeleton_owner_probe => owner(skeleton, key),
    (skeleton: Term, key: Term) -> [usize]);
twin_nifs!(skeleton_owners_normal, skeleton_owners_dirty, skeleton_owners_probe => owners(skeleton, key, count),
    (skeleton: Term, key: Term, count: usize) -> [Vec<usize>]);
