//! The id and label grammar of PROTOCOL.md §3.
//!
//! `edge_id`, `node_id` and `provider_id` match `[A-Za-z0-9._-]{1,128}`; label keys and
//! values match `[A-Za-z0-9._/-]{1,63}`.

pub use crate::limits::{MAX_ID_LEN, MAX_LABEL_LEN};

/// Why a string is not a valid id or label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// The string is empty.
    #[error("{what} is empty")]
    Empty {
        /// What was being checked ("edge_id", "label key", ...).
        what: &'static str,
    },
    /// The string is longer than allowed.
    #[error("{what} is {len} bytes long, more than the {max} allowed")]
    TooLong {
        /// What was being checked.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The string holds a character outside the grammar.
    #[error("{what} holds a character outside {allowed} at byte {at}")]
    BadChar {
        /// What was being checked.
        what: &'static str,
        /// Byte offset of the first bad character.
        at: usize,
        /// The allowed set, for the message.
        allowed: &'static str,
    },
}

fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

fn is_label_byte(b: u8) -> bool {
    is_id_byte(b) || b == b'/'
}

fn check(
    what: &'static str,
    s: &str,
    max: usize,
    allowed: &'static str,
    ok: fn(u8) -> bool,
) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty { what });
    }
    if s.len() > max {
        return Err(IdError::TooLong {
            what,
            len: s.len(),
            max,
        });
    }
    match s.bytes().position(|b| !ok(b)) {
        Some(at) => Err(IdError::BadChar { what, at, allowed }),
        None => Ok(()),
    }
}

/// Checks an `edge_id`, `node_id`, `provider_id` (or any other id) against
/// `[A-Za-z0-9._-]{1,128}`; `what` names it in the error.
pub fn validate_id(what: &'static str, id: &str) -> Result<(), IdError> {
    check(what, id, MAX_ID_LEN, "[A-Za-z0-9._-]", is_id_byte)
}

/// Checks a label key or value against `[A-Za-z0-9._/-]{1,63}`; `what` names it in the
/// error.
pub fn validate_label(what: &'static str, s: &str) -> Result<(), IdError> {
    check(what, s, MAX_LABEL_LEN, "[A-Za-z0-9._/-]", is_label_byte)
}

/// True when `id` matches the id grammar.
pub fn is_valid_id(id: &str) -> bool {
    validate_id("id", id).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_grammar() {
        assert!(is_valid_id("edge-1.a_B"));
        assert!(is_valid_id(&"x".repeat(128)));
        assert_eq!(
            validate_id("edge_id", &"x".repeat(129)),
            Err(IdError::TooLong {
                what: "edge_id",
                len: 129,
                max: 128
            })
        );
        assert_eq!(
            validate_id("edge_id", ""),
            Err(IdError::Empty { what: "edge_id" })
        );
        assert!(matches!(
            validate_id("node_id", "a/b"),
            Err(IdError::BadChar { at: 1, .. })
        ));
        assert!(!is_valid_id("é"));
        assert!(!is_valid_id("a\u{0}b"));
    }

    #[test]
    fn labels_allow_slash_and_stop_at_63() {
        assert!(validate_label("label key", "team/a").is_ok());
        assert!(validate_label("label key", &"k".repeat(63)).is_ok());
        assert!(validate_label("label key", &"k".repeat(64)).is_err());
        assert!(validate_label("label value", "a=b").is_err());
    }
}
