//! The entries of a map, in the VM's order, straight from the NIF map iterator
//! (rustler's `MapIterator` is double-ended: two VM iterators and a key comparison
//! per step, and a larger stack frame at every level of nested maps).
//!
//! The VM's iterator lives in a slot of the caller's frame (`MapEntries::new`),
//! written in place: moving it right after the VM wrote it would reload it with
//! stalled wide loads. The env is kept as its raw pointer: a rustler `Env` carries
//! a one-byte kind, and building the struct with it stored that byte and reloaded
//! it as a word (a store-forwarding hazard).

use super::refusals::unreadable;
use crate::budget::Outcome;
use rustler::sys::{
    enif_map_iterator_create, enif_map_iterator_destroy, enif_map_iterator_get_pair,
    enif_map_iterator_next, ErlNifEnv, ErlNifMapIterator, ErlNifMapIteratorEntry, ErlNifTerm,
};
use rustler::{Env, Term};
use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// A map's entries (see the module documentation).
pub(super) struct MapEntries<'a, 's> {
    env: *mut ErlNifEnv,
    iter: &'s mut ErlNifMapIterator,
    terms: PhantomData<Term<'a>>,
}

impl<'a, 's> MapEntries<'a, 's> {
    pub(super) fn new(
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
    pub(super) fn next_entry(&mut self, env: Env<'a>) -> Option<(Term<'a>, Term<'a>)> {
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
    pub(super) fn current(&mut self) -> Option<(ErlNifTerm, ErlNifTerm)> {
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
    pub(super) fn advance(&mut self) {
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
