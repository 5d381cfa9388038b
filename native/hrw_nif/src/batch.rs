//! Many keys in one call: owners, groups by owner, movement between two structures.
//!
//! Three phases. (1) On the calling thread, walk the key list and hash every key to
//! its id (term access stays on the scheduler thread; hashing a short key costs a
//! few ns, far less than a lookup). (2) Look every id up; in a dirty call with enough
//! keys this runs on our rayon pool. (3) Back on the calling thread, build the result
//! terms from the owner indices.

use crate::budget::Budget;
use crate::cells::walk_keys;
use crate::errors::{bad_arg, Outcome};
use crate::nif::nif;
use crate::nodeset::call_ring;
use crate::prepared::{resource, Lookup};
use crate::term_id::{term_id_in, Probes};
use crate::tuple_view::TupleView;
use hrw_core::ring::Ring;
use hrw_core::skeleton::Skeleton;
use hrw_core::work;
use rayon::prelude::*;
use rustler::sys::{enif_make_list_from_array, ErlNifTerm};
use rustler::{Atom, Encoder, Env, Term};
use std::sync::OnceLock;

mod atoms {
    rustler::atoms! { ring, skeleton, list }
}

/// Below this many keys a batch is not split over the pool: a split pays a task
/// hand-off and thread wake-ups that a few thousand lookups do not earn back.
/// `HRW.owner_batch/3`'s documentation (lib/hrw.ex) states this figure.
const PARALLEL_MIN_KEYS: usize = 20_000;
/// Keys per rayon task.
const PARALLEL_CHUNK: usize = 4_096;
/// Budget units per key beyond hashing it (charged by `term_id`) and looking it up
/// (charged per target): the cell, the id and term buffers, the owner index, and
/// its share of the result (a list cell and term, or a `{key, from, to}` tuple).
const COST_PER_KEY: u64 = 8 * work::ELEMENT;

/// What a key is looked up in: pure Rust, shared by the pool's threads.
enum Structure<'a> {
    /// An `HRW.Ring` or `HRW.Skeleton`, borrowed from its resource.
    Prepared(&'a dyn Lookup),
    /// A plain node list, prepared for this call only.
    List(Ring),
}

impl Structure<'_> {
    fn lookup(&self) -> &dyn Lookup {
        match self {
            Structure::Prepared(p) => *p,
            Structure::List(r) => r,
        }
    }
}

/// The node terms owner indices name: a struct's tuple, read in place (a million
/// nodes cost nothing until an owner is named), or a list's distinct terms.
enum Nodes<'a> {
    Tuple(TupleView<'a>),
    /// A list's distinct terms and their ids.
    Decoded(Vec<Term<'a>>, Vec<u64>),
}

impl<'a> Nodes<'a> {
    fn len(&self) -> usize {
        match self {
            Nodes::Tuple(t) => t.len(),
            Nodes::Decoded(v, _) => v.len(),
        }
    }

    /// Node `i`; `i < len()` (checked against the lookup in `target`).
    #[inline]
    fn get(&self, i: u32) -> Term<'a> {
        match self {
            Nodes::Tuple(t) => t.get(i as usize).expect("owner index within the nodes"),
            Nodes::Decoded(v, _) => v[i as usize],
        }
    }
}

/// A decoded target: `{:ring, resource, nodes}`, `{:skeleton, resource, nodes}` or
/// `{:list, nodes, weighted?}` (encoded by `HRW.Prepared.nif_target/1`).
struct Target<'a> {
    structure: Structure<'a>,
    nodes: Nodes<'a>,
}

fn target<'a>(term: Term<'a>, budget: &mut Budget) -> Outcome<Target<'a>> {
    let fields = TupleView::of(term).filter(|t| t.len() == 3);
    let field = |i: usize| fields.and_then(|t| t.get(i));
    let kind = field(0).and_then(|f| f.decode::<Atom>().ok());
    let prepared = |lookup: &'a dyn Lookup, what: &str| -> Outcome<Target<'a>> {
        let nodes = match field(2).and_then(TupleView::of) {
            Some(t) => Nodes::Tuple(t),
            None => return bad_arg(format!("corrupt {what} nodes")),
        };
        Ok(Target {
            structure: Structure::Prepared(lookup),
            nodes,
        })
    };
    let target = match (kind, field(1)) {
        (Some(k), Some(r)) if k == atoms::ring() => prepared(resource::<Ring>(r)?, "ring")?,
        (Some(k), Some(r)) if k == atoms::skeleton() => {
            prepared(resource::<Skeleton>(r)?, "skeleton")?
        }
        (Some(k), Some(nodes)) if k == atoms::list() => {
            let weighted = field(2).and_then(|w| w.decode().ok()).unwrap_or(false);
            let (set, ring) = call_ring(nodes, weighted, budget)?;
            let ids = set.nodes.iter().map(|n| n.0).collect();
            Target {
                structure: Structure::List(ring),
                nodes: Nodes::Decoded(set.terms, ids),
            }
        }
        _ => return bad_arg("expected a node list, an HRW.Ring or an HRW.Skeleton"),
    };
    // Owner indices come from the resource and index the struct's node tuple: a
    // struct whose fields were changed by hand could send them out of bounds.
    if target.nodes.len() != target.structure.lookup().len() {
        return bad_arg("the HRW.Ring or HRW.Skeleton struct's nodes do not match its resource");
    }
    Ok(target)
}

/// The batch pool, created by the first batch that is split over it, with that
/// batch's thread count (`HRW.Batch.threads/0`); later counts are ignored.
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

/// Phase 2: every key's owner index in each lookup (its cost was charged per key).
fn owner_indices(ids: &[u64], lookups: &[&dyn Lookup], threads: usize) -> Vec<Vec<u32>> {
    work::count(work::ELEMENT * (ids.len() * lookups.len()) as u64);
    let parallel = threads > 1 && ids.len() >= PARALLEL_MIN_KEYS;
    let all = |lookup: &&dyn Lookup| {
        let mut out = vec![0u32; ids.len()];
        // Only a batch that is split creates the pool (`then`, not `filter`).
        match parallel.then(|| pool(threads)).flatten() {
            Some(pool) => pool.install(|| {
                out.par_chunks_mut(PARALLEL_CHUNK)
                    .zip(ids.par_chunks(PARALLEL_CHUNK))
                    .for_each(|(out, keys)| lookup.owners_of(keys, out))
            }),
            None => lookup.owners_of(ids, &mut out),
        }
        out
    };
    lookups.iter().map(all).collect()
}

/// Budget units of one lookup in [`NodeIds`]' table (a hash map probe or insert).
const COST_ID_LOOKUP: u64 = 16 * work::ELEMENT;

/// VM work units per byte of a binary in a map key: the VM's internal hash of a
/// binary and its byte-wise compares (test/hrw/budget_test.exs, "the found
/// uncharged work is charged": a map of 40 one-megabyte nodes goes dirty).
const MAP_KEY_COST_PER_BYTE: u64 = 1;

/// Most keys of a map the VM keeps flat (`MAP_SMALL_MAP_LIMIT`): it sorts them by
/// insertion sort, so a key may be compared with every other.
const FLAT_MAP_KEYS: usize = 32;

/// The ids of the node terms that owner indices name, each hashed once (charged
/// by the term walk) and remembered, with the cost of the VM hashing or comparing
/// that term as a map key: from the walk's own charge (≥ 16 units a term) plus
/// [`MAP_KEY_COST_PER_BYTE`] for each byte of its binaries.
struct NodeIds {
    seen: std::collections::HashMap<u32, (u64, u64)>,
}

impl NodeIds {
    fn new() -> NodeIds {
        NodeIds {
            seen: std::collections::HashMap::new(),
        }
    }

    /// `(id, map-key cost)` of node `i` of `nodes`, charging its walk the first time.
    fn get(&mut self, nodes: &Nodes, i: u32, budget: &mut Budget) -> Outcome<(u64, u64)> {
        budget.charge(COST_ID_LOOKUP)?;
        work::count(COST_ID_LOOKUP);
        if let Some(&known) = self.seen.get(&i) {
            return Ok(known);
        }
        let known = node_id(nodes, i, budget)?;
        self.seen.insert(i, known);
        Ok(known)
    }
}

/// What the VM's map builder spends on `n` keys whose costs (see [`NodeIds`]) sum
/// to `key_costs`: each hashed once and compared on a hash match (a large map), or
/// compared with up to every other key (a flat map's insertion sort).
pub fn map_keys_cost(key_costs: u64, n: usize) -> u64 {
    let per_key = if n > FLAT_MAP_KEYS {
        3
    } else {
        n.max(2) as u64
    };
    key_costs.saturating_mul(per_key)
}

/// The map-key cost of a term whose walk charged `walk_units` and hashed
/// `binary_bytes` bytes of binaries (see [`NodeIds`]).
pub fn map_key_cost(walk_units: u64, binary_bytes: u64) -> u64 {
    walk_units + MAP_KEY_COST_PER_BYTE * binary_bytes
}

/// `(id, map-key cost)` of node `i` of `nodes` (see [`NodeIds`]), its walk charged.
fn node_id(nodes: &Nodes, i: u32, budget: &mut Budget) -> Outcome<(u64, u64)> {
    let term = nodes.get(i);
    let (units, bytes) = (budget.remaining(), budget.binary_bytes());
    let walked = term_id_in(term.get_env(), term.as_c_arg(), budget, &mut Probes::new())?;
    let id = match nodes {
        Nodes::Decoded(_, ids) => ids[i as usize],
        Nodes::Tuple(_) => walked,
    };
    let cost = map_key_cost(
        units.saturating_sub(budget.remaining()),
        budget.binary_bytes().wrapping_sub(bytes),
    );
    Ok((id, cost))
}

/// The shared front of every batch: decode, charge, look up.
struct Batch<'a> {
    /// The key terms (raw, of the call's env), when kept.
    keys: Vec<ErlNifTerm>,
    targets: Vec<Target<'a>>,
    owners: Vec<Vec<u32>>,
}

fn run<'a>(
    keys: Term<'a>,
    targets: &[Term<'a>],
    keep_terms: bool,
    threads: usize,
    budget: &mut Budget,
) -> Outcome<Batch<'a>> {
    let targets = targets
        .iter()
        .map(|t| target(*t, budget))
        .collect::<Outcome<Vec<_>>>()?;
    // Per target: the lookup and its owner index.
    let per_target = |t: &Target| t.structure.lookup().owner_cost() + work::ELEMENT;
    let per_key: u64 = COST_PER_KEY + targets.iter().map(per_target).sum::<u64>();
    let keys = walk_keys(keys, per_key, keep_terms, budget)?;
    let lookups: Vec<&dyn Lookup> = targets.iter().map(|t| t.structure.lookup()).collect();
    let owners = owner_indices(&keys.ids, &lookups, threads);
    Ok(Batch {
        keys: keys.terms,
        targets,
        owners,
    })
}

fn owners<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    t: Term<'a>,
    threads: usize,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let b = run(keys, &[t], false, threads, budget)?;
    let nodes = &b.targets[0].nodes;
    work::count(2 * work::ELEMENT * b.owners[0].len() as u64);
    // Raw terms straight into the VM's list builder (no `Term` array to convert).
    let out: Vec<ErlNifTerm> = b.owners[0]
        .iter()
        .map(|&i| nodes.get(i).as_c_arg())
        .collect();
    make_list(env, &out)
}

/// A list of raw terms of this call's env.
fn make_list<'a>(env: Env<'a>, terms: &[ErlNifTerm]) -> Outcome<Term<'a>> {
    let Ok(len) = u32::try_from(terms.len()) else {
        return bad_arg("too many keys for one list");
    };
    // SAFETY: `len` terms of this call's env at `terms`; the VM copies them into a
    // new list (a term of the env) and keeps no pointer to the slice.
    Ok(unsafe {
        Term::new(
            env,
            enif_make_list_from_array(env.as_c_arg(), terms.as_ptr(), len),
        )
    })
}

fn groups<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    t: Term<'a>,
    threads: usize,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    // The groups are built by sorting key positions by owner, so their cost depends
    // on the keys alone, never on how many nodes the target has. Charged up front
    // with an n·log n bound, then checked against the real count below.
    let b = run(keys, &[t], true, threads, budget)?;
    let n = b.keys.len();
    budget.charge(2 * work::sort(n) + 2 * work::ELEMENT * n as u64)?;
    let nodes = &b.targets[0].nodes;
    let owners = &b.owners[0];
    work::count(work::ELEMENT * n as u64 + work::sort(n));
    let mut order: Vec<u32> = (0..n as u32).collect();
    // Stable: keys stay in input order within a group.
    order.sort_by_key(|&k| owners[k as usize]);
    let mut names: Vec<Term<'a>> = Vec::new();
    let mut lists: Vec<Term<'a>> = Vec::new();
    let mut key_costs: u64 = 0;
    for group in order.chunk_by(|&x, &y| owners[x as usize] == owners[y as usize]) {
        work::count(work::ELEMENT * group.len() as u64);
        let members: Vec<ErlNifTerm> = group.iter().map(|&k| b.keys[k as usize]).collect();
        let owner = owners[group[0] as usize];
        if budget.is_limited() {
            // What the VM's map builder will spend on this node term as a key.
            key_costs += node_id(nodes, owner, budget)?.1;
        }
        names.push(nodes.get(owner));
        lists.push(make_list(env, &members)?);
    }
    let groups = names.len();
    budget.charge(map_keys_cost(key_costs, groups))?;
    work::count(map_keys_cost(key_costs, groups));
    work::count(work::sort(groups));
    Term::map_from_term_arrays(env, &names, &lists).or_else(|_| bad_arg("could not build the map"))
}

/// `{key, from, to}` for every key whose owner differs between the two targets.
fn moves<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    a: Term<'a>,
    b: Term<'a>,
    threads: usize,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let batch = run(keys, &[a, b], true, threads, budget)?;
    let (from_nodes, to_nodes) = (&batch.targets[0].nodes, &batch.targets[1].nodes);
    work::count(4 * work::ELEMENT * batch.keys.len() as u64);
    // Owners are compared by id, never as terms (a term compare costs the size of
    // two equal copies of a node): the same term, or else equal ids, is the same
    // node, as the structures themselves count distinct nodes by id. Each node's
    // id is hashed once, charged (`NodeIds`).
    let (mut from_ids, mut to_ids) = (NodeIds::new(), NodeIds::new());
    let mut out: Vec<ErlNifTerm> = Vec::new();
    for (key, (&i, &j)) in batch
        .keys
        .iter()
        .zip(batch.owners[0].iter().zip(&batch.owners[1]))
    {
        let (from, to) = (from_nodes.get(i), to_nodes.get(j));
        let moved = from.as_c_arg() != to.as_c_arg()
            && from_ids.get(from_nodes, i, budget)?.0 != to_ids.get(to_nodes, j, budget)?.0;
        if moved {
            // SAFETY: a cell of the key list, valid in `env` for this call.
            let key = unsafe { Term::new(env, *key) };
            out.push((key, from, to).encode(env).as_c_arg());
        }
    }
    make_list(env, &out)
}

nif!(batch_owners => owners(env, keys, target, threads));
nif!(batch_groups => groups(env, keys, target, threads));
nif!(batch_moves => moves(env, keys, before, later, threads));
