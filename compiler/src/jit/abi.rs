//! The binary interface between Rust and generated code: what the entry points take.
//! Native code reads these `#[repr(C)]` structs by offset; the offsets come from
//! `offset_of!`, here, and nowhere else.

use crate::eval::{Ctx, NodeResult};
use crate::ir::AttrValue;
use crate::schema::{ClusterRec, DomainRec, QueueRec, Sym};
use std::mem::offset_of;

/// The evaluation context as generated code sees it: raw pointers and lengths, so every
/// table read can be bounds-checked against the length the runtime provided.
#[repr(C)]
pub struct CtxRepr {
    pub cluster: *const ClusterRec<'static>,
    pub queues: *const QueueRec,
    pub n_queues: usize,
    pub domains: *const DomainRec,
    pub n_domains: usize,
    pub literals: *const Sym,
    pub n_literals: usize,
    pub sym_hashes: *const u64,
    pub n_hashes: usize,
    /// `attrs[queue * n_attrs + attr]`, as bits (see `attr_bits`).
    pub attrs: *const u64,
    pub n_attr_rows: usize,
    pub n_attrs: usize,
    /// Stand-ins for out-of-range queue and domain indices: every field zero.
    pub zero_queue: *const QueueRec,
    pub zero_domain: *const DomainRec,
}

pub const CTX_CLUSTER: i32 = offset_of!(CtxRepr, cluster) as i32;
pub const CTX_QUEUES: i32 = offset_of!(CtxRepr, queues) as i32;
pub const CTX_N_QUEUES: i32 = offset_of!(CtxRepr, n_queues) as i32;
pub const CTX_DOMAINS: i32 = offset_of!(CtxRepr, domains) as i32;
pub const CTX_N_DOMAINS: i32 = offset_of!(CtxRepr, n_domains) as i32;
pub const CTX_LITERALS: i32 = offset_of!(CtxRepr, literals) as i32;
pub const CTX_N_LITERALS: i32 = offset_of!(CtxRepr, n_literals) as i32;
pub const CTX_SYM_HASHES: i32 = offset_of!(CtxRepr, sym_hashes) as i32;
pub const CTX_N_HASHES: i32 = offset_of!(CtxRepr, n_hashes) as i32;
pub const CTX_ATTRS: i32 = offset_of!(CtxRepr, attrs) as i32;
pub const CTX_N_ATTR_ROWS: i32 = offset_of!(CtxRepr, n_attr_rows) as i32;
pub const CTX_N_ATTRS: i32 = offset_of!(CtxRepr, n_attrs) as i32;
pub const CTX_ZERO_QUEUE: i32 = offset_of!(CtxRepr, zero_queue) as i32;
pub const CTX_ZERO_DOMAIN: i32 = offset_of!(CtxRepr, zero_domain) as i32;

pub const OUT_FEASIBLE: i32 = offset_of!(NodeResult, feasible) as i32;
pub const OUT_REJECTED_BY: i32 = offset_of!(NodeResult, rejected_by) as i32;
pub const OUT_TIERS: i32 = offset_of!(NodeResult, tiers) as i32;
pub const OUT_SCORE: i32 = offset_of!(NodeResult, score) as i32;
pub const OUT_FAULTS: i32 = offset_of!(NodeResult, faults) as i32;
pub(crate) const OUT_SIZE: i64 = std::mem::size_of::<NodeResult>() as i64;

/// An attribute value as 64 bits: numbers as their IEEE bits, booleans and enums as
/// integers, strings as the literal index plus one; absent values as zero bits.
pub(crate) fn attr_bits(v: AttrValue) -> u64 {
    match v {
        AttrValue::Absent => 0,
        AttrValue::Num(x) => x.to_bits(),
        AttrValue::Bool(b) => u64::from(b),
        AttrValue::Str(i) => u64::from(i) + 1,
        AttrValue::Enum(e) => u64::from(e),
    }
}

/// The context of one call, viewed through raw pointers for generated code.
pub(crate) fn ctx_repr(
    ctx: &Ctx<'_>,
    attrs: &[u64],
    n_attrs: usize,
    zero_queue: &QueueRec,
    zero_domain: &DomainRec,
) -> CtxRepr {
    CtxRepr {
        cluster: (ctx.cluster as *const ClusterRec<'_>).cast(),
        queues: ctx.queues.as_ptr(),
        n_queues: ctx.queues.len(),
        domains: ctx.domains.as_ptr(),
        n_domains: ctx.domains.len(),
        literals: ctx.literals.as_ptr(),
        n_literals: ctx.literals.len(),
        sym_hashes: ctx.sym_hashes.as_ptr(),
        n_hashes: ctx.sym_hashes.len(),
        attrs: attrs.as_ptr(),
        n_attr_rows: attrs.len().checked_div(n_attrs).unwrap_or(0),
        n_attrs,
        zero_queue,
        zero_domain,
    }
}

/// Transcendental functions generated code calls (D1: `libm` in both engines).
pub(crate) extern "C" fn gpol_exp2(x: f64) -> f64 {
    crate::ops::exp2(x)
}

pub(crate) extern "C" fn gpol_log(x: f64) -> f64 {
    crate::ops::log(x)
}

pub(crate) extern "C" fn gpol_pow(x: f64, y: f64) -> f64 {
    crate::ops::pow(x, y)
}
