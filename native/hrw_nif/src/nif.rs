//! The NIF wrapper: [`nif!`] declares every NIF of the library with
//! `#[rustler::nif]`.
//!
//! `nif!("name_normal", "name_dirty", "name_probe" => f(env, a, b))` declares,
//! each calling `f(env, a, b, &mut budget)` with its
//! arguments decoded in order (each to the type `f` takes):
//! - `name_normal`, on the caller's (normal) scheduler, with `Budget::normal`.
//!   When `f` says the work would exceed that budget ([`Failure::NeedsDirty`]),
//!   it raises `:hrw_needs_dirty` having returned nothing;
//! - `name_dirty`, the same on a dirty CPU scheduler (`schedule = "DirtyCpu"`),
//!   unlimited. lib/hrw/native.ex's `name/arity` calls `name_normal` and, on
//!   `:hrw_needs_dirty`, `name_dirty`: the normal/dirty choice is made there, once
//!   for every NIF;
//! - in test builds only (feature `work-probes`, which MIX_ENV=test turns on),
//!   `name_probe`: the normal-scheduler version that reports, instead of its
//!   result, how it ended and the work it charged and counted (`probe_report`;
//!   test/hrw/budget_test.exs).
//!
//! Every `f` takes the call's env first (`nif!("name_normal", "name_dirty",
//! "name_probe" => f(env, a, b))`): the env the NIFs bind is named by rustler's
//! macro, which a `macro_rules!` can only meet by naming it in one place.
//!
//! Adding a NIF: one `nif!` line beside the function it wraps, and its name and
//! arity in lib/hrw/native.ex (which declares its stubs and the dispatch).

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

/// Declares the NIFs `name_normal`, `name_dirty` and, in test builds,
/// `name_probe` of `f` (see the module documentation). The three names are
/// written out: `#[rustler::nif(name = ...)]` takes a string literal only.
macro_rules! nif {
    ($normal:literal, $dirty:literal, $probe:literal => $f:ident $(::<$g:ty>)? (env $(, $arg:ident)*)) => {
        // Each NIF takes its arguments as terms and decodes them itself, each to
        // the type `f` takes (a failed decoding raises `ArgumentError`).
        const _: () = {
            use rustler::{Encoder, Env, NifResult, Term};

            #[rustler::nif(name = $normal)]
            fn normal<'a>(env: Env<'a>, $($arg: Term<'a>),*) -> NifResult<Term<'a>> {
                let mut budget = $crate::budget::Budget::normal();
                let outcome = $f $(::<$g>)? (env, $($arg.decode()?,)* &mut budget);
                $crate::budget::report_timeslice(env, &budget);
                Ok(outcome?.encode(env))
            }

            #[rustler::nif(name = $dirty, schedule = "DirtyCpu")]
            fn dirty<'a>(env: Env<'a>, $($arg: Term<'a>),*) -> NifResult<Term<'a>> {
                $crate::nif::dirty_ran();
                let mut budget = $crate::budget::Budget::dirty();
                let outcome = $f $(::<$g>)? (env, $($arg.decode()?,)* &mut budget);
                Ok(outcome?.encode(env))
            }

            #[cfg(feature = "work-probes")]
            #[rustler::nif(name = $probe)]
            fn probe<'a>(env: Env<'a>, $($arg: Term<'a>),*) -> NifResult<Term<'a>> {
                $crate::nif::probe_start();
                let mut budget = $crate::budget::Budget::normal();
                let outcome = $f $(::<$g>)? (env, $($arg.decode()?,)* &mut budget);
                Ok($crate::nif::probe_report(env, outcome))
            }
        };
    };
}
pub(crate) use nif;
