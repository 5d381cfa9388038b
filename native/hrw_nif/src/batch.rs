//! Many keys in one call: owners, groups by owner, movement between two structures.
//!
//! Three phases. (1) On the calling thread, walk the key list and hash every key to
//! its id (term access stays on the scheduler thread; hashing a short key costs a
//! few ns, far less than a lookup). (2) Look every id up; in a dirty call with enough
//! keys this runs on our rayon pool. (3) Back on the calling thread, build the result
//! terms from the owner indices.

use crate::budget::{Budget, Outcome};
use crate::cells::walk_keys;
use crate::errors::bad_arg;
use crate::nif::nif;
use crate::nodeset::call_ring;
use crate::prepared::{resource, Lookup};
use crate::term_id::{term_id_in, term_id_raw, Order};
use crate::tuple_view::TupleView;
use hrw_core::ring::Ring;
use hrw_core::skeleton::Skeleton;
use hrw_core::{cost, work};
use rayon::prelude::*;
use rustler::sys::{enif_make_list_from_array, ErlNifTerm};
use rustler::{Atom, Encoder, Env, Term};
use std::sync::OnceLock;

mod atoms {
    rustler::atoms! { ring, skeleton, list }
}

/// Below this many keys a batch is not split over the pool: a split pays a task
/// hand-off and thread wake-ups that a few thousand lookups do not earn back.
/// docs/GUARANTEES.md ("Scheduling") states this figure.
const PARALLEL_MIN_KEYS: usize = 20_000;
/// Keys per rayon task.
const PARALLEL_CHUNK: usize = 4_096;

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
    /// What it is, for messages: `HRW.Ring`, `HRW.Skeleton` or `list`.
    what: &'static str,
}

fn target<'a>(term: Term<'a>, budget: &mut Budget) -> Outcome<Target<'a>> {
    let fields = TupleView::of(term).filter(|t| t.len() == 3);
    let field = |i: usize| fields.and_then(|t| t.get(i));
    let kind = field(0).and_then(|f| f.decode::<Atom>().ok());
    let prepared = |lookup: &'a dyn Lookup, what: &'static str| -> Outcome<Target<'a>> {
        let nodes = match field(2).and_then(TupleView::of) {
            Some(t) => t,
            None => return bad_arg(format!("corrupt {what} nodes")),
        };
        // Owner indices come from the resource and index the struct's node tuple: a
        // tuple cut or lengthened by hand could send them out of bounds.
        if nodes.len() != lookup.len() {
            return mismatch(what);
        }
        Ok(Target {
            structure: Structure::Prepared(lookup),
            nodes: Nodes::Tuple(nodes),
            what,
        })
    };
    let target = match (kind, field(1)) {
        (Some(k), Some(r)) if k == atoms::ring() => prepared(resource::<Ring>(r)?, "HRW.Ring")?,
        (Some(k), Some(r)) if k == atoms::skeleton() => {
            prepared(resource::<Skeleton>(r)?, "HRW.Skeleton")?
        }
        (Some(k), Some(nodes)) if k == atoms::list() => {
            let weighted = field(2).and_then(|w| w.decode().ok()).unwrap_or(false);
            let (set, ring) = call_ring(nodes, weighted, budget)?;
            let ids = set.nodes.iter().map(|n| n.0).collect();
            Target {
                structure: Structure::List(ring),
                nodes: Nodes::Decoded(set.terms, ids),
                what: "list",
            }
        }
        _ => return bad_arg("expected a node list, an HRW.Ring or an HRW.Skeleton"),
    };
    Ok(target)
}

/// The refusal of a struct whose nodes are not those of its resource.
fn mismatch<T>(what: &str) -> Outcome<T> {
    bad_arg(format!(
        "the {what} struct's nodes do not match its resource"
    ))
}

/// Refuses a struct whose node tuple names other nodes than its resource, at the
/// places `owners` (owner indices into the tuple) name: every node a batch answers
/// (an owner, a group's name, a move's either side) is first checked to be, by id,
/// the node the resource holds there, so a tuple reordered or edited by hand is
/// refused instead of answering nodes the resource did not pick. Each distinct
/// index is checked once (its node's walk charged); nodes no key names are never
/// read, so a batch still costs its keys, not the size of its target.
fn check_named(
    nodes: TupleView,
    lookup: &dyn Lookup,
    what: &str,
    owners: &[u32],
    budget: &mut Budget,
) -> Outcome<()> {
    let keys = owners.len();
    let words = nodes.len().div_ceil(64);
    // The distinct indices named, in index order: the tuple and its terms are then
    // read front to back.
    let named: Vec<u32> = if words <= keys {
        // A bit per node (no more words than keys).
        budget.pay(cost::ELEMENT * (keys + words) as u64)?;
        let mut bits = vec![0u64; words];
        for &i in owners {
            bits[i as usize / 64] |= 1u64 << (i % 64);
        }
        let mut named = Vec::new();
        for (w, &word) in bits.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                named.push((w * 64) as u32 + rest.trailing_zeros());
                rest &= rest - 1;
            }
        }
        named
    } else {
        // Few keys on many nodes: the distinct indices, sorted.
        budget.pay(cost::ELEMENT * keys as u64 + cost::sort(keys))?;
        let mut named = owners.to_vec();
        named.sort_unstable();
        named.dedup();
        named
    };
    // Every node's id first, then every comparison: the comparisons' reads of the
    // resource do not wait on each other (on a large structure each one misses
    // the cache).
    let raw = nodes.raw();
    let mut order = Order::default();
    let mut ids = Vec::with_capacity(named.len());
    for &i in &named {
        ids.push(term_id_in(
            nodes.env(),
            raw[i as usize],
            budget,
            &mut order,
        )?);
    }
    budget.charge(lookup.holds_cost() * named.len() as u64)?;
    if named
        .iter()
        .zip(&ids)
        .all(|(&i, &id)| lookup.holds(i as usize, id))
    {
        Ok(())
    } else {
        mismatch(what)
    }
}

/// Test builds only: whether batches check the struct's nodes ([`check_named`]).
/// The `batch_check` hook turns it off so that bench/switch_ab.exs can time
/// the same batches with and without the check in one VM; no test turns it off.
#[cfg(feature = "work-probes")]
pub static CHECK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

#[inline(always)]
fn checking() -> bool {
    #[cfg(feature = "work-probes")]
    return CHECK.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "work-probes"))]
    true
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
    work::count(cost::ELEMENT * (ids.len() * lookups.len()) as u64);
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

/// The ids of the node terms that owner indices name, each hashed once (charged
/// by the term walk) and remembered, with the cost of the VM hashing or comparing
/// that term as a map key ([`cost::map_key`], from the walk's own charge).
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
        budget.pay(cost::ID_LOOKUP)?;
        if let Some(&known) = self.seen.get(&i) {
            return Ok(known);
        }
        let known = node_id(nodes, i, budget)?;
        self.seen.insert(i, known);
        Ok(known)
    }
}

/// `(id, map-key cost)` of node `i` of `nodes` (see [`NodeIds`]), its walk charged.
fn node_id(nodes: &Nodes, i: u32, budget: &mut Budget) -> Outcome<(u64, u64)> {
    let term = nodes.get(i);
    let (units, bytes) = (budget.remaining(), budget.binary_bytes());
    let walked = term_id_raw(term.get_env(), term.as_c_arg(), budget)?;
    let id = match nodes {
        Nodes::Decoded(_, ids) => ids[i as usize],
        Nodes::Tuple(_) => walked,
    };
    let key_cost = cost::map_key(
        units.saturating_sub(budget.remaining()),
        budget.binary_bytes().wrapping_sub(bytes),
    );
    Ok((id, key_cost))
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
    let lookups = targets
        .iter()
        .map(|t| t.structure.lookup().owner_cost())
        .sum();
    let per_key = cost::batch_key(lookups, targets.len());
    let keys = walk_keys(keys, per_key, keep_terms, budget)?;
    let lookups: Vec<&dyn Lookup> = targets.iter().map(|t| t.structure.lookup()).collect();
    let owners = owner_indices(&keys.ids, &lookups, threads);
    for (t, owners) in targets.iter().zip(&owners) {
        if let (Structure::Prepared(lookup), Nodes::Tuple(nodes)) = (&t.structure, &t.nodes) {
            if checking() {
                check_named(*nodes, *lookup, t.what, owners, budget)?;
            }
        }
    }
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
    work::count(2 * cost::ELEMENT * b.owners[0].len() as u64);
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
    budget.charge(cost::groups(n))?;
    let nodes = &b.targets[0].nodes;
    let owners = &b.owners[0];
    work::count(cost::ELEMENT * n as u64 + cost::sort(n));
    let mut order: Vec<u32> = (0..n as u32).collect();
    // Stable: keys stay in input order within a group.
    order.sort_by_key(|&k| owners[k as usize]);
    let mut names: Vec<Term<'a>> = Vec::new();
    let mut lists: Vec<Term<'a>> = Vec::new();
    let mut key_costs: u64 = 0;
    for group in order.chunk_by(|&x, &y| owners[x as usize] == owners[y as usize]) {
        work::count(cost::ELEMENT * group.len() as u64);
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
    budget.pay(cost::map_keys(key_costs, groups))?;
    work::count(cost::sort(groups));
    Term::map_from_term_arrays(env, &names, &lists).or_else(|_| bad_arg("could not build the map"))
}

/// `{key, from, to}` for every key whose owner differs between the two targets.
fn moves<'a>(
    env: Env<'a>,
    keys: Term<'a>,
    before: Term<'a>,
    later: Term<'a>,
    threads: usize,
    budget: &mut Budget,
) -> Outcome<Term<'a>> {
    let batch = run(keys, &[before, later], true, threads, budget)?;
    let (from_nodes, to_nodes) = (&batch.targets[0].nodes, &batch.targets[1].nodes);
    work::count(4 * cost::ELEMENT * batch.keys.len() as u64);
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

nif!(BATCH_OWNERS: "batch_owners" => owners(env, keys, target, threads));
nif!(BATCH_GROUPS: "batch_groups" => groups(env, keys, target, threads));
nif!(BATCH_MOVES: "batch_moves" => moves(env, keys, before, later, threads));
