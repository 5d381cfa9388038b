//! Many keys in one call: owners, groups by owner, movement between two structures.
//!
//! Three phases. (1) On the calling thread, walk the key list and hash every key to
//! its id (term access stays on the scheduler thread; hashing a short key costs a
//! few ns, far less than a lookup). (2) Look every id up; in a dirty call with enough
//! keys this runs on our rayon pool. (3) Back on the calling thread, build the result
//! terms from the owner indices.

use crate::failure::{bad_arg, twin_nifs, Budget, Outcome};
use crate::nodeset;
use crate::ring::{self, RingResource};
use crate::skeleton::{self, SkeletonResource, LOOKUP_COST};
use crate::term_id::{term_id, COST_PER_TERM};
use hrw_core::ring::Ring;
use rayon::prelude::*;
use rustler::types::tuple::get_tuple;
use rustler::{Atom, Encoder, Env, Term};
use std::sync::OnceLock;

mod atoms {
    rustler::atoms! { ring, skeleton, list }
}

/// Below this many keys a parallel split costs more than it saves (measured; see
/// README "Batches").
const PARALLEL_MIN_KEYS: usize = 20_000;
/// Keys per rayon task.
const PARALLEL_CHUNK: usize = 4_096;
/// Budget units per key for walking and building its result (hashing is charged
/// by `term_id`).
const COST_PER_KEY: u64 = COST_PER_TERM + 8;

/// What a key is looked up in: pure Rust, shared by the pool's threads.
enum Lookup<'a> {
    Ring(&'a RingResource),
    Skeleton(&'a SkeletonResource),
    /// A plain node list, prepared for this call only.
    List(Ring),
}

impl Lookup<'_> {
    #[inline]
    fn owner(&self, key: u64) -> usize {
        match self {
            Lookup::Ring(r) => r.0.owner(key).unwrap_or(0),
            Lookup::Skeleton(s) => s.0.owner(key),
            Lookup::List(r) => r.owner(key).unwrap_or(0),
        }
    }

    /// Number of distinct nodes the lookup answers indices into.
    fn len(&self) -> usize {
        match self {
            Lookup::Ring(r) => r.0.len(),
            Lookup::Skeleton(s) => s.0.len(),
            Lookup::List(r) => r.len(),
        }
    }

    fn cost_per_key(&self) -> u64 {
        let ring_cost = |r: &Ring| r.len() as u64 * if r.is_weighted() { 8 } else { 2 };
        match self {
            Lookup::Ring(r) => ring_cost(&r.0),
            Lookup::Skeleton(_) => LOOKUP_COST,
            Lookup::List(r) => ring_cost(r),
        }
    }
}

/// A decoded target: `{:ring, resource, nodes}`, `{:skeleton, resource, nodes}` or
/// `{:list, nodes, weighted?}` (built by the Elixir side).
struct Target<'a> {
    lookup: Lookup<'a>,
    nodes: Vec<Term<'a>>,
}

fn target<'a>(term: Term<'a>, budget: &mut Budget) -> Outcome<Target<'a>> {
    let fields = get_tuple(term).unwrap_or_default();
    let kind = fields.first().and_then(|f| f.decode::<Atom>().ok());
    let target = match (kind, fields.as_slice()) {
        (Some(k), [_, resource, nodes]) if k == atoms::ring() => Target {
            lookup: Lookup::Ring(ring::resource(*resource)?),
            nodes: get_tuple(*nodes).or_else(|_| bad_arg("corrupt ring nodes"))?,
        },
        (Some(k), [_, resource, nodes]) if k == atoms::skeleton() => Target {
            lookup: Lookup::Skeleton(skeleton::resource(*resource)?),
            nodes: get_tuple(*nodes).or_else(|_| bad_arg("corrupt skeleton nodes"))?,
        },
        (Some(k), [_, nodes, weighted]) if k == atoms::list() => {
            let set = nodeset::decode(*nodes, weighted.decode().unwrap_or(false), budget)?;
            Target {
                lookup: Lookup::List(Ring::new(&set.nodes)),
                nodes: set.terms,
            }
        }
        _ => return bad_arg("expected a node list, an HRW.Ring or an HRW.Skeleton"),
    };
    // Owner indices come from the resource and index the struct's node tuple: a
    // struct whose fields were changed by hand could send them out of bounds.
    if target.nodes.len() != target.lookup.len() {
        return bad_arg("the HRW.Ring or HRW.Skeleton struct's nodes do not match its resource");
    }
    Ok(target)
}

/// Phase 1: the keys' ids and, when `keep_terms`, the key terms (for results),
/// charging `per_key` for each as it goes (a normal call stops as soon as it is over
/// budget, without first measuring the whole list).
fn walk_keys<'a>(
    keys: Term<'a>,
    per_key: u64,
    keep_terms: bool,
    budget: &mut Budget,
) -> Outcome<(Vec<Term<'a>>, Vec<u64>)> {
    // A dirty call sizes its buffers once (no reallocation of large vectors); a
    // normal one may stop early, so it grows them as it goes.
    let expected = if budget.is_limited() {
        0
    } else {
        keys.list_length().unwrap_or(0)
    };
    let mut terms = Vec::with_capacity(if keep_terms { expected } else { 0 });
    let mut ids = Vec::with_capacity(expected);
    let mut rest = keys;
    while let Ok((key, tail)) = rest.list_get_cell() {
        budget.charge(per_key)?;
        ids.push(term_id(key, budget)?);
        if keep_terms {
            terms.push(key);
        }
        rest = tail;
    }
    if !rest.is_empty_list() {
        return bad_arg("keys must be a proper list");
    }
    Ok((terms, ids))
}

fn pool(threads: usize) -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("hrw-batch-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Phase 2: every key's owner index in each lookup.
fn owner_indices(ids: &[u64], lookups: &[&Lookup<'_>], threads: usize) -> Vec<Vec<u32>> {
    let one = |lookup: &Lookup<'_>, key: &u64| lookup.owner(*key) as u32;
    let parallel = threads > 1 && ids.len() >= PARALLEL_MIN_KEYS;
    match pool(threads).filter(|_| parallel) {
        Some(pool) => pool.install(|| {
            lookups
                .iter()
                .map(|lookup| {
                    ids.par_iter()
                        .with_min_len(PARALLEL_CHUNK)
                        .map(|k| one(lookup, k))
                        .collect()
                })
                .collect()
        }),
        None => lookups
            .iter()
            .map(|lookup| ids.iter().map(|k| one(lookup, k)).collect())
            .collect(),
    }
}

/// The shared front of every batch: decode, charge, look up.
struct Batch<'a> {
    keys: Vec<Term<'a>>,
    targets: Vec<Target<'a>>,
    owners: Vec<Vec<u32>>,
}

fn run<'a>(
    keys: Term<'a>,
    targets: &[Term<'a>],
    keep_terms: bool,
    threads: usize,
    mut budget: Budget,
) -> Outcome<Batch<'a>> {
    let targets = targets
        .iter()
        .map(|t| target(*t, &mut budget))
        .collect::<Outcome<Vec<_>>>()?;
    let per_key: u64 = COST_PER_KEY + targets.iter().map(|t| t.lookup.cost_per_key()).sum::<u64>();
    let (keys, ids) = walk_keys(keys, per_key, keep_terms, &mut budget)?;
    let lookups: Vec<&Lookup<'_>> = targets.iter().map(|t| &t.lookup).collect();
    let owners = owner_indices(&ids, &lookups, threads);
    Ok(Batch {
        keys,
        targets,
        owners,
    })
}

fn owners<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    t: Term<'a>,
    threads: usize,
    budget: Budget,
) -> Outcome<Term<'a>> {
    let b = run(keys, &[t], false, threads, budget)?;
    let nodes = &b.targets[0].nodes;
    let out: Vec<Term<'a>> = b.owners[0].iter().map(|&i| nodes[i as usize]).collect();
    Ok(out.encode(env))
}

fn groups<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    t: Term<'a>,
    threads: usize,
    budget: Budget,
) -> Outcome<Term<'a>> {
    let b = run(keys, &[t], true, threads, budget)?;
    let nodes = &b.targets[0].nodes;
    let mut buckets: Vec<Vec<Term<'a>>> = vec![Vec::new(); nodes.len()];
    for (key, &i) in b.keys.iter().zip(&b.owners[0]) {
        buckets[i as usize].push(*key);
    }
    let (names, lists): (Vec<Term<'a>>, Vec<Term<'a>>) = buckets
        .into_iter()
        .enumerate()
        .filter(|(_, keys)| !keys.is_empty())
        .map(|(i, keys)| (nodes[i], keys.encode(env)))
        .unzip();
    Term::map_from_term_arrays(env, &names, &lists).or_else(|_| bad_arg("could not build the map"))
}

/// `{key, from, to}` for every key whose owner differs between the two targets.
fn moves<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    a: Term<'a>,
    b: Term<'a>,
    threads: usize,
    budget: Budget,
) -> Outcome<Term<'a>> {
    let batch = run(keys, &[a, b], true, threads, budget)?;
    let (from_nodes, to_nodes) = (&batch.targets[0].nodes, &batch.targets[1].nodes);
    let out: Vec<Term<'a>> = batch
        .keys
        .iter()
        .zip(batch.owners[0].iter().zip(&batch.owners[1]))
        .filter_map(|(key, (&i, &j))| {
            let (from, to) = (from_nodes[i as usize], to_nodes[j as usize]);
            (from != to).then(|| (*key, from, to).encode(env))
        })
        .collect();
    Ok(out.encode(env))
}

twin_nifs!(batch_owners, batch_owners_dirty => owners(env, keys, target, threads),
    <'a>(keys: Term<'a>, target: Term<'a>, threads: usize) -> [Term<'a>]);
twin_nifs!(batch_groups, batch_groups_dirty => groups(env, keys, target, threads),
    <'a>(keys: Term<'a>, target: Term<'a>, threads: usize) -> [Term<'a>]);
twin_nifs!(batch_moves, batch_moves_dirty => moves(env, keys, before, after, threads),
    <'a>(keys: Term<'a>, before: Term<'a>, after: Term<'a>, threads: usize) -> [Term<'a>]);
