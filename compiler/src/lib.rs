//! The gpol compiler: source text in, a checked and typed policy out.
//!
//! Stages, each in its own module: [`parse`] (text → [`syntax`]), [`resolve`] (names and
//! modules), [`check`] (types, units and semantic rules → [`hir`]); [`fmt`] prints a syntax
//! tree canonically. [`schema`] is the one definition of what rules can see.

pub mod check;
pub mod diag;
pub mod engine;
pub mod fmt;
pub mod fold;
pub mod fuzzy;
pub mod hir;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod lower;
pub mod ops;
pub mod parse;
pub mod schema;
pub mod source;
pub mod stdlib;
pub mod syntax;
pub mod synthetic;
pub mod types;
pub mod units;
