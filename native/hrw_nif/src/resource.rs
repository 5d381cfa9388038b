//! NIF resources opened by hand, for the lookup hot path.
//!
//! rustler's `ResourceArc` finds the resource type in a `TypeId`-keyed hash map and
//! bumps a reference count on every decode and drop, a large share of a ring or
//! skeleton lookup. Here each type is opened once at load into a static, values
//! are boxed into the resource, and a lookup borrows the value for the duration of
//! the NIF call, which the argument term keeps alive.

use rustler::sys::{
    enif_alloc_resource, enif_get_resource, enif_make_resource, enif_open_resource_type,
    enif_release_resource, ErlNifEnv, ErlNifResourceFlags, ErlNifResourceType,
};
use rustler::{Env, Term};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// A Rust value that can live in a resource of its own type.
pub trait Resource: Send + Sync + Sized + 'static {
    /// NUL-terminated resource type name.
    const NAME: &'static [u8];
    /// Where `open` stores the type.
    fn slot() -> &'static AtomicPtr<ErlNifResourceType>;
}

/// The body of [`Resource::slot`]: a static of the implementing type's own (a
/// static in a generic function would be one for all types).
macro_rules! resource_slot {
    () => {{
        static SLOT: AtomicPtr<ErlNifResourceType> = AtomicPtr::new(std::ptr::null_mut());
        &SLOT
    }};
}
pub(crate) use resource_slot;

/// Frees the boxed value when the VM frees the resource.
unsafe extern "C" fn destroy<T: Resource>(_env: *mut ErlNifEnv, obj: *mut c_void) {
    // SAFETY: every resource of this type was created by `make::<T>`, which stored a
    // pointer from `Box::into_raw` at `obj`; the VM calls this destructor once, after
    // the last reference is gone, so the box is reclaimed exactly once.
    let boxed = unsafe { ptr::read(obj as *mut *mut T) };
    drop(unsafe { Box::from_raw(boxed) });
}

/// Opens the resource type of `T`, or takes it over from an earlier instance of
/// the module (a reload: see init.rs); call from the load or upgrade callback.
pub fn open<T: Resource>(env: Env) -> bool {
    debug_assert_eq!(T::NAME.last(), Some(&0));
    // The VM would accept CREATE | TAKEOVER in one call, but rustler's flags are an
    // enum without that value: take over a type that exists (after a reload, or a
    // purge while resources of the type are alive), else create it.
    let typ = open_with::<T>(env, ErlNifResourceFlags::ERL_NIF_RT_TAKEOVER);
    let typ = if typ.is_null() {
        open_with::<T>(env, ErlNifResourceFlags::ERL_NIF_RT_CREATE)
    } else {
        typ
    };
    T::slot().store(typ, Ordering::Release);
    !typ.is_null()
}

fn open_with<T: Resource>(env: Env, flags: ErlNifResourceFlags) -> *mut ErlNifResourceType {
    // Written by the VM and never read here (kept uninitialised, as rustler does).
    let mut tried = std::mem::MaybeUninit::<ErlNifResourceFlags>::uninit();
    // SAFETY: called from the NIF load or upgrade callback with its env; the name is
    // a static NUL-terminated string and the destructor matches the layout `make`
    // writes (the same in every instance of the module: one library serves them).
    unsafe {
        enif_open_resource_type(
            env.as_c_arg(),
            ptr::null(),
            T::NAME.as_ptr() as *const _,
            Some(destroy::<T>),
            flags,
            tried.as_mut_ptr(),
        ) as *mut _
    }
}

/// Moves `value` into a new resource and returns its term.
pub fn make<T: Resource>(env: Env, value: T) -> Term {
    let typ = T::slot().load(Ordering::Acquire);
    assert!(!typ.is_null(), "resource type not opened at load");
    // SAFETY: `typ` was opened by `open::<T>` at load. The allocation is sized for
    // one pointer, which is written before the term is made; `enif_release_resource`
    // hands our reference to the term, so the resource lives as long as terms (or
    // other resources) refer to it, and `destroy::<T>` frees the box.
    unsafe {
        let obj = enif_alloc_resource(typ, std::mem::size_of::<*mut T>());
        ptr::write(obj as *mut *mut T, Box::into_raw(Box::new(value)));
        let term = enif_make_resource(env.as_c_arg(), obj);
        enif_release_resource(obj);
        Term::new(env, term)
    }
}

/// Borrows the value in `term`, or `None` if it is not a live resource of `T`'s type
/// in this VM (a plain reference on another node, or any other term).
pub fn get<'a, T: Resource>(term: Term<'a>) -> Option<&'a T> {
    let typ = T::slot().load(Ordering::Acquire);
    if typ.is_null() {
        return None;
    }
    let mut obj: *const c_void = ptr::null();
    // SAFETY: `enif_get_resource` checks that `term` is a resource of type `typ` and
    // only then writes its object pointer. Such an object holds the box pointer
    // written by `make::<T>`. The term is an argument of the running NIF call, so it
    // (and through it the resource) stays alive for `'a`, the lifetime of the env;
    // the value is never mutated after `make`, so shared borrows are sound.
    unsafe {
        if enif_get_resource(term.get_env().as_c_arg(), term.as_c_arg(), typ, &mut obj) == 0 {
            return None;
        }
        Some(&**(obj as *const *const T))
    }
}
