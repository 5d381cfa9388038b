//! Tuples read in place: a view of a tuple's elements without copying them.
//!
//! rustler's `get_tuple` copies every element into a `Vec` before the caller can
//! look at the arity: for a struct's million-node tuple that is O(n) work (and an
//! allocation) done before any budget is charged. A view costs O(1); elements are
//! read when, and only when, they are used.

use rustler::sys::{c_int, enif_get_tuple, ErlNifTerm};
use rustler::{Env, Term};

#[derive(Clone, Copy)]
pub struct TupleView<'a> {
    env: Env<'a>,
    elements: &'a [ErlNifTerm],
}

impl<'a> TupleView<'a> {
    /// The view of `term` if it is a tuple.
    pub fn of(term: Term<'a>) -> Option<TupleView<'a>> {
        let env = term.get_env();
        let mut arity: c_int = 0;
        let mut array: *const ErlNifTerm = std::ptr::null();
        // SAFETY: `enif_get_tuple` checks that `term` is a tuple and only then writes
        // its arity and a pointer to its elements, which live as long as the tuple.
        // `term` belongs to `env` (an argument or a term made in this call), so the
        // tuple, and the slice, stay valid for `'a`; tuples are immutable, so the
        // slice is never written while we hold it.
        unsafe {
            if enif_get_tuple(env.as_c_arg(), term.as_c_arg(), &mut arity, &mut array) == 0 {
                return None;
            }
            let elements = if arity == 0 || array.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(array, arity as usize)
            };
            Some(TupleView { env, elements })
        }
    }

    /// The env the elements belong to.
    pub fn env(&self) -> Env<'a> {
        self.env
    }

    /// The elements as raw terms of the tuple's env, valid for `'a`.
    pub fn raw(&self) -> &'a [ErlNifTerm] {
        self.elements
    }

    pub fn len(&self) -> usize {
        self.elements.len()
    }

    /// Element `i`, or `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Term<'a>> {
        // SAFETY: the raw term comes from a live tuple of `env` (see `of`).
        self.elements
            .get(i)
            .map(|&raw| unsafe { Term::new(self.env, raw) })
    }
}
