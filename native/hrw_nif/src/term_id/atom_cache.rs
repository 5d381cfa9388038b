//! A lock-free table from an atom's term value to its id, shared by every
//! scheduler of the VM. This keys atoms by the VM's term word, which the NIF API
//! leaves opaque: sound because atoms are interned and never collected on the
//! ERTS versions it is switched on for (`atom_cache_for` in mod.rs): while the VM runs,
//! one term value names one atom, and an id is a function of the atom, so any id
//! stored under a value is that atom's id. On any other ERTS it stays off (the
//! fallback: every atom's id from its name, the same ids); docs/MAINTAINING.md
//! lists it.
//!
//! 4-way set associative (a set is one 64-byte line), and it keeps caching when
//! full: a new atom takes a free slot of its set, else evicts one chosen by its
//! id's low bits (pseudo-random replacement; no recency bits to update on hits,
//! which stay a single line read). A slot is rewritten seqlock-style: its key goes
//! to `BUSY` before the id changes, and a reader re-checks the key after reading
//! the id, so it never pairs a key with another atom's id.

use rustler::sys::ErlNifTerm;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

/// Whether the cache is used (set by the load callback, init.rs).
static ON: AtomicBool = AtomicBool::new(false);

pub fn switch(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

#[inline(always)]
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

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
    if !ON.load(Ordering::Relaxed) {
        return None;
    }
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
    if !ON.load(Ordering::Relaxed) {
        return;
    }
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
