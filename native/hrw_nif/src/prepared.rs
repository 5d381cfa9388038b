//! What the glue does with a prepared structure (`HRW.Ring`, `HRW.Skeleton`),
//! written once: build it into a resource, borrow it back, look a key up. Each
//! structure says how in its own file (ring.rs, skeleton.rs) by implementing
//! [`Lookup`] and [`Prepared`]; batch.rs looks keys up through [`Lookup`] too.

use crate::budget::{Budget, Outcome};
use crate::errors::Failure;
use crate::nodeset;
use crate::resource::{self, Resource};
use crate::term_id::term_id;
use hrw_core::cost;
use rustler::{Env, Term};

/// Looking ids up in a structure built from distinct nodes (owner indices index
/// them, in the order the build's node set gives).
pub trait Lookup: Send + Sync {
    /// Number of distinct nodes the owner indices index.
    fn len(&self) -> usize;
    /// Whether the node at owner index `index` has the id `id`.
    fn holds(&self, index: usize, id: u64) -> bool;
    /// Work units of one [`Lookup::holds`], an upper bound.
    fn holds_cost(&self) -> u64;
    /// Index of the owner of `key` (a key id), `None` when there are no nodes.
    fn owner(&self, key: u64) -> Option<usize>;
    /// Work units of one [`Lookup::owner`], an upper bound.
    fn owner_cost(&self) -> u64;
    /// Indices of the `count` best nodes for `key` (`count` ≤ [`Lookup::len`]),
    /// best first.
    fn owners(&self, key: u64, count: usize) -> Vec<usize>;
    /// Work units of [`Lookup::owners`] for `count` nodes, an upper bound.
    fn owners_cost(&self, count: usize) -> u64;
    /// `out[i] = owner(keys[i])` (0 when there are no nodes).
    fn owners_of(&self, keys: &[u64], out: &mut [u32]) {
        for (o, k) in out.iter_mut().zip(keys) {
            *o = self.owner(*k).unwrap_or(0) as u32;
        }
    }
}

/// A [`Lookup`] that lives in a NIF resource of its own type, built by a NIF.
pub trait Prepared: Lookup + Resource {
    /// Fingerprint kind (see `hrw_core::nodes::fingerprint`).
    const KIND: u64;
    /// What a build takes besides the nodes.
    type Options: Copy;
    /// Work units of a build of `nodes` distinct nodes, an upper bound.
    fn build_cost(nodes: usize) -> u64;
    /// The structure of the distinct `(id, weight)` nodes.
    fn build(nodes: &[(u64, f64)], options: Self::Options) -> Self;
    /// `options` as words of the struct's fingerprint.
    fn option_words(options: Self::Options) -> Vec<u64>;
}

/// Builds a `T` of the node list `nodes` into a resource and answers the struct's
/// fields (`nodeset::NodeSet::reply`).
pub fn build<'a, T: Prepared>(
    env: Env<'a>,
    nodes: Term<'a>,
    weighted: bool,
    options: T::Options,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let set = nodeset::decode_for_build(nodes, weighted, T::build_cost(1), budget)?;
    let words = T::option_words(options);
    let n = set.nodes.len();
    budget.charge(T::build_cost(n) + cost::build_reply(n, words.len(), weighted))?;
    let resource = resource::make(env, T::build(&set.nodes, options));
    Ok(set.reply(env, resource, T::KIND, &words, weighted))
}

/// The `T` in `term`, or [`Failure::StaleResource`] when `term` is not a live
/// resource of `T`'s type in this VM.
pub fn resource<'a, T: Prepared>(term: Term<'a>) -> Outcome<&'a T> {
    resource::get(term).ok_or(Failure::StaleResource)
}

/// The index of the owner of `key` in the `T` of `prepared`. Inlined into each
/// NIF: one call level fewer on the lookup hot path.
#[inline]
pub fn owner<T: Prepared>(
    _env: Env,
    prepared: Term,
    key: Term,
    budget: &mut Budget,
) -> Outcome<usize> {
    let prepared = resource::<T>(prepared)?;
    budget.charge(prepared.owner_cost())?;
    let key = term_id(key, budget)?;
    prepared.owner(key).ok_or(Failure::StaleResource)
}

/// The indices of the `count` best nodes for `key` in the `T` of `prepared`.
pub fn owners<T: Prepared>(
    _env: Env,
    prepared: Term,
    key: Term,
    count: usize,
    budget: &mut Budget,
) -> Outcome<Vec<usize>> {
    let prepared = resource::<T>(prepared)?;
    let count = count.min(prepared.len());
    // The lookups of every rank, and the result list.
    budget.charge(prepared.owners_cost(count) + cost::owner_indices(count))?;
    let key = term_id(key, budget)?;
    Ok(prepared.owners(key, count))
}
