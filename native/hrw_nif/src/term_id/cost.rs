//! The term walk's cost model: what each step is charged, in the units of
//! `hrw_core::work`, before it runs (test/hrw/budget_test.exs checks every charge
//! against the work counted where it is done).

use crate::budget::Budget;
use crate::errors::{Failure, Outcome};
use hrw_core::work;

/// Holding one child id of a tuple, list or map in its encoding (the 8 bytes of
/// every id are also charged as hashed bytes).
pub(super) const COST_PER_ID: u64 = 4;
/// Setting up and releasing the VM's iterator over one map.
pub(super) const COST_PER_MAP: u64 = 64;
/// One step of the VM's map iterator (fetching an entry, advancing), besides the
/// visits of the entry's key and value. Large maps are HAMTs: iterating them is
/// several times slower than a list walk.
pub(super) const COST_PER_MAP_ENTRY: u64 = 24;
/// One call into the VM's external term format: allocating the result binary, or
/// decoding a limit term (the largest of the fixed costs here: a pid, a reference
/// or a 2040-bit bignum each make one such call).
pub(super) const COST_PER_ETF_CALL: u64 = 240;
/// ETF bytes written or read per unit (digits and names are copied as they are).
pub(super) const ETF_BYTES_PER_UNIT: u64 = 2;
/// One lookup (or first store) in the per-VM atom-id cache: a hash of the atom's
/// term value and one or two probes of a static table.
pub(super) const COST_ATOM_CACHE: u64 = 4;
/// Reading an atom's name on a cache miss, besides its characters.
pub(super) const COST_ATOM_READ: u64 = 48;

/// Hashing `bytes` bytes.
#[inline]
pub(super) fn hash_cost(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(work::BYTES_PER_UNIT)
}

/// Reading an atom's name of `chars` Latin-1 characters (the VM converts its
/// UTF-8 name a character at a time) and hashing it (UTF-8 takes at most two
/// bytes a Latin-1 character).
#[inline]
pub(super) fn atom_read_cost(chars: usize) -> u64 {
    COST_ATOM_READ + (chars as u64).div_ceil(2) + hash_cost(1 + 2 * chars)
}

/// Copying an unaligned binary to an aligned buffer, bit-shifting every byte.
#[inline]
pub(super) fn copy_cost(bytes: usize) -> u64 {
    bytes as u64
}

/// One ETF call that writes or reads `bytes` bytes.
#[inline]
pub(super) fn etf_cost(bytes: usize) -> u64 {
    COST_PER_ETF_CALL + (bytes as u64).div_ceil(ETF_BYTES_PER_UNIT)
}

/// Buffer and hash of `ids` child ids.
#[inline]
pub(super) fn ids_cost(ids: usize) -> u64 {
    ids as u64 * COST_PER_ID + hash_cost(8 * ids + 1)
}

/// What a map of `n` entries costs besides its keys' and values' visits, charged
/// before it is read: the iteration, the entries' room and the encoding's hash,
/// and the sort.
pub(super) fn charge_map(n: usize, budget: &mut Budget) -> Outcome<()> {
    budget.charge(COST_PER_MAP + n as u64 * COST_PER_MAP_ENTRY)?;
    budget.charge(ids_cost(2 * n))?;
    budget.charge(work::sort(n))
}

/// The error for a term the VM would not let us read as what it is.
pub(super) fn unreadable(what: &str) -> Failure {
    Failure::BadArg(format!("could not read {what} term"))
}
