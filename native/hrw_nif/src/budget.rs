//! The work budget of a normal-scheduler call: what it may spend before it must
//! move to a dirty scheduler, charged before the work is done, and [`Outcome`],
//! what every step of a NIF returns.
//!
//! Its size and every charge come from the cost model, `hrw_core::cost`. Test
//! builds count the work actually done beside each charge, and
//! test/hrw/budget_test.exs checks that every call charged at least what it did.

use crate::errors::Failure;
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
    let spent = NORMAL_BUDGET.saturating_sub(budget.remaining);
    let percent = cost::timeslice_percent(spent);
    if percent > 0 {
        rustler::schedule::consume_timeslice(env, percent.min(100) as i32);
    }
}

/// Work allowed before a normal-scheduler call gives up and asks for a dirty one;
/// dirty calls are unlimited.
pub struct Budget {
    remaining: u64,
    limited: bool,
    /// Bytes of the binaries whose ids were computed under this budget: what the
    /// VM then hashes or compares when such a term becomes a map key (batch.rs).
    binary_bytes: u64,
}

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

    /// Spend `units`, failing with `NeedsDirty` when a normal call runs out.
    #[inline]
    pub fn charge(&mut self, units: u64) -> Outcome<()> {
        if self.limited {
            if units > self.remaining {
                return needs_dirty();
            }
            self.remaining -= units;
            hrw_core::work::charged(units);
        }
        Ok(())
    }
}
