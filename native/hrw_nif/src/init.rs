//! The NIF library's entry: what the VM calls when `HRW.Native` loads it.
//!
//! Written here instead of with `rustler::init!`, which registers a `load`
//! callback only. Without an `upgrade` callback, every reload of `HRW.Native`
//! (`:code.load_file/1`, `r/1` or `recompile` in IEx, a release's hot upgrade)
//! fails its `on_load` with "Upgrade not supported by this NIF library". On OTP
//! 25–29 a failed `on_load` of a module whose code is identical to the loaded one
//! leaves the loaded module's funs pointing at the discarded code: calls through
//! them raise `BadFunctionError`, or jump into freed memory and crash the VM
//! (test/hrw/reload_test.exs holds the reloads that must work).
//!
//! So both callbacks succeed whenever the resource types can be opened:
//! - `load` (first load, or a load after the module was deleted and purged) and
//!   `upgrade` (a new instance of `HRW.Native` while the old one is still loaded)
//!   open each type with `CREATE | TAKEOVER`: the new instance owns the types, and
//!   resources made before the reload stay valid, since the same library serves
//!   both instances (the VM loads one copy of a path) and the value layout is the
//!   same.
//! - The library is linked `-z nodelete` on Linux (build.rs): it is never unmapped,
//!   so no thread of our rayon pool, parked inside its code, outlives its code.
//!
//! rustler's own resource types (`ResourceArc`) are not used either: rustler
//! opens them with `ERL_NIF_RT_CREATE` only, which creates a type that does not
//! exist yet and cannot take over the types of the instance being replaced
//! (resource.rs opens ours with both flags), and it finds the type and bumps a
//! reference count on every decode.
//!
//! The entry is erl_nif.h's `ErlNifEntry` ([`Entry`]), filled as `ERL_NIF_INIT`
//! and rustler's `init!` fill it, plus the upgrade callback; the function table is
//! ours (`NIFS`). Before any `rustler::sys` call can reach the VM, rustler's table
//! of the VM's functions is filled with `rustler::sys::internal_write_symbols`
//! (`internal_set_symbols` on Windows, from the table the VM passes), exactly as
//! the code `init!` generates does; on Linux rustler links the functions directly
//! and the call changes nothing.

use crate::resource;
use crate::ring::RingResource;
use crate::skeleton::SkeletonResource;
use rustler::sys::{
    c_char, c_int, c_uint, c_void, ErlNifEnv, ErlNifFunc, ErlNifResourceTypeInit, ErlNifTerm,
};
use std::sync::OnceLock;

/// The module that loads this library.
const MODULE: &std::ffi::CStr = c"Elixir.HRW.Native";

/// Opens (or takes over) every resource type; true when all are usable.
fn open_types(env: *mut ErlNifEnv) -> bool {
    let marker = ();
    // SAFETY: `env` is the env of the load or upgrade callback that calls us, valid
    // for this call, which `marker` stands for.
    let env = unsafe { rustler::Env::new_init_env(&marker, env) };
    resource::open::<RingResource>(env) && resource::open::<SkeletonResource>(env)
}

/// The ERTS major version of the running VM (for `bits::detect` and the atom
/// cache).
pub(crate) fn erts_major() -> Option<u32> {
    let mut info = std::mem::MaybeUninit::<rustler::sys::ErlNifSysInfo>::zeroed();
    // SAFETY: `info` is a writable, zeroed struct of the size passed; the VM fills
    // at most that many bytes. `erts_version` then points at a static C string of
    // the VM (or stays null).
    let version = unsafe {
        rustler::sys::enif_system_info(
            info.as_mut_ptr(),
            std::mem::size_of::<rustler::sys::ErlNifSysInfo>(),
        );
        let ptr = info.assume_init().erts_version;
        if ptr.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(ptr).to_str().ok()?.to_owned()
    };
    version.split('.').next()?.parse().ok()
}

/// 0 when the library is ready; never unwinds into the VM.
fn ready(env: *mut ErlNifEnv) -> c_int {
    let major = erts_major();
    crate::bits::detect(major);
    crate::term_id::switch_atom_cache(crate::term_id::atom_cache_for(major));
    match std::panic::catch_unwind(|| open_types(env)) {
        Ok(true) => 0,
        _ => 1,
    }
}

unsafe extern "C" fn load(
    env: *mut ErlNifEnv,
    _priv: *mut *mut c_void,
    _info: ErlNifTerm,
) -> c_int {
    ready(env)
}

unsafe extern "C" fn upgrade(
    env: *mut ErlNifEnv,
    _priv: *mut *mut c_void,
    _old_priv: *mut *mut c_void,
    _info: ErlNifTerm,
) -> c_int {
    ready(env)
}

/// Every NIF of the library, each line the entries of one `nif!`.
const NIFS: &[&[ErlNifFunc]] = &[
    crate::term_id::TERM_ID,
    crate::term_id::SCORE,
    crate::weighted::WEIGHTED_SCORE,
    crate::list::LIST_OWNER,
    crate::list::LIST_OWNERS,
    crate::ring::RING_NEW,
    crate::ring::RING_OWNER,
    crate::ring::RING_OWNERS,
    crate::skeleton::SKELETON_NEW,
    crate::skeleton::SKELETON_OWNER,
    crate::skeleton::SKELETON_OWNERS,
    crate::batch::BATCH_OWNERS,
    crate::batch::BATCH_GROUPS,
    crate::batch::BATCH_MOVES,
    crate::bounded::BOUNDED_ASSIGNMENTS,
    #[cfg(feature = "work-probes")]
    crate::nif::hooks::DIRTY_RUNS,
    #[cfg(feature = "work-probes")]
    crate::nif::hooks::SUB_BINARY_LAYOUT,
    #[cfg(feature = "work-probes")]
    crate::nif::hooks::ATOM_CACHE,
    #[cfg(feature = "work-probes")]
    crate::nif::hooks::BATCH_CHECK,
];

/// erl_nif.h's `ErlNifEntry` as NIF 2.14 and later lay it out: what `nif_init`
/// returns and the VM reads (and copies) on every load of the library.
#[repr(C)]
struct Entry {
    major: c_int,
    minor: c_int,
    name: *const c_char,
    num_of_funcs: c_int,
    funcs: *const ErlNifFunc,
    load: Option<unsafe extern "C" fn(*mut ErlNifEnv, *mut *mut c_void, ErlNifTerm) -> c_int>,
    reload: Option<unsafe extern "C" fn(*mut ErlNifEnv, *mut *mut c_void, ErlNifTerm) -> c_int>,
    upgrade: Option<
        unsafe extern "C" fn(
            *mut ErlNifEnv,
            *mut *mut c_void,
            *mut *mut c_void,
            ErlNifTerm,
        ) -> c_int,
    >,
    unload: Option<unsafe extern "C" fn(*mut ErlNifEnv, *mut c_void)>,
    vm_variant: *const c_char,
    options: c_uint,
    sizeof_erl_nif_resource_type_init: usize,
    min_erts: *const c_char,
}

/// The entry the VM reads, built once: every NIF of `NIFS`, plus our callbacks.
/// (The VM may call `nif_init` again on every load of the path; the entry and
/// its function table stay put.)
fn entry() -> *const Entry {
    struct Built(Entry);
    // SAFETY: the entry is written once, then only read (by the VM); its pointers
    // are to static strings and to a function table leaked below.
    unsafe impl Send for Built {}
    unsafe impl Sync for Built {}
    static ENTRY: OnceLock<Built> = OnceLock::new();
    let built = ENTRY.get_or_init(|| {
        let funcs: &'static [ErlNifFunc] = Box::leak(
            NIFS.iter()
                .flat_map(|entries| entries.iter())
                .map(|f| ErlNifFunc { ..*f })
                .collect::<Box<[_]>>(),
        );
        Built(Entry {
            major: rustler::sys::NIF_MAJOR_VERSION,
            minor: rustler::sys::NIF_MINOR_VERSION,
            name: MODULE.as_ptr(),
            num_of_funcs: funcs.len() as c_int,
            funcs: funcs.as_ptr(),
            load: Some(load),
            reload: None,
            upgrade: Some(upgrade),
            unload: None,
            vm_variant: c"beam.vanilla".as_ptr(),
            // No entry options, as `init!` builds it: the dirty flags of the NIFs
            // that have them are read per function.
            options: 0,
            sizeof_erl_nif_resource_type_init: std::mem::size_of::<ErlNifResourceTypeInit>(),
            // The oldest OTP whose VM speaks NIF 2.16 (Cargo.toml's feature).
            min_erts: c"OTP-24.0".as_ptr(),
        })
    });
    &built.0
}

/// What the VM looks up in the library (`:erlang.load_nif/2`).
#[cfg(not(windows))]
#[no_mangle]
extern "C" fn nif_init() -> *const Entry {
    // SAFETY: called by the VM before any callback or NIF runs, which is when
    // rustler's table of the VM's functions must be filled.
    unsafe { rustler::sys::internal_write_symbols() };
    entry()
}

/// What the VM looks up in the library (`:erlang.load_nif/2`); on Windows the VM
/// passes the table of its functions.
#[cfg(windows)]
#[no_mangle]
extern "C" fn nif_init(callbacks: *mut rustler::sys::DynNifCallbacks) -> *const Entry {
    // SAFETY: `callbacks` is the VM's function table, valid for the VM's lifetime.
    unsafe { rustler::sys::internal_set_symbols(callbacks) };
    entry()
}
