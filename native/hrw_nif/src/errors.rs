//! How a NIF says no. Bad input raises `ArgumentError` with a message that names
//! the problem; a resource that cannot be used in this VM raises the atom
//! `:hrw_stale_resource`, and the Elixir side rebuilds the struct and calls again.
//! Work too large for a normal scheduler ([`Failure::NeedsDirty`], asked for
//! through the budget, budget.rs) never reaches Elixir: the NIF wrapper (nif.rs)
//! moves the call to a dirty scheduler.
//!
//! Only the rooms that build an error import this one; the others pass failures
//! on with `?` in the budget's `Outcome`.

use rustler::{Encoder, Env, Term};

pub enum Failure {
    /// The normal-scheduler budget ran out: the call moves to a dirty scheduler.
    NeedsDirty,
    /// Invalid input; the message is shown to the user.
    BadArg(String),
    /// A resource term that no longer decodes (sent to another node, or its
    /// resource is gone); the Elixir struct rebuilds it from its node list.
    StaleResource,
}

/// A budget that ran out (`hrw_core::cost::Budget`) asks for a dirty scheduler.
impl From<hrw_core::cost::NeedsDirty> for Failure {
    #[inline(always)]
    fn from(_: hrw_core::cost::NeedsDirty) -> Failure {
        Failure::NeedsDirty
    }
}

impl Failure {
    /// Whether the budget ran out (the call then moves to a dirty scheduler).
    pub fn needs_dirty(&self) -> bool {
        matches!(self, Failure::NeedsDirty)
    }
}

/// Refuses bad input with `message`, shown to the user in an `ArgumentError`.
pub fn bad_arg<T>(message: impl Into<String>) -> Result<T, Failure> {
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

impl Failure {
    /// The term the NIF raises for this failure (nif.rs, `raise`).
    pub fn reason<'a>(self, env: Env<'a>) -> Term<'a> {
        match self {
            Failure::NeedsDirty => atoms::hrw_needs_dirty().encode(env),
            Failure::BadArg(message) => ArgumentError(message).encode(env),
            Failure::StaleResource => atoms::hrw_stale_resource().encode(env),
        }
    }
}
