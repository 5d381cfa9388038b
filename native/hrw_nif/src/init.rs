//! The NIF library's entry: what the VM calls when `HRW.Native` loads it.
//!
//! Written here instead of with `rustler::init!`, which registers a `load`
//! callback only. Without an `upgrade` callback, every reload of `HRW.Native`
//! (`:code.load_file/1`, `r/1` or `recompile` in IEx, a release's hot upgrade)
//! fails its `on_load` with "Upgrade not supported by this NIF library". On OTP
//! 25–29 a failed `on_load` of a module whose code is identical to the loaded one
//! leaves the loaded module's funs pointing at the discarded code: calls through
//! them raise `BadFunctionError`, or jump into freed memory and crash the VM
//! (bench/results/otp-load-file-race-2026-12-02.txt; test/hrw/reload_test.exs
//! holds the reloads that must work).
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
//! What this relies on in rustler (pinned to an exact version in Cargo.toml):
//! `codegen_runtime::{inventory, ErlNifEntry, internal_write_symbols,
//! internal_set_symbols}`, the fields of `ErlNifEntry` and `Nif::get_def`.

use crate::resource;
use crate::ring::RingResource;
use crate::skeleton::SkeletonResource;
use rustler::codegen_runtime::{c_int, c_void, inventory, ErlNifEntry, ErlNifEnv, ErlNifTerm};
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

/// The ERTS major version of the running VM (for `bits::detect`).
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
    crate::bits::detect(erts_major());
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

/// The entry the VM reads, built once: every NIF that `nif!` and
/// `#[rustler::nif]` submitted, plus our callbacks. (The VM may call `nif_init`
/// again on every load of the path; the entry and its function table stay put.)
fn entry() -> *const ErlNifEntry {
    struct Entry(ErlNifEntry);
    // SAFETY: the entry is written once, then only read (by the VM); its pointers
    // are to static strings and to a function table leaked below.
    unsafe impl Send for Entry {}
    unsafe impl Sync for Entry {}
    static ENTRY: OnceLock<Entry> = OnceLock::new();
    let entry = ENTRY.get_or_init(|| {
        let funcs: &'static [_] = Box::leak(
            inventory::iter::<rustler::Nif>()
                .map(rustler::Nif::get_def)
                .collect::<Box<[_]>>(),
        );
        let mut entry = ErlNifEntry::new(MODULE, funcs, load);
        entry.upgrade = Some(upgrade);
        Entry(entry)
    });
    &entry.0
}

/// What the VM looks up in the library (`:erlang.load_nif/2`).
#[cfg(not(windows))]
#[no_mangle]
extern "C" fn nif_init() -> *const ErlNifEntry {
    // SAFETY: called by the VM before any callback or NIF runs: rustler's calls to
    // the VM go through the symbol table this fills from the running process.
    unsafe { rustler::codegen_runtime::internal_write_symbols() };
    entry()
}

/// What the VM looks up in the library (`:erlang.load_nif/2`); on Windows the VM
/// passes the table of its functions.
#[cfg(windows)]
#[no_mangle]
extern "C" fn nif_init(
    callbacks: *mut rustler::codegen_runtime::DynNifCallbacks,
) -> *const ErlNifEntry {
    // SAFETY: `callbacks` is the VM's function table, valid for the VM's lifetime.
    unsafe { rustler::codegen_runtime::internal_set_symbols(callbacks) };
    entry()
}
