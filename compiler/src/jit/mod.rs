//! The Cranelift backend: compiles a program to native code in memory and runs it.
//! This module and its `abi` are the only places that call generated code; every
//! `unsafe` block says why it is sound.
//!
//! Public for the C library, which links [`object`]'s output and checks its layout
//! against [`abi`] and the entry points' names in [`codegen`], and for this crate's
//! differential tests, which compile programs they generate.

#![allow(unsafe_code)]

pub mod abi;
pub mod codegen;
pub mod object;

use crate::eval::{Ctx, Engine, NodeResult};
use crate::ir::{Program, RuleId};
use crate::schema::{CardRec, DomainRec, JobRec, NodeRec, QueueRec};
use abi::CtxRepr;
use cranelift_codegen::CodegenError;
use cranelift_codegen::settings::{self, Configurable, SetError};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, ModuleError};
use std::sync::Arc;

type AdmitFn = unsafe extern "C" fn(*const CtxRepr, *const JobRec<'_>) -> i32;
type FilterScoreFn =
    unsafe extern "C" fn(*const CtxRepr, *const JobRec<'_>, *const NodeRec<'_>, usize, *mut NodeResult);
type CardScoreFn =
    unsafe extern "C" fn(*const CtxRepr, *const JobRec<'_>, *const NodeRec<'_>, *const CardRec, *mut u32) -> f64;
type QueueKeysFn = unsafe extern "C" fn(*const CtxRepr, u32, *mut f64);
type JobKeysFn = unsafe extern "C" fn(*const CtxRepr, *const JobRec<'_>, *mut f64);
type GangFn = unsafe extern "C" fn(*const CtxRepr, *const JobRec<'_>, u32) -> u8;
type VictimFn = unsafe extern "C" fn(*const CtxRepr, u32, *const JobRec<'_>, *const JobRec<'_>, *mut f64) -> u8;
type VictimKeysFn = unsafe extern "C" fn(*const CtxRepr, *const JobRec<'_>, *const JobRec<'_>, *mut f64);

/// The JIT module of one compiled policy, freed when the engine is dropped.
struct Code(Option<JITModule>);

impl Drop for Code {
    fn drop(&mut self) {
        if let Some(module) = self.0.take() {
            // SAFETY: the function pointers into this module live in the same `JitEngine`
            // as this `Code` and are dropped with it; no call can be running, because
            // calls borrow the engine and a value is not dropped while borrowed.
            unsafe { module.free_memory() };
        }
    }
}

// SAFETY: after `finalize_definitions` the module is never touched again until `Drop`,
// which has exclusive access; the finalized code is immutable.
unsafe impl Send for Code {}
// SAFETY: as above: shared references never reach the module.
unsafe impl Sync for Code {}

/// Native code for every entry point of a program.
pub struct JitEngine {
    program: Arc<Program>,
    /// Attribute values as bits, `[queue * n_attrs + attr]`.
    attrs: Vec<u64>,
    n_attrs: usize,
    zero_queue: QueueRec,
    zero_domain: DomainRec,
    admit: AdmitFn,
    filter_score: FilterScoreFn,
    card_score: CardScoreFn,
    queue_keys: QueueKeysFn,
    job_keys: JobKeysFn,
    gang: GangFn,
    victim: VictimFn,
    victim_keys: VictimKeysFn,
    _code: Code,
}

/// Why Cranelift could not compile a program: a bug in gpol (reported as a diagnostic by
/// the caller) or a machine Cranelift does not support, never a fault of the policy.
/// The words are Cranelift's.
#[derive(Debug)]
pub enum BackendError {
    /// Cranelift does not generate code for this machine.
    Host(&'static str),
    /// A code-generation setting was refused.
    Setting(SetError),
    /// The settings do not suit this machine's instruction set.
    Target(Box<CodegenError>),
    /// An entry point could not be defined: shown in full (`Debug`), as that carries
    /// the verifier's findings.
    Define(Box<ModuleError>),
    /// The module could not be built, finished or linked.
    Module(Box<ModuleError>),
    /// The object file could not be written.
    Emit(cranelift_object::object::write::Error),
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendError::Host(why) => write!(f, "this machine is not supported by Cranelift: {why}"),
            BackendError::Setting(e) => write!(f, "{e}"),
            BackendError::Target(e) => write!(f, "{e}"),
            BackendError::Define(e) => write!(f, "{e:?}"),
            BackendError::Module(e) => write!(f, "{e}"),
            BackendError::Emit(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BackendError {}

impl BackendError {
    fn module(e: ModuleError) -> BackendError {
        BackendError::Module(Box::new(e))
    }
}

/// The instruction set of this machine with `settings` (name, value), and the verifier on.
fn host_isa(settings: &[(&str, &str)]) -> Result<cranelift_codegen::isa::OwnedTargetIsa, BackendError> {
    let mut flags = settings::builder();
    for (name, value) in settings {
        flags.set(name, value).map_err(BackendError::Setting)?;
    }
    cranelift_native::builder()
        .map_err(BackendError::Host)?
        .finish(settings::Flags::new(flags))
        .map_err(|e| BackendError::Target(Box::new(e)))
}

/// Compiles a program. Errors are Cranelift's (a bug, reported as a diagnostic by the
/// caller), never a panic.
pub fn compile(program: Arc<Program>) -> Result<JitEngine, BackendError> {
    let isa = host_isa(&[
        ("opt_level", "speed"),
        ("use_colocated_libcalls", "false"),
        ("is_pic", "false"),
        // Always verify: a lowering bug must become an error, never wrong native code.
        // It costs about a fifth of compile time, well inside the budget.
        ("enable_verifier", "true"),
    ])?;
    let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    builder.symbol(codegen::HELPERS[0], abi::gpol_exp2 as *const u8);
    builder.symbol(codegen::HELPERS[1], abi::gpol_log as *const u8);
    builder.symbol(codegen::HELPERS[2], abi::gpol_pow as *const u8);
    let mut module = JITModule::new(builder);
    let entries = codegen::define_all(&mut module, &program, Linkage::Local)?;
    module.finalize_definitions().map_err(BackendError::module)?;
    let ptr = |id| module.get_finalized_function(id);
    // SAFETY: each pointer is the finalized code of the function `define_all` declared
    // with exactly the matching signature (see the signatures in `codegen::define_all`);
    // the code stays valid while `_code` holds the module.
    let (admit, filter_score, card_score, queue_keys, job_keys, gang, victim, victim_keys) = unsafe {
        (
            std::mem::transmute::<*const u8, AdmitFn>(ptr(entries.admit)),
            std::mem::transmute::<*const u8, FilterScoreFn>(ptr(entries.filter_score)),
            std::mem::transmute::<*const u8, CardScoreFn>(ptr(entries.card_score)),
            std::mem::transmute::<*const u8, QueueKeysFn>(ptr(entries.queue_keys)),
            std::mem::transmute::<*const u8, JobKeysFn>(ptr(entries.job_keys)),
            std::mem::transmute::<*const u8, GangFn>(ptr(entries.gang)),
            std::mem::transmute::<*const u8, VictimFn>(ptr(entries.victim)),
            std::mem::transmute::<*const u8, VictimKeysFn>(ptr(entries.victim_keys)),
        )
    };
    let n_attrs = program.attrs.first().map_or(0, Vec::len);
    let attrs = program.attrs.iter().flat_map(|row| row.iter().map(|v| abi::attr_bits(*v))).collect();
    Ok(JitEngine {
        program,
        attrs,
        n_attrs,
        zero_queue: QueueRec::default(),
        zero_domain: DomainRec::default(),
        admit,
        filter_score,
        card_score,
        queue_keys,
        job_keys,
        gang,
        victim,
        victim_keys,
        _code: Code(Some(module)),
    })
}

/// When a program fails to compile, the first rule that fails on its own: compiles each
/// rule body alone, in the slot it came from, so the report can name it.
pub fn culprit(program: &Program) -> Option<RuleId> {
    let fails_alone = |f: &dyn Fn(&mut Program)| {
        let mut p = Program {
            name: program.name.clone(),
            levels: program.levels.clone(),
            literals: program.literals.clone(),
            attrs: program.attrs.clone(),
            ..Program::default()
        };
        f(&mut p);
        compile(Arc::new(p)).is_err()
    };
    let index = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
    let first = |n: usize, set: &dyn Fn(&mut Program, usize), id: fn(u16) -> RuleId| {
        (0..n).find(|&i| fails_alone(&|p| set(p, i))).map(|i| id(index(i)))
    };
    first(program.admit.len(), &|p, i| p.admit = vec![program.admit[i].clone()], RuleId::Admit)
        .or_else(|| {
            let set = |p: &mut Program, i: usize| {
                p.filters = vec![program.filters[i].clone()];
                p.filter_order = vec![0];
            };
            first(program.filters.len(), &set, RuleId::Filter)
        })
        .or_else(|| first(program.scores.len(), &|p, i| p.scores = vec![program.scores[i].clone()], RuleId::Score))
        .or_else(|| {
            let set = |p: &mut Program, i: usize| p.card_scores = vec![program.card_scores[i].clone()];
            first(program.card_scores.len(), &set, RuleId::CardScore)
        })
        .or_else(|| {
            let set = |p: &mut Program, i: usize| p.queue_order = vec![program.queue_order[i].clone()];
            first(program.queue_order.len(), &set, RuleId::QueueOrder)
        })
        .or_else(|| {
            let set = |p: &mut Program, i: usize| p.job_order = vec![program.job_order[i].clone()];
            first(program.job_order.len(), &set, RuleId::JobOrder)
        })
        .or_else(|| first(program.gang.len(), &|p, i| p.gang = vec![program.gang[i].clone()], RuleId::Gang))
        .or_else(|| first(program.victims.len(), &|p, i| p.victims = vec![program.victims[i].clone()], RuleId::Victim))
        .or_else(|| {
            let set = |p: &mut Program, i: usize| p.victim_order = vec![program.victim_order[i].clone()];
            first(program.victim_order.len(), &set, RuleId::VictimOrder)
        })
}

impl JitEngine {
    fn repr(&self, ctx: &Ctx<'_>) -> CtxRepr {
        abi::ctx_repr(ctx, &self.attrs, self.n_attrs, &self.zero_queue, &self.zero_domain)
    }
}

// Every call below passes pointers derived from Rust references that outlive the call,
// and lengths taken from the same slices; the generated code bounds-checks every table
// read against those lengths and writes only through the out-pointers it is given, each
// sized as the code expects (checked before the call where the caller chooses the size).
impl Engine for JitEngine {
    fn admit(&self, ctx: &Ctx<'_>, job: &JobRec<'_>) -> Option<usize> {
        let c = self.repr(ctx);
        // SAFETY: see the comment on this impl.
        let r = unsafe { (self.admit)(&c, job) };
        usize::try_from(r).ok()
    }

    fn filter_score(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, nodes: &[NodeRec<'_>], out: &mut [NodeResult]) {
        let c = self.repr(ctx);
        let n = nodes.len().min(out.len());
        // SAFETY: see the comment on this impl; `out` has room for `n` results.
        unsafe { (self.filter_score)(&c, job, nodes.as_ptr(), n, out.as_mut_ptr()) }
    }

    fn card_score(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, node: &NodeRec<'_>, card: &CardRec) -> (f64, u32) {
        let c = self.repr(ctx);
        let mut faults = 0u32;
        // SAFETY: see the comment on this impl; `faults` is one u32.
        let s = unsafe { (self.card_score)(&c, job, node, card, &mut faults) };
        (s, faults)
    }

    fn queue_keys(&self, ctx: &Ctx<'_>, queue: u32, out: &mut [f64]) {
        let c = self.repr(ctx);
        let mut keys = vec![0.0; self.program.queue_order.len()];
        // SAFETY: see the comment on this impl; `keys` has one slot per key.
        unsafe { (self.queue_keys)(&c, queue, keys.as_mut_ptr()) };
        for (o, k) in out.iter_mut().zip(keys) {
            *o = k;
        }
    }

    fn job_keys(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, out: &mut [f64]) {
        let c = self.repr(ctx);
        let mut keys = vec![0.0; self.program.job_order.len()];
        // SAFETY: see the comment on this impl; `keys` has one slot per key.
        unsafe { (self.job_keys)(&c, job, keys.as_mut_ptr()) };
        for (o, k) in out.iter_mut().zip(keys) {
            *o = k;
        }
    }

    fn gang_applies(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, clause: usize) -> bool {
        let c = self.repr(ctx);
        let clause = u32::try_from(clause).unwrap_or(u32::MAX);
        // SAFETY: see the comment on this impl.
        unsafe { (self.gang)(&c, job, clause) != 0 }
    }

    fn victim(&self, ctx: &Ctx<'_>, rule: usize, claimant: &JobRec<'_>, victim: &JobRec<'_>) -> (bool, f64) {
        let c = self.repr(ctx);
        let rule = u32::try_from(rule).unwrap_or(u32::MAX);
        let mut cost = 0.0;
        // SAFETY: see the comment on this impl; `cost` is one f64.
        let ok = unsafe { (self.victim)(&c, rule, claimant, victim, &mut cost) };
        (ok != 0, cost)
    }

    fn victim_keys(&self, ctx: &Ctx<'_>, claimant: &JobRec<'_>, victim: &JobRec<'_>, out: &mut [f64]) {
        let c = self.repr(ctx);
        let mut keys = vec![0.0; self.program.victim_order.len()];
        // SAFETY: see the comment on this impl; `keys` has one slot per key.
        unsafe { (self.victim_keys)(&c, claimant, victim, keys.as_mut_ptr()) };
        for (o, k) in out.iter_mut().zip(keys) {
            *o = k;
        }
    }
}
