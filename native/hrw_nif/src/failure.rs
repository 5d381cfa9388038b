//! How a NIF says no. Every failure becomes an Elixir exception raised from the NIF:
//! bad input raises `ArgumentError` with a message that names the problem, and work
//! too large for a normal scheduler raises the atom `:hrw_needs_dirty`, which the
//! Elixir wrapper catches to call the dirty-scheduler twin of the same NIF. A
//! resource that cannot be decoded raises `:hrw_stale_resource`: the struct rebuilds.

use rustler::{Encoder, Env, Error, Term};

pub enum Failure {
    /// The normal-scheduler budget ran out; retry on a dirty scheduler.
    NeedsDirty,
    /// Invalid input; the message is shown to the user.
    BadArg(String),
    /// A resource term that no longer decodes (sent to another node, or its
    /// resource is gone); the Elixir struct rebuilds it from its node list.
    StaleResource,
}

pub type Outcome<T> = Result<T, Failure>;

pub fn bad_arg<T>(message: impl Into<String>) -> Outcome<T> {
    Err(Failure::BadArg(message.into()))
}

mod atoms {
    rustler::atoms! { hrw_needs_dirty, hrw_stale_resource, message, __struct__, __exception__, true_ = "true" }
}

/// An `%ArgumentError{}` built in the NIF, so it reaches the caller unchanged.
struct ArgumentError(String);

impl Encoder for ArgumentError {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        let module = rustler::types::atom::Atom::from_str(env, "Elixir.ArgumentError")
            .map(|a| a.encode(env))
            .unwrap_or_else(|_| atoms::message().encode(env));
        let keys = [
            atoms::__struct__().encode(env),
            atoms::__exception__().encode(env),
            atoms::message().encode(env),
        ];
        let values = [module, atoms::true_().encode(env), self.0.encode(env)];
        Term::map_from_term_arrays(env, &keys, &values).unwrap_or_else(|_| self.0.encode(env))
    }
}

impl From<Failure> for Error {
    fn from(failure: Failure) -> Error {
        match failure {
            Failure::NeedsDirty => Error::RaiseTerm(Box::new(atoms::hrw_needs_dirty())),
            Failure::BadArg(message) => Error::RaiseTerm(Box::new(ArgumentError(message))),
            Failure::StaleResource => Error::RaiseTerm(Box::new(atoms::hrw_stale_resource())),
        }
    }
}

/// Units in 1% of a scheduler's time slice: the whole budget is one slice. (A slice
/// is ~1 ms; a call that spends its budget takes 0.2-0.8 ms, cache misses
/// included, so reporting it as a full slice keeps a process's slice near 1 ms.)
const UNITS_PER_TIMESLICE_PERCENT: u64 = NORMAL_BUDGET / 100;

/// Tells the scheduler how much of its time slice the normal-scheduler call that
/// just ended used (the units its budget spent), so a process that calls such NIFs
/// back to back is scheduled out after about 1 ms in all, as if it ran Erlang code.
/// Without it each NIF call counts as one reduction, and a loop of 0.3 ms calls kept
/// a scheduler for tens of milliseconds (`mix hrw.stalls`). Calls under 1% report
/// nothing (the hot path is one subtraction and one compare).
#[inline(always)]
pub fn report_timeslice(env: Env, budget: &Budget) {
    let spent = NORMAL_BUDGET.saturating_sub(budget.remaining);
    let percent = spent / UNITS_PER_TIMESLICE_PERCENT;
    if percent > 0 {
        rustler::schedule::consume_timeslice(env, percent.min(100) as i32);
    }
}

/// Work allowed before a normal-scheduler call gives up and asks for a dirty one.
/// Units are rough nanoseconds of warm work on the reference machine (defined in
/// `hrw_core::work`); dirty calls are unlimited.
pub struct Budget {
    remaining: u64,
    limited: bool,
    /// Bytes of the binaries whose ids were computed under this budget: what the
    /// VM then hashes or compares when such a term becomes a map key (batch.rs).
    binary_bytes: u64,
}

/// ~0.4 ms of work when warm: a normal-scheduler NIF call must stay under ~1 ms,
/// and a first (cache-cold) pass over a list costs about twice as much. Measured:
/// a list of 22,000 short binary nodes (the limit) takes ~0.35 ms warm, ~0.7 ms cold.
pub const NORMAL_BUDGET: u64 = 400_000;

impl Budget {
    pub fn normal() -> Budget {
        Budget {
            remaining: NORMAL_BUDGET,
            limited: true,
            binary_bytes: 0,
        }
    }

    pub fn dirty() -> Budget {
        Budget {
            remaining: u64::MAX,
            limited: false,
            binary_bytes: 0,
        }
    }

    /// Whether this budget can run out (a normal-scheduler call).
    pub fn is_limited(&self) -> bool {
        self.limited
    }

    /// Units left (`u64::MAX` on a dirty scheduler): for deciding, before any
    /// work, that a call cannot fit (nothing is charged).
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Notes `bytes` of a binary term hashed (see `binary_bytes`).
    #[inline(always)]
    pub fn note_binary(&mut self, bytes: usize) {
        self.binary_bytes = self.binary_bytes.wrapping_add(bytes as u64);
    }

    /// Binary bytes hashed so far (a running total: callers take differences).
    pub fn binary_bytes(&self) -> u64 {
        self.binary_bytes
    }

    /// Spend `cost` units, failing with `NeedsDirty` when a normal call runs out.
    #[inline]
    pub fn charge(&mut self, cost: u64) -> Outcome<()> {
        if self.limited {
            if cost > self.remaining {
                return Err(Failure::NeedsDirty);
            }
            self.remaining -= cost;
            hrw_core::work::charged(cost);
        }
        Ok(())
    }
}

/// What a probe reports (feature `work-probes`): how the call ended, the units it
/// charged and the units of work it counted. Tests check `counted <= charged`.
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

/// Declares the normal-scheduler NIF `$name`, calling `$f(args..., Budget::normal())`
/// with its arguments decoded in order (each to the type `$f` takes), like
/// `#[rustler::nif]` but without its per-call `Vec` of argument terms: a NIF call
/// here costs ~12 ns instead of ~25 (measured: an empty NIF each way). Errors and
/// panics are turned into exceptions by rustler's own runtime, as for its NIFs.
macro_rules! raw_nif {
    ($name:ident, env => $f:ident $(::<$g:ty>)? ($($arg:ident),*)) => {
        $crate::failure::raw_nif!(@nif $name, env, [env,] $f $(::<$g>)? ($($arg),*));
    };
    ($name:ident, $f:ident $(::<$g:ty>)? ($($arg:ident),*)) => {
        $crate::failure::raw_nif!(@nif $name, env, [] $f $(::<$g>)? ($($arg),*));
    };
    (@nif $name:ident, $env:ident, [$($pass:ident,)?] $f:ident $(::<$g:ty>)? ($($arg:ident),*)) => {
        rustler::codegen_runtime::inventory::submit!(rustler::Nif {
            name: concat!(stringify!($name), "\0").as_ptr() as *const rustler::codegen_runtime::c_char,
            arity: [$(stringify!($arg)),*].len() as rustler::codegen_runtime::c_uint,
            flags: 0,
            raw_func: {
                /// Called by the VM with a valid env and `argc` (the registered
                /// arity: the number of arguments read below) terms at `argv`,
                /// valid for the call.
                unsafe extern "C" fn $name(
                    nif_env: *mut rustler::sys::ErlNifEnv,
                    argc: rustler::codegen_runtime::c_int,
                    argv: *const rustler::sys::ErlNifTerm,
                ) -> rustler::sys::ErlNifTerm {
                    let lifetime = ();
                    // SAFETY: the VM's env of this call; `lifetime` stands for the call.
                    let $env = unsafe { rustler::Env::new(&lifetime, nif_env) };
                    // SAFETY: `argc` terms at `argv`, valid for the call.
                    let args = unsafe { std::slice::from_raw_parts(argv, argc.max(0) as usize) };
                    let result = std::panic::catch_unwind(move || {
                        let mut _next = args.iter();
                        $(
                            let $arg = match _next.next() {
                                // SAFETY: an argument term of this call, valid in the env.
                                Some(&raw) => unsafe { rustler::Term::new($env, raw) }.decode()?,
                                None => return Err(rustler::Error::BadArg),
                            };
                        )*
                        let mut budget = $crate::failure::Budget::normal();
                        let outcome = $f $(::<$g>)? ($($pass,)? $($arg,)* &mut budget);
                        $crate::failure::report_timeslice($env, &budget);
                        Ok::<_, rustler::Error>(outcome?)
                    });
                    // SAFETY: `result` belongs to this call's env.
                    unsafe { rustler::codegen_runtime::handle_nif_result(result, $env).apply($env) }
                }
                $name
            },
        });
    };
}
pub(crate) use raw_nif;

/// Declares a NIF on a normal scheduler and its `_dirty` twin on a dirty CPU
/// scheduler, both calling `f(args..., budget)` (or `f::<T>(...)`) with the matching [`Budget`]; with
/// the feature `work-probes` (test builds) also a `_probe` NIF that runs the
/// normal-scheduler version and reports, instead of its result, how it ended and
/// the work it charged and counted (see `probe_report`).
/// (Parameters and return type are passed as plain tokens: rustler's `nif`
/// attribute does not accept the grouped `ty` fragments of `macro_rules`.)
macro_rules! twin_nifs {
    // With the env first: written here, since rustler re-creates that parameter.
    ($normal:ident, $dirty:ident, $probe:ident => $f:ident $(::<$g:ty>)? (env $(, $arg:ident)*),
     <$lt:lifetime>($($params:tt)*) -> [$($ret:tt)+]) => {
        $crate::failure::raw_nif!($normal, env => $f $(::<$g>)? ($($arg),*));

        #[rustler::nif(schedule = "DirtyCpu")]
        fn $dirty<$lt>(env: rustler::Env<$lt>, $($params)*) -> rustler::NifResult<$($ret)+> {
            Ok($f $(::<$g>)? (env, $($arg,)* &mut $crate::failure::Budget::dirty())?)
        }

        #[cfg(feature = "work-probes")]
        #[rustler::nif]
        fn $probe<$lt>(env: rustler::Env<$lt>, $($params)*) -> rustler::Term<$lt> {
            let _ = hrw_core::work::take();
            let outcome = $f $(::<$g>)? (env, $($arg,)* &mut $crate::failure::Budget::normal());
            $crate::failure::probe_report(env, outcome)
        }
    };
    // Without the env, with a lifetime.
    ($normal:ident, $dirty:ident, $probe:ident => $f:ident $(::<$g:ty>)? ($($arg:ident),*),
     <$lt:lifetime>($($params:tt)*) -> [$($ret:tt)+]) => {
        $crate::failure::raw_nif!($normal, $f $(::<$g>)? ($($arg),*));

        #[rustler::nif(schedule = "DirtyCpu")]
        fn $dirty<$lt>($($params)*) -> rustler::NifResult<$($ret)+> {
            Ok($f $(::<$g>)? ($($arg,)* &mut $crate::failure::Budget::dirty())?)
        }

        #[cfg(feature = "work-probes")]
        #[rustler::nif]
        fn $probe<$lt>(env: rustler::Env<$lt>, $($params)*) -> rustler::Term<$lt> {
            let _ = hrw_core::work::take();
            let outcome = $f $(::<$g>)? ($($arg,)* &mut $crate::failure::Budget::normal());
            $crate::failure::probe_report(env, outcome)
        }
    };
    // Without the env or a lifetime.
    ($normal:ident, $dirty:ident, $probe:ident => $f:ident $(::<$g:ty>)? ($($arg:ident),*),
     ($($params:tt)*) -> [$($ret:tt)+]) => {
        $crate::failure::raw_nif!($normal, $f $(::<$g>)? ($($arg),*));

        #[rustler::nif(schedule = "DirtyCpu")]
        fn $dirty($($params)*) -> rustler::NifResult<$($ret)+> {
            Ok($f $(::<$g>)? ($($arg,)* &mut $crate::failure::Budget::dirty())?)
        }

        #[cfg(feature = "work-probes")]
        #[rustler::nif]
        fn $probe<'probe>(env: rustler::Env<'probe>, $($params)*) -> rustler::Term<'probe> {
            let _ = hrw_core::work::take();
            let outcome = $f $(::<$g>)? ($($arg,)* &mut $crate::failure::Budget::normal());
            $crate::failure::probe_report(env, outcome)
        }
    };
}
pub(crate) use twin_nifs;
