//! Shared by the runtime's tests and benches: policies compiled from text, and builders of
//! nodes and jobs on the defaults of the one job model (`gpol_compiler::spec`).

#![allow(dead_code)]

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::spec::{JobSpec, NodeSpec, Request};
use gpol_runtime::Scheduler;

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

/// Drives a scheduler through a stream of arrivals: each started job ends its duration
/// after it starts (an evicted job's earlier end is no end: it ends that long after it
/// restarts).
pub struct Stream {
    pub s: Scheduler,
    ends: std::collections::BTreeMap<u64, Vec<usize>>,
}

impl Stream {
    pub fn new(s: Scheduler) -> Stream {
        Stream { s, ends: std::collections::BTreeMap::new() }
    }

    /// Ends the jobs due by now, submits `spec`, runs a cycle and returns what happened:
    /// the ends, the submission and the cycle's decisions (noting when each job it
    /// started ends).
    pub fn arrive(&mut self, spec: JobSpec) -> Vec<gpol_runtime::Event> {
        let now = self.s.now_ms();
        let due: Vec<usize> = self.ends.range(..=now).flat_map(|(_, jobs)| jobs.iter().copied()).collect();
        self.ends.retain(|&t, _| t > now);
        let mut events = Vec::new();
        for j in due {
            let job = self.s.job(j);
            let end =
                job.life.started_ms.saturating_add(i64::try_from(job.ask.duration_ms.unwrap_or(0)).unwrap_or(i64::MAX));
            if job.life.state == gpol_runtime::State::Running
                && end <= i64::try_from(now).unwrap_or(i64::MAX)
                && self.s.complete(j)
            {
                events.push(gpol_runtime::Event::Finished { job: j, at_ms: now });
            }
        }
        let job = self.s.submit(spec).expect("the job is valid");
        events.push(gpol_runtime::Event::Submitted { job, at_ms: now });
        events.extend(self.s.cycle());
        for e in &events {
            if let gpol_runtime::Event::Placed { job, .. } = e {
                let end = self.s.now_ms() + self.s.job(*job).ask.duration_ms.unwrap_or(0);
                self.ends.entry(end).or_default().push(*job);
            }
        }
        events
    }
}
