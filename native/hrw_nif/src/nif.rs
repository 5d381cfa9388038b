//! The NIF wrapper: [`nif!`] declares every NIF of the library.
//!
//! `nif!(name => f(a, b))` registers the NIF `name`, which calls
//! `f(a, b, &mut budget)` with its arguments decoded in order (each to the type `f`
//! takes), on the caller's (normal) scheduler with `Budget::normal`. When `f` says
//! the work would exceed that budget ([`Failure::NeedsDirty`]), the call is moved to
//! a dirty CPU scheduler with `enif_schedule_nif`, where it runs again unlimited:
//! the normal/dirty choice is made here, once, for every NIF.
//!
//! Test builds (feature `work-probes`, which MIX_ENV=test turns on) register two
//! more NIFs per line, which no production build has:
//! - `name_dirty`, the same on a dirty CPU scheduler from the start (the tests
//!   compare the dirty walk's ids with the normal one's through `term_id_dirty`);
//! - `name_probe`, the normal-scheduler version that reports, instead of its
//!   result, how it ended and the work it charged and counted (`probe_report`;
//!   test/hrw/budget_test.exs).
//!
//! `nif!(name => f(env, a))` passes the call's env first.
//!
//! The wrapper is written against `rustler::sys` directly, not `#[rustler::nif]`,
//! whose per-call `Vec` of argument terms costs more than the ring and skeleton
//! lookups it would wrap. Errors and panics are turned into exceptions by
//! rustler's own runtime (`handle_nif_result`), as for its NIFs.
//!
//! Adding a NIF: one `nif!` line beside the function it wraps, and its name and
//! arity in lib/hrw/native.ex (which declares the test builds' twins from them).

#[cfg(feature = "work-probes")]
use crate::{budget::Outcome, errors::Failure};
#[cfg(feature = "work-probes")]
use rustler::{Encoder, Env, Term};

/// What a probe reports: how the call ended (`:ok`, `:needs_dirty`,
/// `{:bad_arg, message}` or `:stale_resource`), the units it charged and the units
/// of work it counted. Tests check `counted <= charged`.
#[cfg(feature = "work-probes")]
pub fn probe_report<'a, T>(env: Env<'a>, outcome: Outcome<T>) -> Term<'a> {
    mod probe_atoms {
        rustler::atoms! { ok, needs_dirty, bad_arg, stale_resource }
    }
    let (charged, counted) = hrw_core::work::take();
    let how = match outcome {
        Ok(_) => probe_atoms::ok().encode(env),
        Err(Failure::NeedsDirty) => probe_atoms::needs_dirty().encode(env),
        Err(Failure::BadArg(m)) => (probe_atoms::bad_arg(), m).encode(env),
        Err(Failure::StaleResource) => probe_atoms::stale_resource().encode(env),
    };
    (how, charged, counted).encode(env)
}

/// Resets the per-thread work tallies before a probe runs its call.
#[cfg(feature = "work-probes")]
pub fn probe_start() {
    let _ = hrw_core::work::take();
}

/// Test builds (feature `work-probes`): calls that ran on a dirty scheduler, all
/// NIFs together, read by the `dirty_runs` NIF so that a test can see where a call
/// ran (test/hrw/term_id_test.exs).
#[cfg(feature = "work-probes")]
static DIRTY_RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Notes a call that runs on a dirty scheduler (test builds only).
#[inline(always)]
pub fn dirty_ran() {
    #[cfg(feature = "work-probes")]
    DIRTY_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The number of dirty runs so far (test builds only).
#[cfg(feature = "work-probes")]
#[rustler::nif]
fn dirty_runs() -> u64 {
    DIRTY_RUNS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Test builds: reads the sub-binary layout of this VM (`true`), or runs as on a
/// VM whose layout is not known (`false`: the fallback); answers whether a size is
/// now read (bits.rs; test/hrw/budget_test.exs).
#[cfg(feature = "work-probes")]
#[rustler::nif]
fn sub_binary_layout(on: bool) -> bool {
    let major = if on { crate::init::erts_major() } else { None };
    crate::bits::force(major);
    crate::bits::layout_of(major) != crate::bits::layout_of(None)
}

/// Declares the NIF `name` of `f`, and in test builds `name_dirty` and
/// `name_probe` (see the module documentation).
macro_rules! nif {
    ($name:ident => $f:ident $(::<$g:ty>)? (env $(, $arg:ident)*)) => {
        $crate::nif::nif!(@all $name, env, [env,] $f $(::<$g>)? ($($arg),*));
    };
    ($name:ident => $f:ident $(::<$g:ty>)? ($($arg:ident),*)) => {
        $crate::nif::nif!(@all $name, env, [] $f $(::<$g>)? ($($arg),*));
    };
    // `f`'s arguments decoded from `args` (a return from the enclosing closure
    // when one does not decode), then `f` called with them and `budget`.
    (@call $e:ident, $args:ident, $budget:expr, [$($pass:ident,)?] $f:ident $(::<$g:ty>)? ($($arg:ident),*)) => {{
        let mut _next = $args.iter();
        $(
            let $arg = match _next.next() {
                // SAFETY: an argument term of this call, valid in its env.
                Some(&raw) => unsafe { rustler::Term::new($e, raw) }.decode()?,
                None => return Err(rustler::Error::BadArg),
            };
        )*
        $f $(::<$g>)? ($($pass,)? $($arg,)* $budget)
    }};
    (@all $name:ident, $e:ident, [$($pass:ident,)?] $f:ident $(::<$g:ty>)? ($($arg:ident),*)) => {
        const _: () = {
            use rustler::codegen_runtime::{c_char, c_int, c_uint, handle_nif_result, inventory};
            use rustler::sys::{ErlNifEnv, ErlNifTerm};

            const NAME: &str = concat!(stringify!($name), "\0");
            const DIRTY: &str = concat!(stringify!($name), "_dirty\0");
            #[cfg(feature = "work-probes")]
            const PROBE: &str = concat!(stringify!($name), "_probe\0");
            const ARITY: c_uint = [$(stringify!($arg)),*].len() as c_uint;

            // Each function below is called by the VM (or by `enif_schedule_nif`)
            // with a valid env and `argc` terms at `argv` (the registered arity),
            // all valid for the call.

            /// On the caller's scheduler; moved to `dirty` when over budget.
            unsafe extern "C" fn normal(
                nif_env: *mut ErlNifEnv,
                argc: c_int,
                argv: *const ErlNifTerm,
            ) -> ErlNifTerm {
                let lifetime = ();
                // SAFETY: the VM's env of this call; `lifetime` stands for the call.
                let $e = unsafe { rustler::Env::new(&lifetime, nif_env) };
                // SAFETY: `argc` terms at `argv`, valid for the call.
                let args = unsafe { std::slice::from_raw_parts(argv, argc.max(0) as usize) };
                // The answer is encoded inside the closure: the success path then
                // returns the raw term as it is, and only errors and panics go
                // through rustler's `handle_nif_result`.
                let result = std::panic::catch_unwind(move || {
                    let mut budget = $crate::budget::Budget::normal();
                    let outcome = $crate::nif::nif!(@call $e, args, &mut budget, [$($pass,)?] $f $(::<$g>)? ($($arg),*));
                    $crate::budget::report_timeslice($e, &budget);
                    match outcome {
                        Ok(value) => Ok(Some(rustler::Encoder::encode(&value, $e).as_c_arg())),
                        Err($crate::errors::Failure::NeedsDirty) => Ok(None),
                        Err(failure) => Err(rustler::Error::from(failure)),
                    }
                });
                let result: std::thread::Result<rustler::NifResult<rustler::Term>> = match result {
                    Ok(Ok(Some(raw))) => return raw,
                    Ok(Ok(None)) => {
                        // SAFETY: this call's env and its own arguments, valid for the
                        // rescheduled call, which reads `argc` of them.
                        return unsafe {
                            rustler::sys::enif_schedule_nif(
                                nif_env,
                                DIRTY.as_ptr() as *const c_char,
                                rustler::sys::ERL_NIF_DIRTY_JOB_CPU_BOUND as c_int,
                                dirty,
                                argc,
                                argv,
                            )
                        };
                    }
                    Ok(Err(error)) => Ok(Err(error)),
                    Err(panic) => Err(panic),
                };
                // SAFETY: `result` belongs to this call's env.
                unsafe { handle_nif_result(result, $e).apply($e) }
            }

            /// On a dirty CPU scheduler, unlimited.
            unsafe extern "C" fn dirty(
                nif_env: *mut ErlNifEnv,
                argc: c_int,
                argv: *const ErlNifTerm,
            ) -> ErlNifTerm {
                let lifetime = ();
                // SAFETY: the VM's env of this call; `lifetime` stands for the call.
                let $e = unsafe { rustler::Env::new(&lifetime, nif_env) };
                // SAFETY: `argc` terms at `argv`, valid for the call.
                let args = unsafe { std::slice::from_raw_parts(argv, argc.max(0) as usize) };
                let result = std::panic::catch_unwind(move || {
                    let mut budget = $crate::budget::Budget::dirty();
                    $crate::nif::dirty_ran();
                    let outcome = $crate::nif::nif!(@call $e, args, &mut budget, [$($pass,)?] $f $(::<$g>)? ($($arg),*));
                    Ok::<_, rustler::Error>(outcome?)
                });
                // SAFETY: `result` belongs to this call's env.
                unsafe { handle_nif_result(result, $e).apply($e) }
            }

            /// The normal-scheduler version's report (see `probe_report`).
            #[cfg(feature = "work-probes")]
            unsafe extern "C" fn probe(
                nif_env: *mut ErlNifEnv,
                argc: c_int,
                argv: *const ErlNifTerm,
            ) -> ErlNifTerm {
                let lifetime = ();
                // SAFETY: the VM's env of this call; `lifetime` stands for the call.
                let $e = unsafe { rustler::Env::new(&lifetime, nif_env) };
                // SAFETY: `argc` terms at `argv`, valid for the call.
                let args = unsafe { std::slice::from_raw_parts(argv, argc.max(0) as usize) };
                let result = std::panic::catch_unwind(move || {
                    $crate::nif::probe_start();
                    let mut budget = $crate::budget::Budget::normal();
                    let outcome = $crate::nif::nif!(@call $e, args, &mut budget, [$($pass,)?] $f $(::<$g>)? ($($arg),*));
                    Ok::<_, rustler::Error>($crate::nif::probe_report($e, outcome))
                });
                // SAFETY: `result` belongs to this call's env.
                unsafe { handle_nif_result(result, $e).apply($e) }
            }

            inventory::submit!(rustler::Nif {
                name: NAME.as_ptr() as *const c_char,
                arity: ARITY,
                flags: 0,
                raw_func: normal,
            });
            #[cfg(feature = "work-probes")]
            inventory::submit!(rustler::Nif {
                name: DIRTY.as_ptr() as *const c_char,
                arity: ARITY,
                flags: rustler::sys::ERL_NIF_DIRTY_JOB_CPU_BOUND as c_uint,
                raw_func: dirty,
            });
            #[cfg(feature = "work-probes")]
            inventory::submit!(rustler::Nif {
                name: PROBE.as_ptr() as *const c_char,
                arity: ARITY,
                flags: 0,
                raw_func: probe,
            });
        };
    };
}
pub(crate) use nif;
