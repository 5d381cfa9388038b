//! The work budget of a NIF call as the glue uses it: the [`Budget`] itself
//! (`hrw_core::cost`, beside every figure it is charged with: a step pays with
//! one call, `budget.pay(units)?`, which charges and, in test builds, counts),
//! [`Outcome`], what every step of a NIF returns, and the report of a call's
//! spending to the scheduler. test/hrw/budget_test.exs checks that every call
//! charged at least the work it did.

use crate::errors::Failure;
pub use hrw_core::cost::Budget;
use hrw_core::cost::{self, NORMAL_BUDGET};
use rustler::Env;

/// What every step of a NIF returns (each runs under a budget): its value, or why
/// the call stops: its budget ran out ([`needs_dirty`]: the NIF wrapper runs it
/// again on a dirty scheduler), or an error for the caller (errors.rs).
pub type Outcome<T> = Result<T, Failure>;

/// The answer of a normal-scheduler step that asks for a dirty scheduler before
/// doing its work (work that would not fit, or whose size is known only once done).
#[inline]
pub fn needs_dirty<T>() -> Outcome<T> {
    Err(Failure::NeedsDirty)
}

/// Tells the scheduler how much of its time slice the normal-scheduler call that
/// just ended used (the units its budget spent), so a process that calls such NIFs
/// back to back is scheduled out as if it ran Erlang code; without it each NIF
/// call counts as one reduction (test/hrw/budget_test.exs, "reports it to the
/// scheduler"). Calls under 1% report nothing (the hot path is one subtraction and
/// one compare).
#[inline(always)]
pub fn report_timeslice(env: Env, budget: &Budget) {
    let spent = NORMAL_BUDGET.saturating_sub(budget.remaining());
    let percent = cost::timeslice_percent(spent);
    if percent > 0 {
        rustler::schedule::consume_timeslice(env, percent.min(100) as i32);
    }
}
