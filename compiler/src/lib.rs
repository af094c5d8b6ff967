//! The gpol compiler: source text in, a checked and typed policy out.
//!
//! Stages, each in its own module: [`parse`] (text → [`syntax`]), [`resolve`] (names and
//! modules), [`check`] (types, units and semantic rules → [`hir`]); [`fmt`] prints a syntax
//! tree canonically. [`schema`] is the one definition of what rules can see.

pub mod diag;
pub mod fuzzy;
pub mod parse;
pub mod schema;
pub mod source;
pub mod syntax;
pub mod units;
