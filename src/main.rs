//! `gpolc`: the command line of gpol. Each subcommand lives in `cmd/` and is a thin
//! layer over the compiler library.

mod cmd;

// `gpolc serve` answers each request with thousands of small allocations (node names,
// reasons, JSON): mimalloc takes a quarter off the time per request and most of the tail
// (docs/performance.md, "The extender on loopback").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// gpolc — compiler and tools for gpol, a language for GPU cluster scheduling policies.
#[derive(Parser)]
#[command(name = "gpolc", version, about, long_about = None)]
struct Cli {
    /// When to colour output.
    #[arg(long, global = true, value_enum, default_value_t = cmd::ColorChoice::Auto)]
    color: cmd::ColorChoice,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check policies for errors and warnings.
    Check(cmd::check::Args),
    /// Format policies canonically.
    Fmt(cmd::fmt::Args),
    /// Run the `test` blocks of policies.
    Test(cmd::test::Args),
    /// Replay a test and explain every scheduling decision.
    Explain(cmd::explain::Args),
    /// Print the IR a policy lowers to (what both engines run).
    Ir(cmd::ir::Args),
    /// Compile a policy to a relocatable object file with C symbols.
    Build(cmd::build::Args),
    /// Replay a workload on a cluster under one or more policies and report what happened.
    Sim(cmd::sim::Args),
    /// Write a synthetic workload trace.
    GenTrace(cmd::gen_trace::Args),
    /// Compare two versions of a policy: what the change does, decision by decision.
    Diff(cmd::diff::Args),
    /// Measure what a policy costs: compile time and time per (job, node) in each engine.
    Bench(cmd::bench::Args),
    /// Serve a policy as a kube-scheduler extender (filter, prioritize, preempt, bind).
    Serve(cmd::serve::Args),
    /// A policy in a real Slurm: `emit` writes job_submit.lua.
    #[command(subcommand)]
    Slurm(cmd::slurm::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let color = cli.color.enabled();
    if !matches!(cli.command, Command::Serve(_)) {
        // `serve` sets up logs of its own.
        cmd::log_internal_errors();
    }
    let result = match cli.command {
        Command::Check(a) => cmd::check::run(a, color),
        Command::Fmt(a) => cmd::fmt::run(a, color),
        Command::Test(a) => cmd::test::run(a, color),
        Command::Explain(a) => cmd::explain::run(a, color),
        Command::Ir(a) => cmd::ir::run(a, color),
        Command::Build(a) => cmd::build::run(a, color),
        Command::Bench(a) => cmd::bench::run(a, color),
        Command::Sim(a) => cmd::sim::run(a, color),
        Command::Diff(a) => cmd::diff::run(a),
        Command::GenTrace(a) => cmd::gen_trace::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Slurm(c) => cmd::slurm::run(c, color),
    };
    ExitCode::from(cmd::exit_code(result))
}
