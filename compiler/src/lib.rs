//! The gpol compiler: source text in, a compiled policy out.
//!
//! [`load`] is the way in for every consumer: the one pipeline that reads, checks,
//! lowers once, analyses and compiles a policy. Stages, each in its own module:
//! [`parse`] (text → [`syntax`]), [`check`] (names, modules, types, units and semantic
//! rules → [`hir`]), [`analyse`] (lowered by [`lower`] to the typed [`ir`], then sized,
//! costed by [`cost`] and proved free of eviction cycles by [`cycles`]), and [`engine`],
//! which builds one of the two engines from that IR: [`interp`] (the reference) or
//! [`jit`] (Cranelift), both behind [`eval`]'s `Engine` trait. [`fmt`] prints a syntax
//! tree canonically. [`schema`] is the one definition of what rules can see; [`spec`] the
//! one description of a job and a node.

pub mod analyse;
pub mod budget;
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
mod kinds;
pub mod limits;
pub mod load;
pub mod lower;
pub mod mig;
pub mod models;
pub mod never;
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
