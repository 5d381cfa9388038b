//! Walking lists of terms: the one walk over a list's cells, for node lists
//! ([`for_each_raw_node`]) and key lists ([`walk_keys`]).
//!
//! The cells are read with `enif_get_list_cell` directly: rustler's iterator panics
//! on improper lists, and its cells come back as `Term`s through memory.

use crate::budget::{needs_dirty, Budget, Outcome};
use crate::errors::bad_arg;
use crate::term_id::{term_id_in, Order};
use hrw_core::cost::{self, MAX_NORMAL_KEYS};
use hrw_core::work;
use rustler::sys::{enif_get_list_cell, enif_is_empty_list, ErlNifTerm};
use rustler::Term;
use std::mem::MaybeUninit;

/// Calls `visit(head)` for every cell of `list` as a raw term of its env, in
/// order, stopping at the first error; then whether the list was proper (its
/// last tail `[]`).
pub fn for_each_raw_cell(
    list: Term,
    mut visit: impl FnMut(ErlNifTerm) -> Outcome<()>,
) -> Outcome<bool> {
    let env = list.get_env().as_c_arg();
    let mut rest = list.as_c_arg();
    loop {
        let mut head = MaybeUninit::uninit();
        let mut tail = MaybeUninit::uninit();
        // SAFETY: valid out-pointers; the call returns 0 unless `rest` is a cons cell,
        // and then writes its head and tail, terms of this call's env.
        if unsafe { enif_get_list_cell(env, rest, head.as_mut_ptr(), tail.as_mut_ptr()) } == 0 {
            break;
        }
        // SAFETY: written by the successful call.
        let (head, tail) = unsafe { (head.assume_init(), tail.assume_init()) };
        visit(head)?;
        rest = tail;
    }
    // SAFETY: a term of this call's env.
    Ok(unsafe { enif_is_empty_list(env, rest) } != 0)
}

/// Calls `visit(node, budget)` with the raw term of every element of the non-empty
/// proper list `nodes`, in order, charging `per_node` before each (the caller's
/// cost of a node beyond its term id, which `visit` charges). One pass: an
/// improper tail is reported after the walk.
pub fn for_each_raw_node(
    nodes: Term,
    per_node: u64,
    budget: &mut Budget,
    mut visit: impl FnMut(ErlNifTerm, &mut Budget) -> Outcome<()>,
) -> Outcome<()> {
    if nodes.is_empty_list() {
        return bad_arg("nodes must be a non-empty list");
    }
    if !nodes.is_list() {
        return bad_arg("nodes must be a list");
    }
    let proper = for_each_raw_cell(nodes, |head| {
        budget.charge(per_node)?;
        work::count(cost::ELEMENT);
        visit(head, budget)
    })?;
    if proper {
        Ok(())
    } else {
        bad_arg("nodes must be a proper list, got an improper list")
    }
}

/// A key list, walked: every key's id and, when kept, its raw term, in order.
pub struct Keys {
    pub ids: Vec<u64>,
    /// The key terms (raw, of the call's env); empty unless asked for.
    pub terms: Vec<ErlNifTerm>,
    /// The units the keys' term walks charged (0 on a dirty scheduler).
    pub walk_units: u64,
}

/// The keys' ids and, when `keep_terms`, the key terms, charging `per_key` for
/// each key before its id (a normal call stops as soon as it is over budget,
/// without first measuring the whole list, except that a list of more than
/// [`MAX_NORMAL_KEYS`] keys asks for a dirty scheduler first).
pub fn walk_keys(keys: Term, per_key: u64, keep_terms: bool, budget: &mut Budget) -> Outcome<Keys> {
    // A dirty call sizes its buffers once (no reallocation of large vectors); a
    // normal one may stop early, so it grows them as it goes.
    let expected = if budget.is_limited() {
        if longer_than(keys, MAX_NORMAL_KEYS, budget)? {
            return needs_dirty();
        }
        0
    } else {
        keys.list_length().unwrap_or(0)
    };
    let mut terms = Vec::with_capacity(if keep_terms { expected } else { 0 });
    let mut ids = Vec::with_capacity(expected);
    let env = keys.get_env();
    let mut order = Order::default();
    let before = budget.remaining();
    let proper = for_each_raw_cell(keys, |key| {
        budget.charge(per_key)?;
        work::count(3 * cost::ELEMENT);
        ids.push(term_id_in(env, key, budget, &mut order)?);
        if keep_terms {
            terms.push(key);
        }
        Ok(())
    })?;
    if !proper {
        return bad_arg("keys must be a proper list");
    }
    let charged = before.saturating_sub(budget.remaining());
    let walk_units = charged.saturating_sub(per_key.saturating_mul(ids.len() as u64));
    Ok(Keys {
        ids,
        terms,
        walk_units,
    })
}

/// Cells counted per charge by [`longer_than`].
const LENGTH_CHUNK: usize = 64;

/// Whether `list` has more than `limit` cells, counting at most `limit + 1`
/// of them, in chunks charged before they are walked.
pub fn longer_than(list: Term, limit: usize, budget: &mut Budget) -> Outcome<bool> {
    let env = list.get_env().as_c_arg();
    let mut rest = list.as_c_arg();
    let mut cells = 0usize;
    while cells <= limit {
        budget.pay(cost::cells(LENGTH_CHUNK))?;
        for _ in 0..LENGTH_CHUNK {
            let mut head = MaybeUninit::uninit();
            let mut tail = MaybeUninit::uninit();
            // SAFETY: valid out-pointers; the call returns 0 unless `rest` is a cons
            // cell, and then writes its head and tail, terms of this call's env.
            if unsafe { enif_get_list_cell(env, rest, head.as_mut_ptr(), tail.as_mut_ptr()) } == 0 {
                return Ok(cells > limit);
            }
            cells += 1;
            // SAFETY: written by the successful call.
            rest = unsafe { tail.assume_init() };
        }
    }
    Ok(true)
}
