//! The leaves the walks take without asking the VM for a term's type: small
//! integers, atoms (from [`atom_cache`]) and whole-byte binaries, with the hints
//! from the term layout that order those questions.

use super::atom_cache;
use super::etf::atom_id;
use crate::budget::{needs_dirty, Budget, Outcome};
use hrw_core::term_hash;
use hrw_core::{cost, work};
use rustler::sys::{enif_get_int64, enif_inspect_binary, enif_is_atom, ErlNifBinary, ErlNifTerm};
use rustler::{Env, Term};
use std::mem::MaybeUninit;

/// What [`fast_leaf`] found: small enough to come back in registers (an
/// `Outcome<Option<u64>>` goes through memory, and its byte-wide tag then stalls
/// the wider load that reads it back).
#[derive(Clone, Copy)]
pub(super) enum Fast {
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
    pub(super) fn or_else(self, other: impl FnOnce() -> Outcome<u64>) -> Outcome<u64> {
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
pub(super) fn fast_leaf(term_env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
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
        if budget.charge(cost::ATOM_CACHE).is_err() {
            return Fast::Dirty;
        }
        work::count(cost::ATOM_CACHE);
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
pub(super) fn binary_leaf(term_env: Env, raw: ErlNifTerm, budget: &mut Budget) -> Fast {
    let env = term_env.as_c_arg();
    // Inspecting a binary that starts off a byte boundary copies it: charged first.
    let unaligned = crate::bits::unaligned_size(raw);
    if let Some(size) = unaligned {
        if budget.charge(cost::copy(size)).is_err() {
            return Fast::Dirty;
        }
        work::count(cost::copy(size));
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
        if budget.charge(cost::hash(bin.size)).is_err() {
            return Fast::Dirty;
        }
        budget.note_binary(bin.size);
        work::count(cost::hash(bin.size));
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
            if budget.charge(cost::ATOM_CACHE).is_err() {
                return Fast::Dirty;
            }
            work::count(cost::ATOM_CACHE);
            atom_cache::put(term.as_c_arg(), id);
            Fast::Id(id)
        }
        Err(failure) if failure.needs_dirty() => Fast::Dirty,
        Err(_) => Fast::Other,
    }
}

/// Where the VM's term layout hints at a small integer (low 4 bits `1111`) or an
/// atom (low 6 bits `001011`). Only an ordering hint: every value is still read
/// through the NIF API, so a different layout only makes the fast path slower.
#[inline(always)]
pub(super) fn hint(term: ErlNifTerm) -> (bool, bool) {
    let raw = atom_cache::bits(term);
    (raw & 0xF == 0xF, raw & 0x3F == 0x0B)
}

/// Where the term layout hints at a boxed term (low 2 bits `10`: a tuple, binary,
/// map, bignum, float, ...). A hint as [`hint`] is.
#[inline(always)]
pub(super) fn boxed(term: ErlNifTerm) -> bool {
    atom_cache::bits(term) & 0x3 == 0x2
}
