//! Shared by the runtime's tests and benches: policies compiled from text, and builders of
//! nodes and jobs on the defaults of the one job model (`gpol_compiler::spec`).

#![allow(dead_code)]

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_runtime::{JobSpec, NodeSpec, Request, Scheduler};

/// A policy given as text, compiled for `engine`; a policy that does not check fails the
/// test with its diagnostics.
pub fn compiled(name: &str, text: &str, engine: EngineKind) -> CompiledPolicy {
    gpol_compiler::load::compile_text(name, text, engine).expect("the test policy compiles")
}

/// The text of an example policy of `policies/`.
pub fn example(file: &str) -> String {
    let path = format!("{}/../policies/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("the example policy is readable")
}

/// A scheduler running a policy given as text (JIT), with these nodes.
pub fn scheduler(text: &str, nodes: &[NodeSpec]) -> Scheduler {
    let mut s = Scheduler::new(compiled("test.gpol", text, EngineKind::Jit));
    for n in nodes {
        s.add_node(n).expect("the test node is valid");
    }
    s
}

/// An eight-card H100 node, its cards not shared, with plenty of CPU and memory.
pub fn h100(name: &str) -> NodeSpec {
    NodeSpec { model: "h100".into(), cards: 8, cpu_milli: 1_000_000, mem: 1 << 40, ..NodeSpec::named(name) }
}

/// A job of `cards` whole cards in its policy's only leaf queue.
pub fn cards(name: &str, cards: u32) -> JobSpec {
    JobSpec { request: Request::Whole(cards), ..JobSpec::named(name) }
}

/// `job` in leaf queue `queue`.
pub fn queued(queue: &str, job: JobSpec) -> JobSpec {
    JobSpec { queue: Some(queue.into()), ..job }
}
