//! Any Erlang term to its canonical u64 id (docs/HASHING.md, "Term ids"), and the
//! `term_id` and `score` NIFs: the term walk, top to bottom in this file:
//!
//! 1. the entry ([`term_id_in`]): the term's type, then the read of that type;
//! 2. the fast leaves: small integers, cached atoms, whole-byte binaries (a map's
//!    keys ask the atom cache first);
//! 3. the flat fast paths: tuples and small maps of fast leaves, hashed on the stack;
//! 4. the general walk: nested tuples, lists and maps on one id stack;
//! 5. the NIFs;
//! 6. the atom cache's switch, by ERTS version.
//!
//! Beside it: `etf.rs`, the other leaves (floats, wide integers, atom names,
//! bitstrings, pids, funs: read through the external term format where the NIF API
//! cannot); `map_entries.rs`, a map's entries straight from the VM's map iterator;
//! `atom_cache.rs`, the per-VM table from an atom's term value to its id; and
//! `refusals.rs`, why a term has no id. The encodings themselves live in
//! `hrw_core::term_hash`, so the spec has one implementation.
//!
//! Budget: every step that costs more than a constant is paid for *before* it
//! runs, by a named constant or function of the cost model (`hrw_core::cost`,
//! which holds the term walk's figures too), with one call: `budget.pay(units)?`
//! charges the budget and, in test builds, counts the work (test/hrw/budget_test.exs
//! compares the two). A visit costs [`cost::TERM`]; hashing costs one unit per
//! [`cost::BYTES_PER_UNIT`] bytes, a sort [`cost::sort`]; a tuple, list or map also
//! pays for the buffer of its children's ids, a map for its iteration and the sort
//! of its entries (charged whole before it is read, counted entry by entry), and
//! every use of the external term format (ETF) for its bytes. The only reads whose
//! size is not known in advance (the ETF of a bitstring, a fun, or an integer wider
//! than [`etf::MAX_NORMAL_BIG_BYTES`]) never run on a normal scheduler: they ask
//! for a dirty one first, and are charged once their size is known (a dirty budget
//! is unlimited; the charge keeps the count honest).

mod atom_cache;
mod etf;
mod map_entries;
mod refusals;

use crate::budget::{needs_dirty, Budget, Outcome};
use crate::nif::nif;
use crate::tuple_view::TupleView;
use etf::{atom_id, leaf_id};
use hrw_core::term_hash::{self, tag, IdStack, Mark};
use hrw_core::{cost, n3, work};
use map_entries::MapEntries;
use refusals::{too_deep, unreadable};
use rustler::sys::{
    enif_get_int64, enif_get_map_size, enif_inspect_binary, ErlNifBinary, ErlNifTerm,
};
use rustler::{Env, Term, TermType};
use std::mem::MaybeUninit;

// ---------------------------------------------------------------------------
// 1. The entry

/// The id of `term`, charging its cost to `budget`.
///
/// Fast paths first, for the keys people use: small integers, atoms (from the
/// per-VM cache, [`atom_cache`]), binaries, then tuples and small maps whose
/// elements are all of those, hashed on the stack. Every other term, and any
/// container holding one, takes the general walk. Both give the same ids
/// (docs/HASHING.md §2); the fast paths only skip the type query, the name copy of
/// an atom and the shared encoding buffer.
#[inline]
pub fn term_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    term_id_raw(term.get_env(), term.as_c_arg(), budget)
}

/// [`term_id`] of a raw term of `env`'s call: walkers over many terms pass raw
/// terms (a rustler `Term` carries a one-byte env kind, and moving one through
/// memory stalls the wider load that reads it back, per element).
#[inline]
pub fn term_id_raw(env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Outcome<u64> {
    term_id_in(env, raw, budget, &mut Order::default())
}

/// What a walk over many terms (a node list, a key list) met last: after a
/// binary, the next term is first asked whether it is a binary, which answers a
/// list of binaries in one VM call per element; after an atom, the atom cache is
/// asked first (see [`key_leaf`]), which answers a list of cached atoms with no
/// VM call. Any other term, and a term that is not what the hint guessed, has its
/// type asked first.
#[derive(Clone, Copy, Default)]
pub struct Order {
    after_binary: bool,
    after_atom: bool,
}

/// [`term_id_raw`] of a term of a walk in `order` (which it updates). The term's
/// type is asked (one VM call), then the term is read as that type: small
/// integers, atoms and binaries on the fast path, tuples and maps through
/// [`tuple_id`] and [`map_id`], the rest by the general walk. Only the speed
/// depends on the order.
#[inline]
pub fn term_id_in(
    env: Env,
    raw: ErlNifTerm,
    budget: &mut Budget,
    order: &mut Order,
) -> Outcome<u64> {
    budget.pay(cost::TERM)?;
    if order.after_binary {
        match binary_leaf(env, raw, budget) {
            Fast::Id(id) => return Ok(id),
            Fast::Dirty => return needs_dirty(),
            Fast::Other => {}
        }
    } else if order.after_atom {
        budget.pay(cost::ATOM_CACHE)?;
        if let Some(id) = atom_cache::get(raw) {
            return Ok(id);
        }
    }
    let kind = type_of(env, raw);
    order.after_binary = matches!(kind, TermType::Binary);
    order.after_atom = matches!(kind, TermType::Atom) && atom_cache::is_on();
    fast_leaf_of(env, raw, kind, budget).or_else(|| other_id(env, raw, kind, budget))
}

/// The type of `raw`, a term of `env`'s call (`enif_term_type`).
#[inline(always)]
fn type_of(env: Env, raw: ErlNifTerm) -> TermType {
    // SAFETY: a term of this call's env.
    unsafe { Term::new(env, raw) }.get_type()
}

/// The id of the tuple `term` with `elements`, its visit charged.
#[inline(always)]
fn tuple_id(term: Term, elements: &[ErlNifTerm], budget: &mut Budget) -> Outcome<u64> {
    if let Some(id) = flat_tuple(term.get_env(), elements, budget)? {
        return Ok(id);
    }
    Walk::new(budget).container_id(term, TermType::Tuple, 0)
}

/// The id of the map `term` of `n` entries, its visit charged.
#[inline(always)]
fn map_id(term: Term, n: usize, budget: &mut Budget) -> Outcome<u64> {
    if let Some(id) = flat_map(term, n, budget)? {
        return Ok(id);
    }
    Walk::new(budget).container_id(term, TermType::Map, 0)
}

/// A term of type `kind` that the fast leaves did not take, its visit charged.
#[inline(never)]
fn other_id(env: Env, raw: ErlNifTerm, kind: TermType, budget: &mut Budget) -> Outcome<u64> {
    // SAFETY: a term of this call's env.
    let term = unsafe { Term::new(env, raw) };
    match kind {
        TermType::Tuple => tuple_id(term, tuple_elements(term)?, budget),
        TermType::Map => {
            let n = map_size(env, raw).ok_or_else(|| unreadable("map"))?;
            map_id(term, n, budget)
        }
        TermType::List => Walk::new(budget).container_id(term, TermType::List, 0),
        kind => leaf_id(term, kind, budget),
    }
}

/// The number of entries of `raw` if it is a map.
#[inline(always)]
fn map_size(env: Env, raw: ErlNifTerm) -> Option<usize> {
    let mut size: usize = 0;
    // SAFETY: `size` is a valid out-pointer; the call returns 0 unless `raw` (a
    // term of `env`'s call) is a map, and then stores its size.
    (unsafe { enif_get_map_size(env.as_c_arg(), raw, &mut size) } != 0).then_some(size)
}

// ---------------------------------------------------------------------------
// 2. The fast leaves: taken without asking the VM for a term's type, with the
// hints from the term layout that order those questions

/// What [`fast_leaf`] found: small enough to come back in registers (an
/// `Outcome<Option<u64>>` goes through memory, and its byte-wide tag then stalls
/// the wider load that reads it back).
#[derive(Clone, Copy)]
enum Fast {
    /// The term's id.
    Id(u64),
    /// Not a fast leaf (or one whose reading failed: the general walk reads it
    /// again and reports the error); nothing was charged beyond what is counted.
    Other,
    /// The budget ran out.
    Dirty,
}

impl Fast {
    /// The id found, the budget's failure, or else `other()`.
    #[inline(always)]
    fn or_else(self, other: impl FnOnce() -> Outcome<u64>) -> Outcome<u64> {
        match self {
            Fast::Id(id) => Ok(id),
            Fast::Dirty => needs_dirty(),
            Fast::Other => other(),
        }
    }
}

/// The id of a small integer, an atom or a binary, its visit already charged and
/// counted; [`Fast::Other`] for anything else. Reads the raw term with the NIF API
/// (a rustler `Term` built per element costs a stalled reload of its env flag).
#[inline(always)]
fn fast_leaf(env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
    fast_leaf_of(env, raw, type_of(env, raw), budget)
}

/// [`fast_leaf`] of a map key, which is most often an atom: the atom cache is
/// asked before the term's type. Only atoms are stored there, under their term
/// value, so a hit is that atom (the same id the type query's path gives) and
/// saves a VM call; a miss goes on to [`fast_leaf`].
#[inline(always)]
fn key_leaf(env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
    if budget.pay(cost::ATOM_CACHE).is_err() {
        return Fast::Dirty;
    }
    match atom_cache::get(raw) {
        Some(id) => Fast::Id(id),
        None => fast_leaf(env, raw, budget),
    }
}

/// [`fast_leaf`] of a term of type `kind`.
#[inline(always)]
fn fast_leaf_of(term_env: Env, raw: ErlNifTerm, kind: TermType, budget: &mut Budget) -> Fast {
    match kind {
        TermType::Integer => {
            let mut v: i64 = 0;
            // SAFETY: `v` is a valid out-pointer; the call returns 0 unless `raw` is
            // an integer that fits an i64, and then stores it.
            if unsafe { enif_get_int64(term_env.as_c_arg(), raw, &mut v) } != 0 {
                return Fast::Id(term_hash::int64(v));
            }
            Fast::Other
        }
        TermType::Atom => {
            if budget.pay(cost::ATOM_CACHE).is_err() {
                return Fast::Dirty;
            }
            if let Some(id) = atom_cache::get(raw) {
                return Fast::Id(id);
            }
            // SAFETY: a term of this call's env.
            first_atom_id(unsafe { Term::new(term_env, raw) }, budget)
        }
        TermType::Binary => binary_leaf(term_env, raw, budget),
        _ => Fast::Other,
    }
}

/// The id of a whole-byte binary, its visit already charged and counted (its
/// hashing charged here); [`Fast::Other`] for anything else.
#[inline(always)]
fn binary_leaf(term_env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
    let env = term_env.as_c_arg();
    // Inspecting a binary that starts off a byte boundary copies it: charged first.
    // SAFETY: `raw` is a live term of this call.
    let unaligned = unsafe { crate::bits::unaligned_size(atom_cache::bits(raw) as usize) };
    if let Some(size) = unaligned {
        if budget.pay(cost::copy(size)).is_err() {
            return Fast::Dirty;
        }
    }
    let mut bin: MaybeUninit<ErlNifBinary> = MaybeUninit::uninit();
    // SAFETY: `bin` is a valid out-pointer; on success (a whole-byte binary) the VM
    // fills it with the binary's size and data pointer, valid while the term is
    // (this call), and we only read them.
    if unsafe { enif_inspect_binary(env, raw, bin.as_mut_ptr()) } != 0 {
        // SAFETY: initialised by the successful call.
        let bin = unsafe { bin.assume_init() };
        if unaligned.is_some_and(|size| size != bin.size) {
            crate::bits::disable();
        }
        if budget.pay(cost::hash(bin.size)).is_err() {
            return Fast::Dirty;
        }
        budget.note_binary(bin.size);
        let bytes = if bin.size == 0 {
            &[][..]
        } else {
            // SAFETY: `data` points at `size` readable bytes of the binary (above).
            unsafe { std::slice::from_raw_parts(bin.data, bin.size) }
        };
        return Fast::Id(term_hash::binary(bytes));
    }
    Fast::Other
}

/// An atom missing from the cache: its id, computed (charged and counted in
/// [`atom_id`]) and stored (charged and counted here).
#[inline(never)]
fn first_atom_id(term: Term, budget: &mut Budget) -> Fast {
    match atom_id(term, budget) {
        Ok(id) => {
            if budget.pay(cost::ATOM_CACHE).is_err() {
                return Fast::Dirty;
            }
            atom_cache::put(term.as_c_arg(), id);
            Fast::Id(id)
        }
        Err(failure) if failure.needs_dirty() => Fast::Dirty,
        Err(_) => Fast::Other,
    }
}

// ---------------------------------------------------------------------------
// 3. The flat fast paths: tuples and small maps of at most [`FLAT_MAX`]
// [`fast_leaf`] terms, hashed on the stack. They give the same ids as the general
// walk ([`Walk`]), to which they hand over what they do not take without charging
// or visiting anything twice.

/// Widest tuple (and map, in entries) hashed on the stack by the flat fast path.
const FLAT_MAX: usize = 8;

/// A tuple of at most [`FLAT_MAX`] elements, all of them [`fast_leaf`] terms: its
/// id, hashed from a stack buffer. `None`, having charged nothing, when it is wider
/// or its first element is not such a leaf; a later element that is not hands the
/// rest of the tuple to the general walk (with the ids so far: nothing is charged
/// or visited twice).
#[inline(never)]
fn flat_tuple(env: Env, elements: &[ErlNifTerm], budget: &mut Budget) -> Outcome<Option<u64>> {
    if elements.len() > FLAT_MAX {
        return Ok(None);
    }
    budget.pay(cost::ids(elements.len()))?;
    let mut ids = [0u64; FLAT_MAX];
    for (i, &element) in elements.iter().enumerate() {
        budget.pay(cost::TERM)?;
        match fast_leaf(env, element, budget) {
            Fast::Dirty => return needs_dirty(),
            Fast::Id(id) => ids[i] = id,
            Fast::Other => {
                let mut walk = Walk::new(budget);
                let mark = walk.ids.open();
                walk.ids.reserve(elements.len());
                for &id in &ids[..i] {
                    walk.ids.push(id);
                }
                // This element's visit is charged: go on below the fast leaves.
                // SAFETY: `element` is a term of the tuple, valid in `env` for this call.
                let id = walk.non_binary_id(unsafe { Term::new(env, element) }, 1)?;
                walk.ids.push(id);
                for &rest in &elements[i + 1..] {
                    // SAFETY: as above.
                    let rest = unsafe { Term::new(env, rest) };
                    let id = walk.id_at(rest, 1)?;
                    walk.ids.push(id);
                }
                return Ok(Some(walk.ids.close(mark, tag::TUPLE)));
            }
        }
    }
    Ok(Some(term_hash::tagged_ids(
        tag::TUPLE,
        &ids[..elements.len()],
    )))
}

/// A map of at most [`FLAT_MAX`] entries: its id. When its keys and values are all
/// [`fast_leaf`] terms the entries are sorted and hashed on the stack; the first
/// key or value that is not hands the entries read so far and the open iterator to
/// [`Walk::map_rest`], so nothing is charged or visited twice. `None`, having
/// charged nothing, for a larger map.
#[inline(never)]
fn flat_map(term: Term, n: usize, budget: &mut Budget) -> Outcome<Option<u64>> {
    let env = term.get_env();
    if n > FLAT_MAX {
        return Ok(None);
    }
    charge_map(n, budget)?;
    let mut slot = MaybeUninit::uninit();
    let mut iter = MapEntries::new(term, &mut slot)?;
    work::count(cost::MAP);
    let mut entries = [(0u64, 0u64); FLAT_MAX];
    // Exactly `n` entries (the map's size): the iterator is advanced between them
    // only, not asked past the last one (two VM calls fewer a map).
    for len in 0..n {
        if len > 0 {
            iter.advance();
        }
        let (k, v) = iter.current().ok_or_else(|| unreadable("map"))?;
        // SAFETY: both are terms of the map, valid in `env` for this call.
        let term = |raw| unsafe { Term::new(env, raw) };
        work::count(cost::MAP_ENTRY + cost::ids(2) - cost::hash(1));
        budget.pay(cost::TERM)?;
        let kid = match key_leaf(env, k, budget) {
            Fast::Id(id) => id,
            Fast::Dirty => return needs_dirty(),
            Fast::Other => {
                iter.advance();
                let mut walk = Walk::new(budget);
                let kid = walk.non_binary_id(term(k), 1)?;
                let vid = walk.id_at(term(v), 1)?;
                return walk
                    .map_rest(env, n, iter, &entries[..len], (kid, vid))
                    .map(Some);
            }
        };
        budget.pay(cost::TERM)?;
        let vid = match fast_leaf(env, v, budget) {
            Fast::Id(id) => id,
            Fast::Dirty => return needs_dirty(),
            Fast::Other => {
                iter.advance();
                let mut walk = Walk::new(budget);
                let vid = walk.non_binary_id(term(v), 1)?;
                return walk
                    .map_rest(env, n, iter, &entries[..len], (kid, vid))
                    .map(Some);
            }
        };
        entries[len] = (kid, vid);
    }
    work::count(cost::sort(n) + cost::hash(1));
    // Insertion sort by (key id, value id) into the flat encoding order.
    let mut flat = [0u64; 2 * FLAT_MAX];
    for (i, &(k, v)) in entries[..n].iter().enumerate() {
        let mut j = i;
        while j > 0 && (flat[2 * j - 2], flat[2 * j - 1]) > (k, v) {
            flat[2 * j] = flat[2 * j - 2];
            flat[2 * j + 1] = flat[2 * j - 1];
            j -= 1;
        }
        flat[2 * j] = k;
        flat[2 * j + 1] = v;
    }
    Ok(Some(term_hash::tagged_ids(tag::MAP, &flat[..2 * n])))
}

// ---------------------------------------------------------------------------
// 4. The general walk, for every term the fast paths do not take: nested
// containers, lists, and the leaves of `etf.rs`

/// Deeper nesting is refused: it keeps recursion far inside a scheduler's stack.
/// The term itself is at depth 0, the elements of a container at depth `d` are at
/// `d + 1`; a term at a depth above this is refused.
pub const MAX_DEPTH: usize = 256;

/// The elements of a tuple term, in place (raw: the fast paths read them as such).
fn tuple_elements<'a>(term: Term<'a>) -> Outcome<&'a [ErlNifTerm]> {
    TupleView::of(term)
        .map(|t| t.raw())
        .ok_or_else(|| unreadable("tuple"))
}

/// Charges what a map of `n` entries costs besides its keys' and values' visits,
/// before it is read: the iteration, the entries' room and the encoding's hash,
/// and the sort.
fn charge_map(n: usize, budget: &mut Budget) -> Outcome<()> {
    budget.charge(cost::map_iteration(n))?;
    budget.charge(cost::ids(2 * n))?;
    budget.charge(cost::sort(n))?;
    Ok(())
}

/// One term walk: containers build their encodings on one shared [`IdStack`], so a
/// level of nesting costs the machine stack only a small frame (the walk recurses,
/// at most [`MAX_DEPTH`] levels), and small terms allocate nothing.
struct Walk<'b> {
    budget: &'b mut Budget,
    ids: IdStack,
}

impl<'b> Walk<'b> {
    fn new(budget: &'b mut Budget) -> Walk<'b> {
        Walk {
            budget,
            ids: IdStack::new(),
        }
    }

    fn id_at(&mut self, term: Term, depth: usize) -> Outcome<u64> {
        if depth > MAX_DEPTH {
            return Err(too_deep(MAX_DEPTH));
        }
        self.budget.pay(cost::TERM)?;
        match fast_leaf(term.get_env(), term.as_c_arg(), self.budget) {
            Fast::Id(id) => Ok(id),
            Fast::Dirty => needs_dirty(),
            Fast::Other => self.non_binary_id(term, depth),
        }
    }

    /// [`Walk::id_at`] of a map key (see [`key_leaf`]).
    fn key_id_at(&mut self, term: Term, depth: usize) -> Outcome<u64> {
        if depth > MAX_DEPTH {
            return Err(too_deep(MAX_DEPTH));
        }
        self.budget.pay(cost::TERM)?;
        match key_leaf(term.get_env(), term.as_c_arg(), self.budget) {
            Fast::Id(id) => Ok(id),
            Fast::Dirty => needs_dirty(),
            Fast::Other => self.non_binary_id(term, depth),
        }
    }

    /// [`Walk::id_at`] for a term that is not a [`fast_leaf`], its visit charged.
    fn non_binary_id(&mut self, term: Term, depth: usize) -> Outcome<u64> {
        match term.get_type() {
            kind @ (TermType::Tuple | TermType::List | TermType::Map) => {
                self.container_id(term, kind, depth)
            }
            kind => leaf_id(term, kind, self.budget),
        }
    }

    fn container_id(&mut self, term: Term, kind: TermType, depth: usize) -> Outcome<u64> {
        match kind {
            TermType::Tuple => self.tuple_id(term, depth),
            TermType::List => self.list_id(term, depth),
            _ => self.map_id(term, depth),
        }
    }

    #[inline(never)]
    fn tuple_id(&mut self, term: Term, depth: usize) -> Outcome<u64> {
        let env = term.get_env();
        let elements = tuple_elements(term)?;
        // The ids' room in the shared encoding buffer, and their hash.
        self.budget.pay(cost::ids(elements.len()))?;
        let mark = self.ids.open();
        self.ids.reserve(elements.len());
        for &element in elements {
            // SAFETY: `element` is a term of the tuple, valid in `env` for this call.
            let element = unsafe { Term::new(env, element) };
            let id = self.id_at(element, depth + 1)?;
            self.ids.push(id);
        }
        Ok(self.ids.close(mark, tag::TUPLE))
    }

    /// Walks cons cells itself: rustler's list iterator panics on improper lists.
    #[inline(never)]
    fn list_id(&mut self, term: Term, depth: usize) -> Outcome<u64> {
        let mark = self.ids.open();
        let mut rest = term;
        loop {
            if rest.is_empty_list() {
                return Ok(self.ids.close(mark, tag::LIST));
            }
            match rest.list_get_cell() {
                Ok((head, tail)) => {
                    // The cell, and its id's room and hash in the encoding buffer
                    // (which grows with the list: every growth is paid for here).
                    self.budget.pay(cost::TERM + cost::ids(1))?;
                    let id = self.id_at(head, depth + 1)?;
                    self.ids.push(id);
                    rest = tail;
                }
                Err(_) => {
                    self.budget.pay(cost::ids(1))?;
                    let id = self.id_at(rest, depth + 1)?;
                    self.ids.push(id);
                    return Ok(self.ids.close(mark, tag::IMPROPER_LIST));
                }
            }
        }
    }

    #[inline(never)]
    fn map_id(&mut self, term: Term, depth: usize) -> Outcome<u64> {
        let n = term.map_size().map_err(|_| unreadable("map"))?;
        // All of it before any of it (keys and values are charged as visited).
        charge_map(n, self.budget)?;
        let mut slot = MaybeUninit::uninit();
        let mut iter = MapEntries::new(term, &mut slot)?;
        work::count(cost::MAP);
        let mark = self.ids.open_map();
        self.ids.reserve_entries(n);
        let env = term.get_env();
        while let Some((k, v)) = iter.next_entry(env) {
            work::count(cost::MAP_ENTRY + cost::ids(2) - cost::hash(1));
            let k = self.key_id_at(k, depth + 1)?;
            let v = self.id_at(v, depth + 1)?;
            self.ids.push_entry(k, v);
        }
        self.close_map(mark, n)
    }

    /// The rest of a top-level map that `fast::flat_map` began (at depth 0): `done`
    /// entries and then `current` read, `iter` just past `current`.
    fn map_rest<'a>(
        &mut self,
        env: Env<'a>,
        n: usize,
        mut iter: MapEntries<'a, '_>,
        done: &[(u64, u64)],
        current: (u64, u64),
    ) -> Outcome<u64> {
        let mark = self.ids.open_map();
        self.ids.reserve_entries(n);
        for &(k, v) in done {
            self.ids.push_entry(k, v);
        }
        self.ids.push_entry(current.0, current.1);
        while let Some((k, v)) = iter.next_entry(env) {
            work::count(cost::MAP_ENTRY + cost::ids(2) - cost::hash(1));
            let k = self.key_id_at(k, 1)?;
            let v = self.id_at(v, 1)?;
            self.ids.push_entry(k, v);
        }
        self.close_map(mark, n)
    }

    fn close_map(&mut self, mark: Mark, n: usize) -> Outcome<u64> {
        if self.ids.entries_since(mark) != n {
            return Err(unreadable("map"));
        }
        // Sorts the entries (charged above) and hashes them.
        work::count(cost::sort(n) + cost::hash(1));
        Ok(self.ids.close_map(mark))
    }
}

// ---------------------------------------------------------------------------
// 5. The NIFs

/// The canonical id of any term (docs/HASHING.md); exposed for users and tests.
fn id_of(_env: Env, term: Term, budget: &mut Budget) -> Outcome<u64> {
    term_id(term, budget)
}

/// The N3 score of `node` for `key`: `HRW.owner/2` picks the node maximising it.
fn score_of(_env: Env, key: Term, node: Term, budget: &mut Budget) -> Outcome<u64> {
    let k = n3::prep(term_id(key, budget)?);
    Ok(n3::score(k, term_id(node, budget)?))
}

nif!(TERM_ID: "term_id" => id_of(env, term));
nif!(SCORE: "score" => score_of(env, key, node));

// ---------------------------------------------------------------------------
// 6. The atom cache's switch (the table: atom_cache.rs)

/// Whether the atom cache may be used on ERTS major version `erts_major`: on
/// ERTS 13 to 17 (OTP 25 to 29) atoms are never collected, so an atom's term
/// value names it for the VM's lifetime. Any other version (or none known):
/// off.
pub fn atom_cache_for(erts_major: Option<u32>) -> bool {
    matches!(erts_major, Some(13..=17))
}

/// Switches the atom cache on or off (the load callback, and test builds).
pub fn switch_atom_cache(on: bool) {
    atom_cache::switch(on);
}
