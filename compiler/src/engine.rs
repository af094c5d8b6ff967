//! The compiled policy every consumer uses (runtime, simulator, adapters): a checked
//! policy, its IR and an engine, the reference interpreter or the JIT, chosen by a flag.
//! What an engine is and answers ([`Engine`], [`NodeResult`], score handling) is defined
//! in a private leaf module the engines and the pipeline share, and named here.

use crate::hir;
use crate::ir::Program;
use crate::jit::BackendError;
use crate::lower;
use std::sync::Arc;

pub use crate::eval::{Engine, MAX_TIERS, NONE, NodeResult, add_score, clamp_score};
pub use crate::interp::InterpEngine;

/// Engine selection, for `--engine jit|interp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EngineKind {
    #[default]
    Jit,
    Interp,
}

/// A policy ready to evaluate: the checked form (for explain and tests), the IR, and an
/// engine. Cheap to share: `Clone` copies two `Arc`s.
#[derive(Clone)]
pub struct CompiledPolicy {
    pub policy: Arc<hir::Policy>,
    pub program: Arc<Program>,
    engine: Arc<dyn Engine>,
    kind: EngineKind,
}

impl CompiledPolicy {
    pub fn engine(&self) -> &dyn Engine {
        &*self.engine
    }

    /// Which engine runs it.
    pub fn engine_kind(&self) -> EngineKind {
        self.kind
    }
}

impl std::fmt::Debug for CompiledPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompiledPolicy({}, {:?})", self.policy.name, self.kind)
    }
}

/// Compiles a checked policy for the chosen engine, lowering it first: for code that
/// holds a checked policy alone. [`crate::load`]'s pipeline lowers once, in its analyses,
/// and compiles with [`compile_lowered`].
pub fn compile(policy: hir::Policy, kind: EngineKind) -> Result<CompiledPolicy, crate::diag::Diagnostic> {
    let program = lower::lower(&policy).map_err(|e| e.diagnostic(&policy))?;
    compile_lowered(Arc::new(policy), Arc::new(program), kind)
}

/// Compiles a policy already lowered (`program` is `policy` lowered) for the chosen
/// engine. Policies and programs are shared, not copied: compiling one for both engines
/// costs one lowering.
pub fn compile_lowered(
    policy: Arc<hir::Policy>,
    program: Arc<Program>,
    kind: EngineKind,
) -> Result<CompiledPolicy, crate::diag::Diagnostic> {
    let engine: Arc<dyn Engine> = match kind {
        EngineKind::Interp => Arc::new(InterpEngine { program: Arc::clone(&program) }),
        EngineKind::Jit => match crate::jit::compile(Arc::clone(&program)) {
            Ok(jit) => Arc::new(jit),
            Err(e) => return Err(backend_failure(&policy, &program, &e)),
        },
    };
    Ok(CompiledPolicy { policy, program, engine, kind })
}

/// The diagnostic for a policy the backend could not compile: it names the rule (found
/// by compiling rules one at a time) and points at it.
pub(crate) fn backend_failure(
    policy: &hir::Policy,
    program: &Program,
    error: &BackendError,
) -> crate::diag::Diagnostic {
    let culprit = crate::jit::culprit(program);
    let span = culprit.and_then(|id| program.rule_span(policy, id)).unwrap_or_default();
    let message = match culprit {
        Some(id) => format!("code generation failed for {}", program.rule_label(id)),
        None => "code generation failed".to_string(),
    };
    crate::diag::Diagnostic::new(crate::diag::Code::Backend, span, message)
        .label(crate::diag::snippet(&error.to_string()))
        .help("this is a bug in gpolc; please report it with the policy. `--engine interp` runs the policy without native code")
}

impl std::str::FromStr for EngineKind {
    type Err = UnknownEngine;

    fn from_str(s: &str) -> Result<EngineKind, UnknownEngine> {
        match s {
            "jit" => Ok(EngineKind::Jit),
            "interp" => Ok(EngineKind::Interp),
            other => Err(UnknownEngine(other.to_string())),
        }
    }
}

/// An engine name that is neither `jit` nor `interp`, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownEngine(pub String);

impl std::fmt::Display for UnknownEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown engine `{}`: use `jit` or `interp`", self.0)
    }
}

impl std::error::Error for UnknownEngine {}
