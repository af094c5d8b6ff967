//! The gpol compiler: source text in, a compiled policy out.
//!
//! [`load`] is the way in for every consumer: the one pipeline that reads, checks,
//! lowers once, analyses and compiles a policy. What it gives, and the choice of engine,
//! are named at the root: [`Checked`], [`CheckedPolicy`], [`Failed`], [`LoadError`],
//! [`compile_file`], [`compile_text`], [`CompiledPolicy`], [`Engine`], [`EngineKind`].
//!
//! Stages, each in its own module: [`parse`] (text → [`syntax`]), [`check`] (names,
//! modules, types, units and semantic rules → [`hir`]), [`analyse`] (lowered by
//! [`lower`] to the typed [`ir`], then sized, costed by [`cost`] and proved free of
//! eviction cycles by [`eviction_proof`]), and [`engine`], which builds one of the two engines
//! from that IR: [`interp`] (the reference) or [`jit`] (Cranelift). [`fmt`] prints a
//! syntax tree canonically. [`schema`] is the one definition of what rules can see;
//! [`spec`] the one description of a job and a node.
//!
//! A stage is public where another crate builds on it or this crate's tests run it
//! alone; its documentation says which. Constant folding, the compile-time budget, the
//! standard library's sources, and the two leaves the stages share (what an engine
//! answers, named through [`engine`]; the kinds of declaration, named through [`ir`])
//! are private. Items only this crate uses are `pub(crate)`.

#![warn(unreachable_pub)]

pub use engine::{CompiledPolicy, Engine, EngineKind};
pub use load::{Checked, CheckedPolicy, Failed, LoadError, compile_file, compile_text};

pub mod analyse;
mod budget;
pub mod check;
pub mod clock;
pub mod cost;
pub mod diag;
pub mod engine;
mod eval;
pub mod eviction_proof;
pub mod files;
pub mod fmt;
mod fold;
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
mod stdlib;
pub mod syntax;
pub mod synthetic;
pub mod terminal;
pub mod types;
pub mod units;
pub mod window;
