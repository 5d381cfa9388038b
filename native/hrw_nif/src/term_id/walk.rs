//! The general term walk, for every term the fast paths ([`super::fast`],
//! [`super::leaf`]) do not take: nested containers, lists, and the leaves of
//! [`super::etf`].

use super::etf::leaf_id;
use super::leaf::{fast_leaf, Fast};
use super::map_entries::MapEntries;
use super::refusals::{too_deep, unreadable};
use crate::budget::{needs_dirty, Budget, Outcome};
use crate::tuple_view::TupleView;
use hrw_core::term_hash::{tag, IdStack, Mark};
use hrw_core::{cost, work};
use rustler::sys::ErlNifTerm;
use rustler::{Env, Term, TermType};
use std::mem::MaybeUninit;

/// Deeper nesting is refused: it keeps recursion far inside a scheduler's stack.
/// The term itself is at depth 0, the elements of a container at depth `d` are at
/// `d + 1`; a term at a depth above this is refused.
pub const MAX_DEPTH: usize = 256;

/// The elements of a tuple term, in place (raw: the fast paths read them as such).
pub(super) fn tuple_elements<'a>(term: Term<'a>) -> Outcome<&'a [ErlNifTerm]> {
    TupleView::of(term)
        .map(|t| t.raw())
        .ok_or_else(|| unreadable("tuple"))
}

/// Charges what a map of `n` entries costs besides its keys' and values' visits,
/// before it is read: the iteration, the entries' room and the encoding's hash,
/// and the sort.
pub(super) fn charge_map(n: usize, budget: &mut Budget) -> Outcome<()> {
    budget.charge(cost::map_iteration(n))?;
    budget.charge(cost::ids(2 * n))?;
    budget.charge(cost::sort(n))
}

/// One term walk: containers build their encodings on one shared [`IdStack`], so a
/// level of nesting costs the machine stack only a small frame (the walk recurses,
/// at most [`MAX_DEPTH`] levels), and small terms allocate nothing.
pub(super) struct Walk<'b> {
    budget: &'b mut Budget,
    pub(super) ids: IdStack,
}

impl<'b> Walk<'b> {
    pub(super) fn new(budget: &'b mut Budget) -> Walk<'b> {
        Walk {
            budget,
            ids: IdStack::new(),
        }
    }

    pub(super) fn id_at(&mut self, term: Term, depth: usize) -> Outcome<u64> {
        if depth > MAX_DEPTH {
            return Err(too_deep(MAX_DEPTH));
        }
        self.budget.charge(cost::TERM)?;
        work::count(cost::TERM);
        match fast_leaf(term.get_env(), term.as_c_arg(), self.budget) {
            Fast::Id(id) => Ok(id),
            Fast::Dirty => needs_dirty(),
            Fast::Other => self.non_binary_id(term, depth),
        }
    }

    /// [`Walk::id_at`] for a term that is not a [`fast_leaf`], its visit charged.
    pub(super) fn non_binary_id(&mut self, term: Term, depth: usize) -> Outcome<u64> {
        match term.get_type() {
            kind @ (TermType::Tuple | TermType::List | TermType::Map) => {
                self.container_id(term, kind, depth)
            }
            kind => leaf_id(term, kind, self.budget),
        }
    }

    pub(super) fn container_id(
        &mut self,
        term: Term,
        kind: TermType,
        depth: usize,
    ) -> Outcome<u64> {
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
        self.budget.charge(cost::ids(elements.len()))?;
        work::count(cost::ids(elements.len()));
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
                    self.budget.charge(cost::TERM + cost::ids(1))?;
                    work::count(cost::TERM + cost::ids(1));
                    let id = self.id_at(head, depth + 1)?;
                    self.ids.push(id);
                    rest = tail;
                }
                Err(_) => {
                    self.budget.charge(cost::ids(1))?;
                    work::count(cost::ids(1));
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
            let k = self.id_at(k, depth + 1)?;
            let v = self.id_at(v, depth + 1)?;
            self.ids.push_entry(k, v);
        }
        self.close_map(mark, n)
    }

    /// The rest of a top-level map that `fast::flat_map` began (at depth 0): `done`
    /// entries and then `current` read, `iter` just past `current`.
    pub(super) fn map_rest<'a>(
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
        work::count(cost::sort(n) + cost::hash(1));
        Ok(self.ids.close_map(mark))
    }
}
