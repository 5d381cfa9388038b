//! Why a term has no id: the term walk's errors, each message written once.

use crate::errors::Failure;

/// A term the VM would not let us read as what it is.
pub(super) fn unreadable(what: &str) -> Failure {
    Failure::BadArg(format!("could not read {what} term"))
}

/// A term of a type the VM does not name.
pub(super) fn unknown_type() -> Failure {
    Failure::BadArg("term of an unknown type cannot be hashed".to_string())
}

/// A term nested deeper than `max_depth` levels.
pub(super) fn too_deep(max_depth: usize) -> Failure {
    Failure::BadArg(format!(
        "term nested deeper than {max_depth} levels cannot be hashed"
    ))
}

/// A term the VM could not encode in its external term format.
pub(super) fn unencodable() -> Failure {
    Failure::BadArg("could not encode term (out of memory?)".to_string())
}
