//! Errors as values: a [`Failure`] is what went wrong inside a call (a status and words
//! naming the argument or field); at the boundary it becomes a status and, when the
//! caller asked for one, a [`GpolError`]. Room asked for by a count the caller gave is
//! taken through [`reserve`], so that too much is a `Failure`, never an abort.

use crate::types::GpolStatus;
use std::ffi::{CStr, CString};

/// Why a call failed: its status, and a message naming the argument or field at fault
/// (`nodes[3].labels[1].key: not UTF-8 (at byte 2)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub status: GpolStatus,
    /// The path to the field at fault, outermost first (empty: the call as a whole).
    path: Vec<String>,
    what: String,
}

impl Failure {
    pub fn new(status: GpolStatus, what: impl Into<String>) -> Failure {
        Failure { status, path: Vec::new(), what: what.into() }
    }

    pub fn null() -> Failure {
        Failure::new(GpolStatus::NullPointer, "is NULL")
    }

    pub fn invalid(what: impl Into<String>) -> Failure {
        Failure::new(GpolStatus::InvalidArgument, what)
    }

    pub fn too_large(what: impl Into<String>) -> Failure {
        Failure::new(GpolStatus::TooLarge, what)
    }

    pub fn refused(what: impl Into<String>) -> Failure {
        Failure::new(GpolStatus::Refused, what)
    }

    /// The failure was in `field` of what the caller is reading: the path grows outward.
    pub fn at(mut self, field: impl Into<String>) -> Failure {
        self.path.insert(0, field.into());
        self
    }

    pub fn message(&self) -> String {
        if self.path.is_empty() {
            return self.what.clone();
        }
        // `nodes[3]` + `labels[1]` + `key`: indices join without a dot.
        let mut path = String::new();
        for p in &self.path {
            if !path.is_empty() && !p.starts_with('[') {
                path.push('.');
            }
            path.push_str(p);
        }
        format!("{path}: {}", self.what)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message())
    }
}

/// An error as C holds it (opaque): its status and message. Freed by `gpol_error_free`.
#[derive(Debug)]
pub struct GpolError {
    pub status: GpolStatus,
    pub message: CString,
}

impl GpolError {
    pub fn from_failure(f: &Failure) -> GpolError {
        GpolError { status: f.status, message: c_string(&f.message()) }
    }

    pub fn message(&self) -> &CStr {
        &self.message
    }
}

/// Room for `n` more items in `v`, or `GPOL_STATUS_TOO_LARGE`: an allocation sized by
/// a count the caller gave fails the call when memory is short, never aborts the
/// process.
pub fn reserve<T>(v: &mut Vec<T>, n: usize) -> Result<(), Failure> {
    v.try_reserve_exact(n).map_err(|e| Failure::too_large(format!("{n} items: {e}")))
}

/// Text as a C string; NUL characters (which C strings cannot hold) become U+FFFD.
pub fn c_string(text: &str) -> CString {
    let clean = if text.contains('\0') { text.replace('\0', "\u{FFFD}") } else { text.to_string() };
    CString::new(clean).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_outermost_first() {
        let f = Failure::null().at("key").at("[1]").at("labels").at("[3]").at("nodes");
        assert_eq!(f.message(), "nodes[3].labels[1].key: is NULL");
        assert_eq!(Failure::invalid("bad").message(), "bad");
    }

    #[test]
    fn room_the_allocator_cannot_give_is_too_large_never_an_abort() {
        let mut v: Vec<u64> = Vec::new();
        // More than a `Vec` can count, and more than any allocator gives (an exabyte).
        for n in [usize::MAX / 4, (isize::MAX as usize) / 8 - 1] {
            let f = reserve(&mut v, n).expect_err("no such room");
            assert_eq!(f.status, GpolStatus::TooLarge);
            assert!(f.message().starts_with(&format!("{n} items: ")), "{}", f.message());
        }
        assert!(reserve(&mut v, 3).is_ok() && v.capacity() >= 3);
    }

    #[test]
    fn nul_characters_do_not_cut_messages() {
        assert_eq!(c_string("a\0b").to_str().unwrap(), "a\u{FFFD}b");
    }
}
