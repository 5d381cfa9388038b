//! Weighted nodes `{node, weight}`: decoding, and the weighted score NIF.

use crate::budget::{Budget, Outcome};
use crate::errors::bad_arg;
use crate::nif::nif;
use crate::term_id::term_id;
use hrw_core::n3;
use hrw_core::weighted::{valid_weight, Standing, Weight};
use rustler::{Binary, Encoder, Env, Term, TermType};

/// Splits `{node, weight}` into the node term, the weight as a binary64, and the
/// weight term as given. Weights are integers or floats in `(0, 2^53]`, exactly:
/// an integer above 2^53 is refused even when it would round to 2^53.
pub fn decode_weighted<'a>(entry: Term<'a>) -> Outcome<(Term<'a>, f64, Term<'a>)> {
    // Read in place: an entry may be a huge tuple, which must not be copied first.
    let fields = match crate::tuple_view::TupleView::of(entry) {
        Some(t) if t.len() == 2 => [t.get(0), t.get(1)].map(|f| f.expect("arity 2")),
        _ => {
            return bad_arg(format!(
                "weighted nodes must be {{node, weight}} tuples, got: {}",
                describe(entry)
            ))
        }
    };
    let term = fields[1];
    let weight = match term.get_type() {
        TermType::Integer => match term.decode::<i64>() {
            Ok(i) if i > 0 && i <= 1 << 53 => Some(i as f64),
            Ok(i) => (i <= 0).then_some(0.0),
            // Outside 64 bits: below 0 or far above 2^53.
            Err(_) => (term < 0i64.encode(term.get_env())).then_some(0.0),
        },
        TermType::Float => term.decode::<f64>().ok(),
        _ => {
            return bad_arg(format!("weight must be a number, got: {}", describe(term)));
        }
    };
    match weight {
        Some(w) if valid_weight(w) => Ok((fields[0], w, term)),
        Some(w) if w.is_nan() || w <= 0.0 => {
            bad_arg(format!("weight must be positive, got: {}", describe(term)))
        }
        _ => bad_arg(format!(
            "weight must be at most 2^53 (9007199254740992), got: {}",
            describe(term)
        )),
    }
}

/// A short description of `term` for an error message, in bounded time. Terms are
/// never printed whole: `{:?}` converts a bignum to decimal in quadratic time on
/// the calling scheduler, and would walk every element of a large compound term.
fn describe(term: Term) -> String {
    match term.get_type() {
        TermType::Integer if term.decode::<i64>().is_ok() => format!("{term:?}"),
        TermType::Integer => "an integer outside the 64-bit range".to_string(),
        TermType::Float => match term.decode::<f64>() {
            Ok(f) => exact_float(f),
            Err(_) => "a float".to_string(),
        },
        // An atom name holds up to 255 characters (over 1 KB of UTF-8).
        TermType::Atom => shown(format!("{term:?}")),
        TermType::Binary => match Binary::from_term(term) {
            Ok(bin) if bin.len() <= SHOWN_BYTES => format!("{term:?}"),
            Ok(bin) => format!("a binary of {} bytes", bin.len()),
            Err(_) => "a bitstring".to_string(),
        },
        TermType::Tuple => match crate::tuple_view::TupleView::of(term) {
            Some(fields) => format!("a tuple of {} elements", fields.len()),
            None => "a tuple".to_string(),
        },
        TermType::List => "a list".to_string(),
        TermType::Map => "a map".to_string(),
        TermType::Pid => "a pid".to_string(),
        TermType::Port => "a port".to_string(),
        TermType::Ref => "a reference".to_string(),
        TermType::Fun => "a fun".to_string(),
        TermType::Unknown => "a term of an unknown type".to_string(),
    }
}

/// A float exactly, as Elixir's `inspect/1` shows it: the shortest decimal that
/// reads back as the same binary64 (2^53 + 2 is `9007199254740994.0`, where the
/// term's `{:?}` printed `9.007199e+15`, which reads as 2^53), with `.0` before an
/// exponent (`5.0e-324`).
fn exact_float(f: f64) -> String {
    let s = format!("{f:?}");
    match s.split_once('e') {
        Some((m, e)) if !m.contains('.') => format!("{m}.0e{e}"),
        _ => s,
    }
}

/// Longest text shown whole in a message, in bytes (as `HRW.brief/1`).
const SHOWN_BYTES: usize = 64;

/// `text` when at most [`SHOWN_BYTES`] long, else its first characters (cut at a
/// character boundary, so it stays UTF-8) and `...`.
fn shown(mut text: String) -> String {
    if text.len() > SHOWN_BYTES {
        let mut at = SHOWN_BYTES;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push_str("...");
    }
    text
}

/// The weighted standing as one integer where higher wins, ordered exactly as owners
/// are chosen (docs/HASHING.md §3): `(2^64 - 1 - cost key)·2^64 + N3 score`.
fn score(_env: Env, key: Term, entry: Term, budget: &mut Budget) -> Outcome<u128> {
    let (node, weight, _) = decode_weighted(entry)?;
    let k = n3::prep(term_id(key, budget)?);
    let st = Standing::new(n3::score(k, term_id(node, budget)?), Weight::new(weight));
    Ok(!st.rank())
}

nif!(WEIGHTED_SCORE: "weighted_score" => score(env, key, entry));
