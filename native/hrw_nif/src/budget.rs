//! The work budget of a normal-scheduler call: what it may spend before it must
//! move to a dirty scheduler, charged before the work is done.
//!
//! Units are those of `hrw_core::work` (rough nanoseconds of warm work). Test
//! builds count the work actually done beside each charge, and
//! test/hrw/budget_test.exs checks that every call charged at least what it did.

use crate::errors::{Failure, Outcome};
use rustler::Env;

/// The whole budget of one normal-scheduler call. A NIF call on a normal
/// scheduler should stay well under ~1 ms, and a first, cache-cold pass over a
/// list costs more than the warm work the units stand for, so the budget is less
/// than half of that. `mix hrw.stalls` (bench/results/hrw.stalls-2026-12-01.txt)
/// measures the worst normal-scheduler stall of every public function at the
/// largest input this budget lets through.
pub const NORMAL_BUDGET: u64 = 400_000;

/// Units in 1% of a scheduler's time slice: the whole budget is one slice.
const UNITS_PER_TIMESLICE_PERCENT: u64 = NORMAL_BUDGET / 100;

/// Tells the scheduler how much of its time slice the normal-scheduler call that
/// just ended used (the units its budget spent), so a process that calls such NIFs
/// back to back is scheduled out as if it ran Erlang code; without it each NIF
/// call counts as one reduction (test/hrw/budget_test.exs, "reports it to the
/// scheduler"). Calls under 1% report nothing (the hot path is one subtraction and
/// one compare).
#[inline(always)]
pub fn report_timeslice(env: Env, budget: &Budget) {
    let spent = NORMAL_BUDGET.saturating_sub(budget.remaining);
    let percent = spent / UNITS_PER_TIMESLICE_PERCENT;
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
