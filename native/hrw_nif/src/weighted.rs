//! Weighted nodes `{node, weight}`: decoding, and the weighted score NIF.

use crate::failure::{bad_arg, twin_nifs, Budget, Outcome};
use crate::term_id::term_id;
use hrw_core::n3;
use hrw_core::weighted::{valid_weight, Standing};
use rustler::{Binary, Term, TermType};

/// Weights above 2^53 would lose integer precision; nobody needs them.
const MAX_WEIGHT: f64 = 9_007_199_254_740_992.0;

/// Splits `{node, weight}` into the node term and a valid weight.
pub fn decode_weighted<'a>(entry: Term<'a>) -> Outcome<(Term<'a>, f64)> {
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
    let weight = if let Ok(i) = fields[1].decode::<i64>() {
        i as f64
    } else if let Ok(f) = fields[1].decode::<f64>() {
        f
    } else if fields[1].is_integer() {
        MAX_WEIGHT * 2.0
    } else {
        return bad_arg(format!(
            "weight must be a number, got: {}",
            describe(fields[1])
        ));
    };
    if !valid_weight(weight) {
        return bad_arg(format!(
            "weight must be positive, got: {}",
            describe(fields[1])
        ));
    }
    if weight > MAX_WEIGHT {
        return bad_arg(format!(
            "weight must be at most 2^53, got: {}",
            describe(fields[1])
        ));
    }
    Ok((fields[0], weight))
}

/// A short description of `term` for an error message, in bounded time. Terms are
/// never printed whole: `{:?}` converts a bignum to decimal in quadratic time on
/// the calling scheduler (2.5 s for a 2^1000000 weight, 40 s for 2^4000000), and
/// would walk every element of a large compound term.
fn describe(term: Term) -> String {
    const SHOWN_BYTES: usize = 64;
    match term.get_type() {
        TermType::Integer if term.decode::<i64>().is_ok() => format!("{term:?}"),
        TermType::Integer => "an integer outside the 64-bit range".to_string(),
        TermType::Float | TermType::Atom => format!("{term:?}"),
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

/// The weighted standing as a score where higher wins: `-cost`.
fn score(key: Term, entry: Term, mut budget: Budget) -> Outcome<f64> {
    let (node, weight) = decode_weighted(entry)?;
    let k = n3::prep(term_id(key, &mut budget)?);
    Ok(-Standing::new(n3::score(k, term_id(node, &mut budget)?), weight).cost)
}

twin_nifs!(weighted_score_normal, weighted_score_dirty, weighted_score_probe => score(key, entry),
    (key: Term, entry: Term) -> [f64]);
