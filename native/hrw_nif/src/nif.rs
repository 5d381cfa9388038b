//! The NIF wrapper: [`nif!`] declares every NIF of the library.
//!
//! `nif!(NAME: "name" => f(env, a, b))` declares the NIF `name`, which calls
//! `f(env, a, b, &mut budget)` with its arguments decoded in order (each to the
//! type `f` takes), on the caller's (normal) scheduler with `Budget::normal`. When
//! `f` says the work would exceed that budget ([`Failure::NeedsDirty`]), the call
//! is moved to a dirty CPU scheduler with `enif_schedule_nif` (erl_nif), where it
//! runs again unlimited: the normal/dirty choice is made here, once, for every
//! NIF. `NAME` is the NIF's entry (or, in test builds, entries) for the library's
//! function table (init.rs lists them all).
//!
//! Test builds (feature `work-probes`, which MIX_ENV=test turns on) register two
//! more NIFs per line, which no production build has:
//! - `name_dirty`, the same on a dirty CPU scheduler from the start (the tests
//!   compare the dirty walk's ids with the normal one's through `term_id_dirty`);
//! - `name_probe`, the normal-scheduler version that reports, instead of its
//!   result, how it ended and the work it charged and counted (`probe_report`;
//!   test/hrw/budget_test.exs).
//!
//! Why not `#[rustler::nif]` (an exception to using rustler's public API only,
//! allowed where the public path costs more than 10% of a lookup): the function
//! it generates collects the call's arguments into a `Vec` (an allocation and a
//! free on every call) and passes the result through two `catch_unwind`s and
//! rustler's `NifReturned`, and it cannot move an over-budget call to a dirty
//! scheduler itself (the C function `enif_schedule_nif` needs is not reachable),
//! so that had to be done by the Elixir caller (a raise, a catch and a second
//! call). Measured with `bench/native_ab.sh A B 7 bench/nif_call_ab.exs`, A that
//! design (`#[rustler::nif]` twins) and B these entry points, all else equal, 7
//! pairs on a quiet 2-core machine: the median pairwise A/B was 1.60 for
//! `HRW.term_id/1` of an integer, 1.59 of a binary, 1.80 of an atom, 1.41 of a
//! tuple, 1.26 for `HRW.owner/2` on a 100-node ring and 1.33 on a 1000-node
//! skeleton (docs/BENCHMARKS.md). So this macro writes the C entry points with
//! rustler's public pieces only (`rustler::sys`, `Env::new`, `Term::new`,
//! `Decoder`, `Encoder`) and erl_nif's `enif_schedule_nif`; errors and panics
//! become exceptions here.
//!
//! Adding a NIF: one `nif!` line beside the function it wraps, its entry in
//! init.rs's table, and its stub in lib/hrw/native.ex (which declares the test
//! builds' twins from its list).

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

/// Test builds: the test hooks' NIFs (`dirty_runs/0`, `sub_binary_layout/1`,
/// `atom_cache/1`).
#[cfg(feature = "work-probes")]
pub mod hooks {
    use crate::budget::{Budget, Outcome};
    use rustler::Env;

    /// The number of dirty runs so far.
    fn dirty_runs(_env: Env, _budget: &mut Budget) -> Outcome<u64> {
        Ok(super::DIRTY_RUNS.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Reads the sub-binary layout of this VM (`true`), or runs as on a VM whose
    /// layout is not known (`false`: the fallback); answers whether a size is now
    /// read (bits.rs; test/hrw/budget_test.exs).
    fn sub_binary_layout(_env: Env, on: bool, _budget: &mut Budget) -> Outcome<bool> {
        let major = if on { crate::init::erts_major() } else { None };
        crate::bits::force(major);
        Ok(crate::bits::layout_of(major) != crate::bits::layout_of(None))
    }

    /// Uses the atom cache as on this VM (`true`: on where its ERTS allows it), or
    /// runs without it (`false`: the fallback); answers whether it is now used
    /// (term_id/mod.rs; test/hrw/budget_test.exs).
    fn atom_cache(_env: Env, on: bool, _budget: &mut Budget) -> Outcome<bool> {
        let on = on && crate::term_id::atom_cache_for(crate::init::erts_major());
        crate::term_id::switch_atom_cache(on);
        Ok(on)
    }

    /// Batches check the struct's nodes (`true`, as every build does) or not
    /// (`false`, for bench/switch_ab.exs only); answers the setting.
    fn batch_check(_env: Env, on: bool, _budget: &mut Budget) -> Outcome<bool> {
        crate::batch::CHECK.store(on, std::sync::atomic::Ordering::Relaxed);
        Ok(on)
    }

    super::nif!(plain DIRTY_RUNS: "dirty_runs" => dirty_runs(env));
    super::nif!(plain BATCH_CHECK: "batch_check" => batch_check(env, on));
    super::nif!(plain ATOM_CACHE: "atom_cache" => atom_cache(env, on));
    super::nif!(plain SUB_BINARY_LAYOUT: "sub_binary_layout" => sub_binary_layout(env, on));
}

/// A failed call as the exception it raises in the calling process: a decoding
/// error is `badarg` (`ArgumentError`), a panic the atom `:nif_panicked`, and a
/// [`Failure`] what errors.rs makes of it.
///
/// # Safety
/// `env` is the env of the running NIF call.
pub unsafe fn raise(env: rustler::Env, failure: Failed) -> rustler::sys::ErlNifTerm {
    use rustler::sys::{enif_make_badarg, enif_raise_exception};
    use rustler::Encoder;
    mod atoms {
        rustler::atoms! { nif_panicked }
    }
    let reason = match failure {
        Failed::Decode => return unsafe { enif_make_badarg(env.as_c_arg()) },
        Failed::Panic => atoms::nif_panicked().encode(env),
        Failed::Failure(failure) => failure.reason(env),
    };
    // SAFETY: the caller's env, and a term of it.
    unsafe { enif_raise_exception(env.as_c_arg(), reason.as_c_arg()) }
}

/// Why a call failed (see [`raise`]).
pub enum Failed {
    Decode,
    Panic,
    Failure(crate::errors::Failure),
}

impl From<crate::errors::Failure> for Failed {
    fn from(failure: crate::errors::Failure) -> Failed {
        Failed::Failure(failure)
    }
}

impl From<rustler::Error> for Failed {
    fn from(_: rustler::Error) -> Failed {
        Failed::Decode
    }
}

/// Declares the NIF `name` of `f` as `NAME` (its function-table entries), and in
/// test builds `name_dirty` and `name_probe` (see the module documentation).
/// `nif!(plain NAME: "name" => f(env, ...))` declares `name` alone, run as a
/// normal call without the dirty move (the test hooks).
macro_rules! nif {
    (plain $table:ident: $name:literal => $f:ident (env $(, $arg:ident)*)) => {
        pub const $table: &[rustler::sys::ErlNifFunc] = {
            use rustler::sys::{c_int, ErlNifEnv, ErlNifFunc, ErlNifTerm};

            /// # Safety
            /// Called by the VM with a valid env and `argc` terms at `argv`.
            unsafe extern "C" fn normal(
                nif_env: *mut ErlNifEnv,
                argc: c_int,
                argv: *const ErlNifTerm,
            ) -> ErlNifTerm {
                $crate::nif::nif!(@body nif_env, argc, argv, env, budget,
                    $crate::budget::Budget::normal(), {},
                    |outcome: $crate::budget::Outcome<_>| Ok(rustler::Encoder::encode(&outcome?, env)),
                    $f ($($arg),*))
            }

            &[ErlNifFunc {
                name: concat!($name, "\0").as_ptr().cast(),
                arity: <[&str]>::len(&[$(stringify!($arg)),*]) as u32,
                function: normal,
                flags: 0,
            }]
        };
    };
    ($table:ident: $name:literal => $f:ident $(::<$g:ty>)? (env $(, $arg:ident)*)) => {
        pub const $table: &[rustler::sys::ErlNifFunc] = {
            use rustler::sys::{c_int, ErlNifEnv, ErlNifFunc, ErlNifTerm};

            const DIRTY: &str = concat!($name, "_dirty\0");
            const ARITY: u32 = <[&str]>::len(&[$(stringify!($arg)),*]) as u32;
            const DIRTY_CPU: u32 = rustler::sys::ERL_NIF_DIRTY_JOB_CPU_BOUND as u32;

            // Each function below is called by the VM (or by `enif_schedule_nif`)
            // with a valid env and `argc` terms at `argv` (the registered arity),
            // all valid for the call.

            /// On the caller's scheduler; moved to `dirty` when over budget.
            unsafe extern "C" fn normal(
                nif_env: *mut ErlNifEnv,
                argc: c_int,
                argv: *const ErlNifTerm,
            ) -> ErlNifTerm {
                $crate::nif::nif!(@body nif_env, argc, argv, env, budget,
                    $crate::budget::Budget::normal(), {},
                    |outcome: $crate::budget::Outcome<_>| {
                        $crate::budget::report_timeslice(env, &budget);
                        match outcome {
                            Ok(value) => Ok(Some(rustler::Encoder::encode(&value, env))),
                            Err($crate::errors::Failure::NeedsDirty) => Ok(None),
                            Err(failure) => Err($crate::nif::Failed::from(failure)),
                        }
                    },
                    $f $(::<$g>)? ($($arg),*), reschedule)
            }

            /// On a dirty CPU scheduler, unlimited.
            unsafe extern "C" fn dirty(
                nif_env: *mut ErlNifEnv,
                argc: c_int,
                argv: *const ErlNifTerm,
            ) -> ErlNifTerm {
                $crate::nif::nif!(@body nif_env, argc, argv, env, budget,
                    $crate::budget::Budget::dirty(), $crate::nif::dirty_ran(),
                    |outcome: $crate::budget::Outcome<_>| Ok(rustler::Encoder::encode(&outcome?, env)),
                    $f $(::<$g>)? ($($arg),*))
            }

            /// The normal-scheduler version's report (see `probe_report`).
            #[cfg(feature = "work-probes")]
            unsafe extern "C" fn probe(
                nif_env: *mut ErlNifEnv,
                argc: c_int,
                argv: *const ErlNifTerm,
            ) -> ErlNifTerm {
                $crate::nif::nif!(@body nif_env, argc, argv, env, budget,
                    $crate::budget::Budget::normal(), $crate::nif::probe_start(),
                    |outcome| Ok::<_, $crate::nif::Failed>($crate::nif::probe_report(env, outcome)),
                    $f $(::<$g>)? ($($arg),*))
            }

            /// Moves the call to `dirty`.
            ///
            /// # Safety
            /// The env and arguments of a running normal call of this NIF.
            unsafe fn reschedule(
                nif_env: *mut ErlNifEnv,
                argc: c_int,
                argv: *const ErlNifTerm,
            ) -> ErlNifTerm {
                // SAFETY: this call's env and its own arguments, valid for the
                // rescheduled call, which reads `argc` of them.
                unsafe {
                    rustler::sys::enif_schedule_nif(
                        nif_env,
                        DIRTY.as_ptr().cast(),
                        DIRTY_CPU as c_int,
                        dirty,
                        argc,
                        argv,
                    )
                }
            }

            #[cfg(not(feature = "work-probes"))]
            const ENTRIES: &[ErlNifFunc] = &[ErlNifFunc {
                name: concat!($name, "\0").as_ptr().cast(),
                arity: ARITY,
                function: normal,
                flags: 0,
            }];
            #[cfg(feature = "work-probes")]
            const ENTRIES: &[ErlNifFunc] = &[
                ErlNifFunc {
                    name: concat!($name, "\0").as_ptr().cast(),
                    arity: ARITY,
                    function: normal,
                    flags: 0,
                },
                ErlNifFunc {
                    name: DIRTY.as_ptr().cast(),
                    arity: ARITY,
                    function: dirty,
                    flags: DIRTY_CPU,
                },
                ErlNifFunc {
                    name: concat!($name, "_probe\0").as_ptr().cast(),
                    arity: ARITY,
                    function: probe,
                    flags: 0,
                },
            ];
            ENTRIES
        };
    };
    // The body of an entry point: the env and arguments, `f` called with them
    // (decoded) and `budget` (after `before`), its outcome passed to `answer`
    // (a `Result` of the answer term, or of `None` to reschedule) inside a
    // `catch_unwind`; a failure raised, `None` handed to `reschedule`.
    (@body $nif_env:ident, $argc:ident, $argv:ident, $e:ident, $budget:ident, $new:expr, $before:expr,
        $answer:expr, $f:ident $(::<$g:ty>)? ($($arg:ident),*) $(, $reschedule:ident)?) => {{
        let lifetime = ();
        // SAFETY: the VM's env of this call; `lifetime` stands for the call.
        let $e = unsafe { rustler::Env::new(&lifetime, $nif_env) };
        // SAFETY: `argc` terms at `argv`, valid for the call.
        let args = unsafe { std::slice::from_raw_parts($argv, $argc.max(0) as usize) };
        let result = std::panic::catch_unwind(move || {
            let mut _next = args.iter();
            $(
                let $arg = match _next.next() {
                    // SAFETY: an argument term of this call, valid in its env.
                    Some(&raw) => unsafe { rustler::Term::new($e, raw) }.decode()?,
                    None => return Err($crate::nif::Failed::Decode),
                };
            )*
            let mut $budget = $new;
            $before;
            let outcome = $f $(::<$g>)? ($e, $($arg,)* &mut $budget);
            // The raw term leaves the closure: the success path returns it as it
            // is, without moving a rustler `Term` through memory.
            ($answer)(outcome).map(|answer| $crate::nif::Answer::from(answer).raw())
        });
        match result {
            Ok(Ok(Some(raw))) => raw,
            // SAFETY: this call's env and arguments.
            Ok(Ok(None)) => $crate::nif::nif!(@reschedule $nif_env, $argc, $argv $(, $reschedule)?),
            // SAFETY: this call's env.
            Ok(Err(failed)) => unsafe { $crate::nif::raise($e, failed) },
            // SAFETY: this call's env.
            Err(_) => unsafe { $crate::nif::raise($e, $crate::nif::Failed::Panic) },
        }
    }};
    (@reschedule $nif_env:ident, $argc:ident, $argv:ident, $reschedule:ident) => {
        // SAFETY: this call's env and arguments.
        unsafe { $reschedule($nif_env, $argc, $argv) }
    };
    (@reschedule $nif_env:ident, $argc:ident, $argv:ident) => {
        unreachable!("only a normal call asks for a dirty scheduler")
    };
}
pub(crate) use nif;

/// What a call answers: a term, or nothing yet (moved to a dirty scheduler).
pub struct Answer<'a>(Option<rustler::Term<'a>>);

impl Answer<'_> {
    /// The answer's raw term, `None` to reschedule.
    #[inline(always)]
    pub fn raw(self) -> Option<rustler::sys::ErlNifTerm> {
        self.0.map(|term| term.as_c_arg())
    }
}

impl<'a> From<rustler::Term<'a>> for Answer<'a> {
    #[inline(always)]
    fn from(term: rustler::Term<'a>) -> Answer<'a> {
        Answer(Some(term))
    }
}

impl<'a> From<Option<rustler::Term<'a>>> for Answer<'a> {
    #[inline(always)]
    fn from(term: Option<rustler::Term<'a>>) -> Answer<'a> {
        Answer(term)
    }
}
