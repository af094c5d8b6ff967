//! The gpol compiler: source text in, a compiled policy out.
//!
//! [`load`] is the way in for every consumer: it reads, checks and compiles a policy.
//! Stages, each in its own module: [`parse`] (text → [`syntax`]), [`check`] (names,
//! modules, types, units and semantic rules → [`hir`]), [`lower`] (→ the typed [`ir`]),
//! and the two engines behind [`engine`]: [`interp`] (the reference) and [`jit`]
//! (Cranelift). [`fmt`] prints a syntax tree canonically. [`schema`] is the one definition
//! of what rules can see; [`spec`] the one description of a job and a node.

pub mod check;
pub mod clock;
pub mod cost;
pub mod cycles;
pub mod diag;
pub mod engine;
pub mod eval;
pub mod files;
pub mod fmt;
pub mod fold;
pub mod fuzzy;
pub mod hir;
pub mod interp;
pub mod ir;
pub mod jit;
pub mod limits;
pub mod load;
pub mod lower;
pub mod mig;
pub mod models;
mod never;
pub mod ops;
pub mod parse;
pub mod schema;
pub mod source;
pub mod spec;
pub mod stdlib;
pub mod syntax;
pub mod synthetic;
pub mod terminal;
pub mod types;
pub mod units;
pub mod window;
