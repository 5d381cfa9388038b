//! Any Erlang term to its canonical u64 id (docs/HASHING.md, "Term ids").
//!
//! This file only walks terms; the encodings themselves live in
//! `hrw_core::term_hash`, so the spec has one implementation.
//!
//! Budget: every step that costs more than a constant is charged *before* it runs,
//! with a named cost constant beside it (units ≈ ns, see `failure.rs`). A visit
//! costs [`COST_PER_TERM`]; hashing costs one unit per [`BYTES_PER_UNIT`] bytes;
//! a tuple, list or map also pays for the buffer of its children's ids, a map for
//! its iteration and the sort of its entries, and every use of the external term
//! format (ETF) for its bytes. The only reads whose size is not known in advance
//! (the ETF of a bitstring, a fun, or an integer wider than [`MAX_NORMAL_BIG_BYTES`])
//! never run on a normal scheduler: they ask for the dirty twin first, and are
//! charged once their size is known (a dirty budget is unlimited; the charge keeps
//! the count honest). Test builds count the work beside each step (`work::count`),
//! at the step itself, for test/hrw/budget_test.exs.

use crate::failure::{bad_arg, Budget, Failure, Outcome};
use crate::tuple_view::TupleView;
use hrw_core::term_hash::{self, tag, IdStack, Mark, MAX_ATOM_CHARS, MAX_ATOM_UTF8_BYTES};
use hrw_core::work;
use rustler::sys::{
    enif_get_atom, enif_get_atom_length, enif_get_int64, enif_get_map_size, enif_inspect_binary,
    enif_is_atom, enif_map_iterator_create, enif_map_iterator_destroy, enif_map_iterator_get_pair,
    enif_map_iterator_next, enif_term_to_binary, ErlNifBinary, ErlNifCharEncoding, ErlNifEnv,
    ErlNifMapIterator, ErlNifMapIteratorEntry, ErlNifTerm,
};
use rustler::{Encoder, Env, OwnedBinary, Term, TermType};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_uint};

/// Deeper nesting is refused: it keeps recursion far inside a scheduler's stack.
/// The term itself is at depth 0, the elements of a container at depth `d` are at
/// `d + 1`; a term at a depth above this is refused.
pub const MAX_DEPTH: usize = 256;

/// Visiting one term: the type test and reading a scalar (an integer of at most 64
/// bits, a float, a binary's header, an atom name of at most 255 characters).
pub const COST_PER_TERM: u64 = 16;
/// Hashing: one unit per this many bytes (XXH3 runs at several bytes per ns).
const BYTES_PER_UNIT: u64 = 16;
/// Holding one child id of a tuple, list or map in its encoding (the 8 bytes of
/// every id are also charged as hashed bytes).
const COST_PER_ID: u64 = 4;
/// Setting up and releasing the VM's iterator over one map.
const COST_PER_MAP: u64 = 64;
/// One step of the VM's map iterator (fetching an entry, advancing), besides the
/// visits of the entry's key and value. Large maps are HAMTs: iterating them is
/// several times slower than a list walk.
const COST_PER_MAP_ENTRY: u64 = 24;
/// One comparison-and-move step of the entry sort: a map of `n` entries pays for
/// `n × ceil(log2 n)` of them.
const COST_PER_SORT_STEP: u64 = 2;
/// One call into the VM's external term format (allocating the result binary, or
/// decoding a limit term; measured 110-290 ns a pid, ref or 2040-bit bignum warm,
/// several times that on a loaded machine).
const COST_PER_ETF_CALL: u64 = 240;
/// ETF bytes written or read per unit (digits and names are copied as they are).
const ETF_BYTES_PER_UNIT: u64 = 2;

/// Widest integer magnitude, in bytes, read on a normal scheduler (up to 2^2040 − 1).
/// Its size is proved by two comparisons with fixed limits before it is encoded.
pub const MAX_NORMAL_BIG_BYTES: usize = 255;
/// The narrower limit tried first, so that 65- to 128-bit integers pay for a small
/// limit term only.
const SMALL_BIG_BYTES: usize = 16;

/// Largest ETF of an atom: version, tag, a 2-byte length, the UTF-8 name.
const MAX_ATOM_ETF: usize = 4 + MAX_ATOM_UTF8_BYTES;
/// Largest ETF of a pid, port or reference: the node name (an atom) plus at most
/// 5 words of 4 bytes, a creation, lengths and tags (OTP 25 writes at most ~30
/// bytes besides the name).
const MAX_OPAQUE_ETF: usize = MAX_ATOM_ETF + 64;

/// One lookup (or first store) in the per-VM atom-id cache: a hash of the atom's
/// term value and one or two probes of a static table.
const COST_ATOM_CACHE: u64 = 4;

/// Reading an atom's name on a cache miss, besides its characters.
const COST_ATOM_READ: u64 = 48;

/// Widest tuple (and map, in entries) hashed on the stack by the flat fast path.
const FLAT_MAX: usize = 8;

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
    term_id_in(env, raw, budget, &mut Probes::new())
}

/// In which order [`term_id_in`] asks what a boxed term is. Each failed probe is a
/// VM call (~2-3.5 ns here). A key, and the first term of a walk, is asked whether
/// it is a binary, and if not its type is queried (asking tuples and maps first
/// made binary keys 10-25% slower in `bench/keys.exs`, and other boxed keys
/// slower too). Once a walk over many terms has met a boxed term that is not a
/// binary, it asks the next ones whether they are a tuple or a map, then a
/// binary, and goes back to binaries first at the next term that is neither: a
/// list of tuples pays one failed probe and one type query, on its first element,
/// instead of both on every element (a batch of `{:user, i}` keys ~10% faster),
/// and a list of floats no more than a single float does.
#[derive(Clone, Copy)]
pub struct Probes {
    binaries_first: bool,
}

impl Probes {
    /// Binaries first (one key, or the start of a walk).
    pub fn new() -> Probes {
        Probes {
            binaries_first: true,
        }
    }
}

/// [`term_id_raw`], asking what a boxed term is in the order of `probes` (which it
/// updates: see [`Probes`]). Only the speed depends on the order.
#[inline]
pub fn term_id_in(
    env: Env,
    raw: ErlNifTerm,
    budget: &mut Budget,
    probes: &mut Probes,
) -> Outcome<u64> {
    budget.charge(COST_PER_TERM)?;
    work::count(COST_PER_TERM);
    if !boxed(raw) {
        return fast_leaf(env, raw, budget).or_else(|| slow_id(env, raw, budget, probes));
    }
    if probes.binaries_first {
        return binary_leaf(env, raw, budget).or_else(|| slow_id(env, raw, budget, probes));
    }
    if let Some(id) = container_id(env, raw, budget) {
        return id;
    }
    match binary_leaf(env, raw, budget) {
        Fast::Id(id) => {
            probes.binaries_first = true;
            Ok(id)
        }
        Fast::Dirty => Err(Failure::NeedsDirty),
        Fast::Other => slow_id(env, raw, budget, probes),
    }
}

/// The id of `raw` if it is a tuple or a map (`None` otherwise, nothing charged).
#[inline(always)]
fn container_id(env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Option<Outcome<u64>> {
    // SAFETY: a term of this call's env.
    let term = unsafe { Term::new(env, raw) };
    if let Some(tuple) = TupleView::of(term) {
        return Some(tuple_id(term, tuple.raw(), budget));
    }
    map_size(env, raw).map(|n| map_id(term, n, budget))
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

/// A term that no probe of [`term_id_in`] took, its visit charged: its type is
/// queried, then read as that type. The next term of a walk is probed as a
/// container first when this one is a tuple or a map, else as a binary first.
#[inline(never)]
fn slow_id(env: Env, raw: ErlNifTerm, budget: &mut Budget, probes: &mut Probes) -> Outcome<u64> {
    // SAFETY: a term of this call's env.
    let term = unsafe { Term::new(env, raw) };
    let kind = term.get_type();
    probes.binaries_first = !matches!(kind, TermType::Tuple | TermType::Map);
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

/// Where the VM's term layout hints at a small integer (low 4 bits `1111`) or an
/// atom (low 6 bits `001011`). Only an ordering hint: every value is still read
/// through the NIF API, so a different layout only makes the fast path slower.
#[inline(always)]
fn hint(term: ErlNifTerm) -> (bool, bool) {
    let raw = atom_cache::bits(term);
    (raw & 0xF == 0xF, raw & 0x3F == 0x0B)
}

/// Where the term layout hints at a boxed term (low 2 bits `10`: a tuple, binary,
/// map, bignum, float, ...). A hint as [`hint`] is.
#[inline(always)]
fn boxed(term: ErlNifTerm) -> bool {
    atom_cache::bits(term) & 0x3 == 0x2
}

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
            Fast::Dirty => Err(Failure::NeedsDirty),
            Fast::Other => other(),
        }
    }
}

/// The id of a small integer, an atom or a binary, its visit already charged and
/// counted; [`Fast::Other`] for anything else. Reads the raw term with the NIF API
/// (a rustler `Term` built per element costs a stalled reload of its env flag).
#[inline(always)]
fn fast_leaf(term_env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
    let env = term_env.as_c_arg();
    let (small, atom) = hint(raw);
    if small {
        let mut v: i64 = 0;
        // SAFETY: `v` is a valid out-pointer; the call returns 0 unless `raw` is an
        // integer that fits an i64, and then stores it.
        if unsafe { enif_get_int64(env, raw, &mut v) } != 0 {
            return Fast::Id(term_hash::int64(v));
        }
    } else if atom {
        if budget.charge(COST_ATOM_CACHE).is_err() {
            return Fast::Dirty;
        }
        work::count(COST_ATOM_CACHE);
        if let Some(id) = atom_cache::get(raw) {
            return Fast::Id(id);
        }
        // SAFETY: a term of this call's env.
        if unsafe { enif_is_atom(env, raw) } != 0 {
            // SAFETY: a term of this call's env.
            return first_atom_id(unsafe { Term::new(term_env, raw) }, budget);
        }
    }
    binary_leaf(term_env, raw, budget)
}

/// The id of a whole-byte binary, its visit already charged and counted (its
/// hashing charged here); [`Fast::Other`] for anything else.
#[inline(always)]
fn binary_leaf(term_env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
    let env = term_env.as_c_arg();
    // Inspecting a binary that starts off a byte boundary copies it: charged first.
    let unaligned = crate::bits::unaligned_size(raw);
    if let Some(size) = unaligned {
        if budget.charge(copy_cost(size)).is_err() {
            return Fast::Dirty;
        }
        work::count(copy_cost(size));
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
        if budget.charge(hash_cost(bin.size)).is_err() {
            return Fast::Dirty;
        }
        budget.note_binary(bin.size);
        work::count(hash_cost(bin.size));
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
            if budget.charge(COST_ATOM_CACHE).is_err() {
                return Fast::Dirty;
            }
            work::count(COST_ATOM_CACHE);
            atom_cache::put(term.as_c_arg(), id);
            Fast::Id(id)
        }
        Err(Failure::NeedsDirty) => Fast::Dirty,
        Err(_) => Fast::Other,
    }
}

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
    budget.charge(ids_cost(elements.len()))?;
    work::count(ids_cost(elements.len()));
    let mut ids = [0u64; FLAT_MAX];
    for (i, &element) in elements.iter().enumerate() {
        budget.charge(COST_PER_TERM)?;
        work::count(COST_PER_TERM);
        match fast_leaf(env, element, budget) {
            Fast::Dirty => return Err(Failure::NeedsDirty),
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
    work::count(COST_PER_MAP);
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
        work::count(COST_PER_MAP_ENTRY + ids_cost(2) - hash_cost(1));
        budget.charge(COST_PER_TERM)?;
        work::count(COST_PER_TERM);
        let kid = match fast_leaf(env, k, budget) {
            Fast::Id(id) => id,
            Fast::Dirty => return Err(Failure::NeedsDirty),
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
        budget.charge(COST_PER_TERM)?;
        work::count(COST_PER_TERM);
        let vid = match fast_leaf(env, v, budget) {
            Fast::Id(id) => id,
            Fast::Dirty => return Err(Failure::NeedsDirty),
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
    work::count(sort_cost(n) + hash_cost(1));
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

/// What a map of `n` entries costs besides its keys' and values' visits, charged
/// before it is read: the iteration, the entries' room and the encoding's hash,
/// and the sort.
fn charge_map(n: usize, budget: &mut Budget) -> Outcome<()> {
    budget.charge(COST_PER_MAP + n as u64 * COST_PER_MAP_ENTRY)?;
    budget.charge(ids_cost(2 * n))?;
    budget.charge(sort_cost(n))
}

/// The elements of a tuple term, in place (raw: the fast paths read them as such).
fn tuple_elements<'a>(term: Term<'a>) -> Outcome<&'a [ErlNifTerm]> {
    TupleView::of(term)
        .map(|t| t.raw())
        .ok_or_else(|| unreadable("tuple"))
}

/// A lock-free table from an atom's term value to its id, shared by every
/// scheduler of the VM. Sound because atoms are interned and never collected
/// (OTP 25): while the VM runs, one term value names one atom, and an id is a
/// function of the atom, so any id stored under a value is that atom's id.
///
/// 4-way set associative (a set is one 64-byte line), and it keeps caching when
/// full: a new atom takes a free slot of its set, else evicts one chosen by its
/// id's low bits (pseudo-random replacement; no recency bits to update on hits,
/// which stay a single line read). A slot is rewritten seqlock-style: its key goes
/// to `BUSY` before the id changes, and a reader re-checks the key after reading
/// the id, so it never pairs a key with another atom's id.
mod atom_cache {
    use rustler::sys::ErlNifTerm;
    use std::sync::atomic::{fence, AtomicU64, Ordering};

    const SLOTS: usize = 1 << 13;
    const WAYS: usize = 4;
    /// A slot being written: never an atom's term value (its low bits are 001011).
    const BUSY: u64 = u64::MAX;

    struct Slot {
        key: AtomicU64,
        id: AtomicU64,
    }

    #[repr(align(64))]
    struct Set([Slot; WAYS]);

    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY: Slot = Slot {
        key: AtomicU64::new(0),
        id: AtomicU64::new(0),
    };
    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY_SET: Set = Set([EMPTY; WAYS]);
    static TABLE: [Set; SLOTS / WAYS] = [EMPTY_SET; SLOTS / WAYS];

    /// The bits of a term value.
    #[inline(always)]
    pub fn bits(term: ErlNifTerm) -> u64 {
        // SAFETY: `ErlNifTerm` is `#[repr(transparent)]` over a `usize` (its field
        // is private), so the two have one layout.
        unsafe { std::mem::transmute::<ErlNifTerm, usize>(term) as u64 }
    }

    #[inline(always)]
    fn set(key: u64) -> &'static Set {
        const SET_BITS: u32 = (SLOTS / WAYS).trailing_zeros();
        &TABLE[(key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SET_BITS)) as usize]
    }

    /// The cached id of the atom whose term value is `term`, if stored.
    #[inline(always)]
    pub fn get(term: ErlNifTerm) -> Option<u64> {
        let key = bits(term);
        for slot in &set(key).0 {
            if slot.key.load(Ordering::Acquire) == key {
                let id = slot.id.load(Ordering::Relaxed);
                // The id was read before the key is read again: a writer that
                // changed the id had first set the key to BUSY (fence in `put`).
                fence(Ordering::Acquire);
                return (slot.key.load(Ordering::Relaxed) == key).then_some(id);
            }
        }
        None
    }

    /// Stores the id of the atom `term` (computed by the caller), evicting one of
    /// its set's atoms when the set is full.
    pub fn put(term: ErlNifTerm, id: u64) {
        let key = bits(term);
        if key == 0 || key == BUSY {
            return;
        }
        let slots = &set(key).0;
        let free = slots
            .iter()
            .position(|s| s.key.load(Ordering::Relaxed) == 0);
        let slot = &slots[free.unwrap_or(id as usize % WAYS)];
        let old = slot.key.load(Ordering::Relaxed);
        if old == key || old == BUSY {
            return;
        }
        // Losing the race to another writer just leaves this atom uncached.
        if slot
            .key
            .compare_exchange(old, BUSY, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            // BUSY is visible before the new id (see `get`).
            fence(Ordering::Release);
            slot.id.store(id, Ordering::Relaxed);
            slot.key.store(key, Ordering::Release);
        }
    }
}

/// One term walk: containers build their encodings on one shared [`IdStack`], so a
/// level of nesting costs the machine stack only a small frame (the walk recurses,
/// at most [`MAX_DEPTH`] levels), and small terms allocate nothing.
struct Walk<'b> {
    budget: &'b mut Budget,
    ids: IdStack,
}

#[inline]
fn hash_cost(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_UNIT)
}

/// Reading an atom's name of `chars` Latin-1 characters (the VM converts its
/// UTF-8 name a character at a time: ~40 ns + 0.4 ns a character measured on cache
/// misses) and hashing it (UTF-8 takes at most two bytes a Latin-1 character).
#[inline]
fn atom_read_cost(chars: usize) -> u64 {
    COST_ATOM_READ + (chars as u64).div_ceil(2) + hash_cost(1 + 2 * chars)
}

/// Copying an unaligned binary to an aligned buffer, bit-shifting every byte
/// (measured ~0.4 ns a byte warm, 1.2 on a loaded machine).
#[inline]
fn copy_cost(bytes: usize) -> u64 {
    bytes as u64
}

#[inline]
fn etf_cost(bytes: usize) -> u64 {
    COST_PER_ETF_CALL + (bytes as u64).div_ceil(ETF_BYTES_PER_UNIT)
}

/// Buffer and hash of `ids` child ids.
#[inline]
fn ids_cost(ids: usize) -> u64 {
    ids as u64 * COST_PER_ID + hash_cost(8 * ids + 1)
}

/// Sorting `n` map entries.
fn sort_cost(n: usize) -> u64 {
    let log = usize::BITS - n.saturating_sub(1).leading_zeros();
    n as u64 * log as u64 * COST_PER_SORT_STEP
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
            return bad_arg(format!(
                "term nested deeper than {MAX_DEPTH} levels cannot be hashed"
            ));
        }
        self.budget.charge(COST_PER_TERM)?;
        work::count(COST_PER_TERM);
        match fast_leaf(term.get_env(), term.as_c_arg(), self.budget) {
            Fast::Id(id) => Ok(id),
            Fast::Dirty => Err(Failure::NeedsDirty),
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
        self.budget.charge(ids_cost(elements.len()))?;
        work::count(ids_cost(elements.len()));
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
                    self.budget.charge(COST_PER_TERM + ids_cost(1))?;
                    work::count(COST_PER_TERM + ids_cost(1));
                    let id = self.id_at(head, depth + 1)?;
                    self.ids.push(id);
                    rest = tail;
                }
                Err(_) => {
                    self.budget.charge(ids_cost(1))?;
                    work::count(ids_cost(1));
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
        work::count(COST_PER_MAP);
        let mark = self.ids.open_map();
        self.ids.reserve_entries(n);
        let env = term.get_env();
        while let Some((k, v)) = iter.next_entry(env) {
            work::count(COST_PER_MAP_ENTRY + ids_cost(2) - hash_cost(1));
            let k = self.id_at(k, depth + 1)?;
            let v = self.id_at(v, depth + 1)?;
            self.ids.push_entry(k, v);
        }
        self.close_map(mark, n)
    }

    /// The rest of a top-level map that [`flat_map`] began (at depth 0): `done`
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
            work::count(COST_PER_MAP_ENTRY + ids_cost(2) - hash_cost(1));
            let k = self.id_at(k, 1)?;
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
        work::count(sort_cost(n) + hash_cost(1));
        Ok(self.ids.close_map(mark))
    }
}

/// The entries of a map, in the VM's order, straight from the NIF map iterator
/// (rustler's `MapIterator` is double-ended: two VM iterators and a key comparison
/// per step, and a larger stack frame at every level of nested maps).
///
/// The VM's iterator lives in a slot of the caller's frame (`MapEntries::new`),
/// written in place: moving it right after the VM wrote it would reload it with
/// stalled wide loads. The env is kept as its raw pointer: a rustler `Env` carries
/// a one-byte kind, and building the struct with it stored that byte and reloaded
/// it as a word (a store-forwarding hazard).
struct MapEntries<'a, 's> {
    env: *mut ErlNifEnv,
    iter: &'s mut ErlNifMapIterator,
    terms: PhantomData<Term<'a>>,
}

impl<'a, 's> MapEntries<'a, 's> {
    fn new(
        map: Term<'a>,
        iter: &'s mut MaybeUninit<ErlNifMapIterator>,
    ) -> Outcome<MapEntries<'a, 's>> {
        let env = map.get_env().as_c_arg();
        // SAFETY: `iter` is a valid out-pointer; the call fails (returns 0) unless
        // `map` is a map, and on success initialises the iterator.
        let ok = unsafe {
            enif_map_iterator_create(
                env,
                map.as_c_arg(),
                iter.as_mut_ptr(),
                ErlNifMapIteratorEntry::ERL_NIF_MAP_ITERATOR_HEAD,
            )
        };
        if ok == 0 {
            return Err(unreadable("map"));
        }
        Ok(MapEntries {
            env,
            // SAFETY: initialised by the successful call above.
            iter: unsafe { iter.assume_init_mut() },
            terms: PhantomData,
        })
    }

    /// The next entry as terms of `env`, the env of the map.
    fn next_entry(&mut self, env: Env<'a>) -> Option<(Term<'a>, Term<'a>)> {
        let (key, value) = self.next_raw()?;
        // SAFETY: terms of the map, valid in its env (`env`) for this call.
        unsafe { Some((Term::new(env, key), Term::new(env, value))) }
    }

    /// [`MapEntries::next_entry`] as raw terms of the map's env.
    #[inline]
    fn next_raw(&mut self) -> Option<(ErlNifTerm, ErlNifTerm)> {
        let entry = self.current()?;
        self.advance();
        Some(entry)
    }

    /// The entry under the iterator (raw terms of the map's env), `None` past the
    /// last one.
    #[inline]
    fn current(&mut self) -> Option<(ErlNifTerm, ErlNifTerm)> {
        let mut key: MaybeUninit<ErlNifTerm> = MaybeUninit::uninit();
        let mut value: MaybeUninit<ErlNifTerm> = MaybeUninit::uninit();
        // SAFETY: the iterator was created for a map of this env and not destroyed;
        // get_pair fails (returns 0) past the last entry, and otherwise writes both
        // terms, which are then valid in `env` for this call.
        unsafe {
            if enif_map_iterator_get_pair(self.env, self.iter, key.as_mut_ptr(), value.as_mut_ptr())
                == 0
            {
                return None;
            }
            Some((key.assume_init(), value.assume_init()))
        }
    }

    /// Moves the iterator to the next entry (past the last one: to the end).
    #[inline]
    fn advance(&mut self) {
        // SAFETY: the iterator was created for a map of this env and not destroyed;
        // stepping at or past the end is allowed (it returns 0 there).
        unsafe { enif_map_iterator_next(self.env, self.iter) };
    }
}

impl Drop for MapEntries<'_, '_> {
    fn drop(&mut self) {
        // SAFETY: created successfully in `new`, destroyed only here, once.
        unsafe { enif_map_iterator_destroy(self.env, self.iter) };
    }
}

/// The id of a term that is neither a binary nor a container, its visit charged.
fn leaf_id(term: Term, kind: TermType, budget: &mut Budget) -> Outcome<u64> {
    match kind {
        // Not a whole-byte binary (tried first): a bitstring.
        TermType::Binary => bitstring_id(term, budget),
        TermType::Integer => integer_id(term, budget),
        TermType::Float => {
            let value: f64 = term.decode().map_err(|_| unreadable("float"))?;
            Ok(term_hash::float(value))
        }
        TermType::Atom => atom_id(term, budget),
        TermType::Pid => opaque_id(tag::PID, term, budget),
        TermType::Port => opaque_id(tag::PORT, term, budget),
        TermType::Ref => opaque_id(tag::REFERENCE, term, budget),
        TermType::Fun => opaque_id(tag::FUN, term, budget),
        TermType::Tuple | TermType::List | TermType::Map => Err(unreadable("container as a leaf")),
        TermType::Unknown => bad_arg("term of an unknown type cannot be hashed"),
    }
}

fn unreadable(what: &str) -> Failure {
    Failure::BadArg(format!("could not read {what} term"))
}

fn integer_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    if let Ok(v) = term.decode::<i64>() {
        return Ok(term_hash::int64(v));
    }
    if let Ok(v) = term.decode::<u64>() {
        return Ok(term_hash::uint64(v));
    }
    big_integer_id(term, budget)
}

/// An integer outside `i64` and `u64`: the NIF API cannot read it, the ETF can.
/// (rustler's `decode::<i128>` is not used: it encodes the whole integer before
/// looking at its size, and wraps negative values below −2^127.)
#[inline(never)]
fn big_integer_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    let ext = if budget.is_limited() {
        let bytes = bounded_big_bytes(term, budget)?.ok_or(Failure::NeedsDirty)?;
        // SMALL_BIG_EXT of `bytes` digits: version, tag, length, sign, digits.
        budget.charge(etf_cost(4 + bytes))?;
        to_etf(term)?
    } else {
        // Dirty scheduler: the size is unknown until encoded; charged after.
        let ext = to_etf(term)?;
        budget.charge(etf_cost(ext.len()))?;
        ext
    };
    // 131, then SMALL_BIG_EXT (110, n:u8, sign:u8, digits) or LARGE_BIG_EXT
    // (111, n:u32 big-endian, sign:u8, digits); digits are the magnitude, little-endian.
    let (len, rest) = match ext.as_slice() {
        [131, 110, n, rest @ ..] => (*n as usize, rest),
        [131, 111, a, b, c, d, rest @ ..] => (u32::from_be_bytes([*a, *b, *c, *d]) as usize, rest),
        _ => return Err(unreadable("integer")),
    };
    match rest {
        [sign @ (0 | 1), digits @ ..] if digits.len() == len => {
            budget.charge(hash_cost(2 + len))?;
            work::count(hash_cost(2 + len));
            Ok(term_hash::integer(*sign == 1, digits))
        }
        _ => Err(unreadable("integer")),
    }
}

/// On a normal scheduler: the number of magnitude bytes that bounds `term` (a
/// bignum), or `None` when it is wider than [`MAX_NORMAL_BIG_BYTES`]. Compares it
/// with ±(2^(8·n) − 1), built from a fixed ETF; comparing two bignums of different
/// sizes looks at their sizes only, so each comparison costs at most the limit's size.
#[inline(never)]
fn bounded_big_bytes(term: Term, budget: &mut Budget) -> Outcome<Option<usize>> {
    let env = term.get_env();
    let negative = term < 0i64.encode(env);
    for bytes in [SMALL_BIG_BYTES, MAX_NORMAL_BIG_BYTES] {
        // Decoding the limit and one comparison with it.
        budget.charge(etf_cost(4 + bytes) + hash_cost(bytes))?;
        work::count(etf_cost(4 + bytes) + hash_cost(bytes));
        let limit = big_limit(env, bytes, negative)?;
        let inside = if negative {
            term >= limit
        } else {
            term <= limit
        };
        if inside {
            return Ok(Some(bytes));
        }
    }
    Ok(None)
}

/// The integer `2^(8·bytes) − 1`, negated when `negative` (`bytes` ≤ 255).
fn big_limit(env: Env, bytes: usize, negative: bool) -> Outcome<Term> {
    let mut etf = [0xFFu8; 4 + MAX_NORMAL_BIG_BYTES];
    etf[..4].copy_from_slice(&[131, 110, bytes as u8, negative as u8]);
    env.binary_to_term(&etf[..4 + bytes])
        .map(|(term, _)| term)
        .ok_or_else(|| unreadable("integer"))
}

#[inline(never)]
fn atom_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    // The name's length first (O(1) in the VM), so its read, conversion and hash
    // are charged before they run.
    let mut chars: c_uint = 0;
    // SAFETY: `chars` is a valid out-pointer; the call returns 0 unless `term` is an
    // atom whose name fits Latin-1, and then stores its length.
    let latin1 = unsafe {
        enif_get_atom_length(
            term.get_env().as_c_arg(),
            term.as_c_arg(),
            &mut chars,
            ErlNifCharEncoding::ERL_NIF_LATIN1,
        )
    } != 0;
    if latin1 {
        budget.charge(atom_read_cost(chars as usize))?;
    }
    // Names that fit Latin-1 (nearly all): read straight into a stack buffer, at
    // most 255 characters and a NUL (left uninitialised: the VM writes it).
    let mut buf: MaybeUninit<[u8; MAX_ATOM_CHARS + 1]> = MaybeUninit::uninit();
    // SAFETY: `buf` is writable for the `len` bytes passed; the VM writes at most
    // that many (the name and a NUL) and returns 0 when the term is not an atom,
    // its name does not fit Latin-1, or the buffer is too small.
    let written = unsafe {
        enif_get_atom(
            term.get_env().as_c_arg(),
            term.as_c_arg(),
            buf.as_mut_ptr() as *mut c_char,
            (MAX_ATOM_CHARS + 1) as c_uint,
            ErlNifCharEncoding::ERL_NIF_LATIN1,
        )
    };
    if latin1 && written > 0 && written as usize <= MAX_ATOM_CHARS + 1 {
        // SAFETY: the VM wrote `written` bytes (the name, then a NUL) from the start.
        let name =
            unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, written as usize - 1) };
        // Charged from the length above (the same atom: names never change).
        work::count(atom_read_cost(name.len()));
        return Ok(term_hash::atom_latin1(name));
    }
    // A name outside Latin-1: NIF 2.16 cannot read it, but the ETF carries it in
    // UTF-8 (ATOM_UTF8_EXT / SMALL_ATOM_UTF8_EXT), at most 255 characters.
    budget.charge(etf_cost(MAX_ATOM_ETF))?;
    let ext = to_etf(term)?;
    let (utf8, name) = match ext.as_slice() {
        [131, 119, len, name @ ..] if name.len() == *len as usize => (true, name),
        [131, 115, len, name @ ..] if name.len() == *len as usize => (false, name),
        [131, 118 | 100, hi, lo, name @ ..]
            if name.len() == u16::from_be_bytes([*hi, *lo]) as usize =>
        {
            (ext.as_slice()[1] == 118, name)
        }
        _ => return Err(unreadable("atom")),
    };
    budget.charge(hash_cost(1 + 2 * name.len()))?;
    work::count(hash_cost(1 + 2 * name.len()));
    Ok(if utf8 {
        term_hash::atom(name)
    } else {
        term_hash::atom_latin1(name)
    })
}

#[inline(never)]
fn bitstring_id(term: Term, budget: &mut Budget) -> Outcome<u64> {
    if budget.is_limited() {
        // Its size cannot be read without encoding it.
        return Err(Failure::NeedsDirty);
    }
    let ext = to_etf(term)?;
    budget.charge(etf_cost(ext.len()) + hash_cost(ext.len()))?;
    // 131, BIT_BINARY_EXT (77, len:u32 big-endian, bits-in-last-byte:u8, data).
    match ext.as_slice() {
        [131, 77, a, b, c, d, last_bits @ 1..=8, data @ ..]
            if data.len() == u32::from_be_bytes([*a, *b, *c, *d]) as usize && !data.is_empty() =>
        {
            let bits = (data.len() as u64 - 1) * 8 + *last_bits as u64;
            // term_hash::bitstring zeroes the unused low bits of the last byte.
            Ok(term_hash::bitstring(data, bits))
        }
        _ => Err(unreadable("bitstring")),
    }
}

/// Pids, ports, references and funs name things inside one running cluster; their
/// ids hash the ETF and are stable only within that cluster. A pid, port or
/// reference has a small bounded ETF; a fun carries its environment, of any size.
#[inline(never)]
fn opaque_id(tag: u8, term: Term, budget: &mut Budget) -> Outcome<u64> {
    let ext = if tag == tag::FUN {
        if budget.is_limited() {
            return Err(Failure::NeedsDirty);
        }
        let ext = to_etf(term)?;
        budget.charge(etf_cost(ext.len()))?;
        ext
    } else {
        budget.charge(etf_cost(MAX_OPAQUE_ETF))?;
        let ext = to_etf(term)?;
        // Never expected; keeps the charge an upper bound whatever the VM writes.
        budget.charge(etf_cost(ext.len()).saturating_sub(etf_cost(MAX_OPAQUE_ETF)))?;
        ext
    };
    budget.charge(hash_cost(ext.len() + 1))?;
    work::count(hash_cost(ext.len() + 1));
    Ok(term_hash::opaque(tag, ext.as_slice()))
}

/// `term_to_binary(term)`: the documented, stable external term format. Charged by
/// the caller.
fn to_etf(term: Term) -> Outcome<OwnedBinary> {
    let mut bin: MaybeUninit<ErlNifBinary> = MaybeUninit::uninit();
    // SAFETY: `bin` is a valid out-pointer; on success the VM initialises it with a
    // newly allocated binary that we own (released when the `OwnedBinary` drops).
    let ok = unsafe {
        enif_term_to_binary(term.get_env().as_c_arg(), term.as_c_arg(), bin.as_mut_ptr())
    };
    if ok == 0 {
        return Err(Failure::BadArg(
            "could not encode term (out of memory?)".to_string(),
        ));
    }
    // SAFETY: initialised by the successful call above, and owned by nobody else.
    let bin = unsafe { OwnedBinary::from_raw(bin.assume_init()) };
    work::count(etf_cost(bin.as_slice().len()));
    Ok(bin)
}
