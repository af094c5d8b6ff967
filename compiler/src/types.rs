//! Types of checked expressions.

use crate::schema::{EnumKind, FieldTy, Record};
use crate::units::Dim;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Num(Dim),
    Bool,
    Str,
    Enum(EnumKind),
    Record(Record),
    /// `queue.attr`: the custom attributes declared in the queue tree.
    Attrs,
    List(Box<Ty>),
    /// A lookup table: `labels` (string → string) or MIG counts (profile → number).
    Map(Box<Ty>, Box<Ty>),
    Optional(Box<Ty>),
    /// The type of an expression that already has an error; never reported again.
    Error,
}

impl Ty {
    pub const NUMBER: Ty = Ty::Num(Dim::NONE);

    pub(crate) fn from_field(ty: FieldTy, optional: bool) -> Ty {
        let t = match ty {
            FieldTy::Num(d) => Ty::Num(d),
            FieldTy::Bool => Ty::Bool,
            FieldTy::Str => Ty::Str,
            FieldTy::Enum(e) => Ty::Enum(e),
            FieldTy::Record(r) => Ty::Record(r),
            FieldTy::List(r) => Ty::List(Box::new(Ty::Record(r))),
            FieldTy::StrList => Ty::List(Box::new(Ty::Str)),
            FieldTy::Labels => Ty::Map(Box::new(Ty::Str), Box::new(Ty::Str)),
            FieldTy::MigCounts => Ty::Map(Box::new(Ty::Enum(EnumKind::MigProfile)), Box::new(Ty::NUMBER)),
        };
        if optional { Ty::Optional(Box::new(t)) } else { t }
    }

    pub(crate) fn is_error(&self) -> bool {
        matches!(self, Ty::Error)
    }

    pub(crate) fn dim(&self) -> Option<Dim> {
        match self {
            Ty::Num(d) => Some(*d),
            _ => None,
        }
    }

    /// Whether a value of this type may stand where `want` is expected.
    pub(crate) fn fits(&self, want: &Ty) -> bool {
        self == want || self.is_error() || want.is_error()
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Num(d) => write!(f, "{d}"),
            Ty::Bool => f.write_str("bool"),
            Ty::Str => f.write_str("string"),
            Ty::Enum(e) => f.write_str(e.name()),
            Ty::Record(r) => f.write_str(r.name()),
            Ty::Attrs => f.write_str("queue attributes"),
            Ty::List(t) if t.is_error() => f.write_str("list"),
            Ty::List(t) => write!(f, "list[{t}]"),
            Ty::Map(k, v) if **k == Ty::Str => write!(f, "labels of {v}"),
            Ty::Map(k, v) => write!(f, "{v} per {k}"),
            Ty::Optional(t) => write!(f, "optional {t}"),
            Ty::Error => f.write_str("{unknown}"),
        }
    }
}
