//! `gpolc slurm`: a policy in a real Slurm. `plan` and `apply` are one pass of the
//! scheduling loop (what would change, and making it so). `emit` writes what Slurm takes from a policy
//! at configuration time: `job_submit.lua` (the submit-time rules) and `accounts.sh` (the
//! queue tree as `sacctmgr` commands) and, given a cluster, `topology.conf`.

use super::{CliError, FAILED, OK, USAGE};
use gpol_compiler::engine::EngineKind;
use gpol_compiler::limits::MAX_CLUSTER_BYTES;
use gpol_compiler::spec::NodeSpec;
use gpol_runtime::decision_log::{Record, Verb, Writer};
use gpol_slurm::loaded::LoadedPolicy;
use gpol_slurm::lua::Policy;
use gpol_slurm::sinfo::{Service, SlurmNode};
use gpol_slurm::state::{self, Source, StateError};
use gpol_slurm::topology::{self, Node};
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Print what the scheduling loop would change in Slurm now (or in the given state).
    Plan(PlanArgs),
    /// Make the changes `plan` prints: pin, hold, release, requeue, cancel.
    Apply(PlanArgs),
    /// The scheduling loop: `apply` again and again, reading Slurm's state afresh each
    /// time (a pass that cannot read it, as while slurmctld restarts, is tried again).
    Run(RunArgs),
    /// Write a policy's Slurm artefacts into a directory: job_submit.lua, accounts.sh and,
    /// with --cluster, slurm-nodes.conf and topology.conf (and topology-block.conf for an
    /// NVLink block level).
    Emit(EmitArgs),
}

#[derive(clap::Args)]
pub struct EmitArgs {
    /// The policy file.
    policy: PathBuf,
    /// The directory to write into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// The cluster (a cluster file, `sinfo --json`, `kubectl get nodes -o json`): also
    /// write slurm-nodes.conf (node lines with weights from the policy's static scores)
    /// and topology.conf (the policy's topology levels over its nodes).
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Also hold every job the rules admit, for the scheduling loop to place (gpol then
    /// decides where and when every job runs).
    #[arg(long)]
    hold_for_loop: bool,
    /// What a job's queue is: its `account` (Slurm's association tree is the queue tree)
    /// or its `partition` (then accounts.sh is not written: the loop enforces the quotas).
    #[arg(long, value_name = "FIELD", default_value = "account")]
    queue_from: gpol_slurm::jobs::QueueFrom,
    /// With --cluster, the topology level that is an NVLink block: also write
    /// topology-block.conf, its `topology/block` form for Slurm 23.11+ (default: the
    /// policy's level named `block`, if it has one).
    #[arg(long, value_name = "LEVEL", requires = "cluster")]
    block_level: Option<String>,
    /// Replace read-only output files.
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
pub struct PlanArgs {
    /// The policy file.
    policy: PathBuf,
    /// Slurm's nodes as `sinfo --json` writes them (default: run `sinfo --json`; with
    /// --cluster, only which nodes are down or drained is read from it).
    #[arg(long, value_name = "FILE")]
    sinfo: Option<PathBuf>,
    /// The nodes as a cluster file instead, with their topology.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Slurm's jobs as `squeue --json` writes them (default: run `squeue --json`).
    #[arg(long, value_name = "FILE")]
    squeue: Option<PathBuf>,
    /// slurmctld's configuration as `scontrol show config` prints it, for whether memory
    /// is allocated (default: run it when jobs come from `squeue`; with saved jobs or
    /// slurmrestd and no file, memory is taken to be allocated, as under CR_*_Memory).
    #[arg(long, value_name = "FILE")]
    slurm_config: Option<PathBuf>,
    /// Also mend the association tree: accounts, shares and GrpTRES as the policy's queue
    /// tree has them, and a QOS for each priority class (read with `sacctmgr show
    /// associations` and `show qos`, or from FILE, the associations' saved `-n -P` output;
    /// needs slurmdbd).
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true)]
    accounts: Option<Option<PathBuf>>,
    /// What a job's queue is: its `account` or its `partition` (as `emit` was told).
    #[arg(long, value_name = "FIELD", default_value = "account")]
    queue_from: gpol_slurm::jobs::QueueFrom,
    /// Read nodes and jobs from slurmrestd instead of `sinfo`/`squeue`: `unix:PATH` (its
    /// local authentication) or an http(s):// URL (with the JWT in SLURM_JWT, for the
    /// user SLURM_USER_NAME, else USER).
    #[arg(long, value_name = "ADDRESS")]
    slurmrestd: Option<String>,
    /// The OpenAPI version asked of slurmrestd (Slurm 22.05: v0.0.38; 23.11: v0.0.40;
    /// 24.05: v0.0.41).
    #[arg(long, value_name = "VERSION", default_value = gpol_slurm::rest::DEFAULT_VERSION, requires = "slurmrestd")]
    rest_version: String,
    /// Append every turn of each pass's cycle to FILE as a JSON line: the policy's digest,
    /// the digest of Slurm's state read, the job id and what the decision saw. `gpolc
    /// explain --log FILE JOBID` shows one.
    #[arg(long, value_name = "FILE")]
    decision_log: Option<PathBuf>,
}

/// Where a pass logs its decisions, and the digest of the policy they were made by.
struct DecisionLog {
    writer: Writer,
    policy: String,
    /// The command: `gpolc slurm run`.
    source: &'static str,
}

impl DecisionLog {
    /// The log `--decision-log` names, if any, and the policy loaded with its digest.
    fn open(
        args: &PlanArgs,
        source: &'static str,
        color: bool,
    ) -> Result<(LoadedPolicy, Option<DecisionLog>), CliError> {
        let (compiled, policy) = super::compile_policy_digest(&args.policy, EngineKind::Interp, color)?;
        let log = match &args.decision_log {
            Some(path) => {
                let writer =
                    Writer::open(path, &[&args.policy]).map_err(|e| CliError::usage(format!("--decision-log: {e}")))?;
                Some(DecisionLog { writer, policy, source })
            }
            None => None,
        };
        Ok((LoadedPolicy::new(compiled), log))
    }

    /// Appends the plan's accounts; a record that cannot be written is said, and the pass
    /// goes on.
    fn write(&self, plan: &gpol_slurm::plan::Plan) {
        for (job, account) in &plan.accounts {
            let record =
                Record::now(self.source, &self.policy, &plan.inputs, Verb::Cycle, &job.to_string(), account.clone());
            if let Err(e) = self.writer.write(&record) {
                super::show(&CliError::failed(e));
                return;
            }
        }
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    state: PlanArgs,
    /// Seconds between passes.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    every: f64,
    /// Stop after this many passes (default: run until interrupted).
    #[arg(long)]
    passes: Option<u64>,
}

pub fn run(command: Command, color: bool) -> Result<u8, CliError> {
    match command {
        Command::Emit(args) => emit(args, color),
        Command::Plan(args) => plan(args, false, color),
        Command::Apply(args) => plan(args, true, color),
        Command::Run(args) => run_loop(args, color),
    }
}

/// Passes of `apply` until interrupted (or `--passes`); the policy is loaded once.
fn run_loop(args: RunArgs, color: bool) -> Result<u8, CliError> {
    partitions_have_no_accounts(&args.state)?;
    if !(args.every.is_finite() && (0.1..=86_400.0).contains(&args.every)) {
        return Err(CliError::usage(format!("--every takes seconds between 0.1 and 86400, not {}", args.every)));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    if ctrlc::set_handler(move || flag.store(true, std::sync::atomic::Ordering::SeqCst)).is_err() {
        eprintln!("note: Ctrl-C ends the loop abruptly (no handler could be set)");
    }
    // What job_submit.lua enforces of it is worked out once too, with the policy.
    let (loaded, log) = DecisionLog::open(&args.state, "gpolc slurm run", color)?;
    let (mut n, mut last) = (0u64, OK);
    while !stop.load(std::sync::atomic::Ordering::SeqCst) && args.passes.is_none_or(|most| n < most) {
        n += 1;
        // A pass that fails says why and the loop goes on.
        let code = super::exit_code(pass(&loaded, &args.state, true, log.as_ref()));
        last = code;
        eprintln!("pass {n}: {}", if code == OK { "done" } else { "failed; trying again" });
        if args.passes.is_some_and(|most| n >= most) {
            break;
        }
        let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(args.every);
        while std::time::Instant::now() < until && !stop.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    Ok(last)
}

/// `--accounts` mends an association tree: none when queues are partitions.
fn partitions_have_no_accounts(args: &PlanArgs) -> Result<(), CliError> {
    if args.accounts.is_some() && args.queue_from == gpol_slurm::jobs::QueueFrom::Partition {
        return Err(CliError::usage(
            "--accounts mends an association tree, and with --queue-from partition the queues are partitions",
        ));
    }
    Ok(())
}

/// Whether Slurm allocates memory: from `--slurm-config`, else from `scontrol show config`
/// when the jobs are read live from Slurm's commands; otherwise as under CR_*_Memory.
fn memory(args: &PlanArgs, rest: bool) -> Result<gpol_slurm::config::Memory, StateError> {
    if args.slurm_config.is_none() && (args.squeue.is_some() || rest) {
        return Ok(gpol_slurm::config::Memory::default());
    }
    state::memory(args.slurm_config.as_deref())
}

fn plan(args: PlanArgs, apply: bool, color: bool) -> Result<u8, CliError> {
    partitions_have_no_accounts(&args)?;
    let source = if apply { "gpolc slurm apply" } else { "gpolc slurm plan" };
    let (loaded, log) = DecisionLog::open(&args, source, color)?;
    pass(&loaded, &args, apply, log.as_ref())
}

/// What makes Slurm's accounts and QOS the policy's: the association tree read live (and
/// the QOS with it) or from a saved file (associations only).
fn account_changes(
    compiled: &gpol_compiler::engine::CompiledPolicy,
    file: &Option<PathBuf>,
) -> Result<Vec<gpol_slurm::associations::Change>, String> {
    use gpol_compiler::limits::MAX_INPUT_BYTES;
    use gpol_slurm::associations::{SHOW, SHOW_QOS, changes};
    let tree = state::output(file.as_deref(), &SHOW, MAX_INPUT_BYTES).map_err(|e| e.to_string())?;
    let qos = match file {
        None => Some(state::output(None, &SHOW_QOS, MAX_INPUT_BYTES).map_err(|e| e.to_string())?.text),
        Some(_) => None,
    };
    // The limits in force now: quota windows follow the policy's clock in real time.
    let mut clock = gpol_compiler::clock::Clock::of_zone(compiled.policy.settings.timezone.as_deref());
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    clock.start_at_unix_ms(i64::try_from(now_ms).unwrap_or(i64::MAX));
    let minute = clock.minute_of_week(0);
    changes(&compiled.policy, &tree.text, qos.as_deref(), Some(minute)).map_err(|e| format!("{}: {e}", tree.from))
}

/// The nodes Slurm shows drained or down: they take no new job.
fn out_of_service(live: &[SlurmNode]) -> impl Iterator<Item = String> + '_ {
    live.iter().filter(|n| n.service != Service::InService).map(|n| n.spec.name.clone())
}

/// One pass: Slurm's state read afresh, the plan printed, and (with `apply`) made.
fn pass(loaded: &LoadedPolicy, args: &PlanArgs, apply: bool, log: Option<&DecisionLog>) -> Result<u8, CliError> {
    let compiled = loaded.compiled();
    let rest = match args.slurmrestd.as_deref().map(|a| gpol_slurm::rest::Rest::new(a, &args.rest_version)) {
        Some(Ok(mut r)) => {
            r.token = std::env::var("SLURM_JWT").ok().filter(|t| !t.is_empty());
            r.user = std::env::var("SLURM_USER_NAME").or_else(|_| std::env::var("USER")).ok();
            Some(r)
        }
        Some(Err(e)) => return Err(CliError::usage(format!("--slurmrestd: {e}"))),
        None => None,
    };
    let failed = CliError::usage;
    let sinfo = || state::nodes(&Source::of(args.sinfo.as_deref(), rest.as_ref())).map_err(failed);
    // The nodes: from the cluster file (with its topology) or from Slurm. Which are down
    // or drained is Slurm's to say, live — unless the jobs are a file and no nodes are
    // (a plan of recorded state).
    let (nodes, unavailable): (Vec<NodeSpec>, Vec<String>) = match &args.cluster {
        Some(_) => {
            let file =
                super::sim::read(&args.cluster, super::sim::DEFAULT_CLUSTER, MAX_CLUSTER_BYTES, gpol_sim::read_cluster);
            let live =
                if args.sinfo.is_some() || args.squeue.is_none() || rest.is_some() { Some(sinfo()) } else { None };
            let (cluster, live) = match (file.map_err(|e| e.with_code(USAGE)), live.transpose()) {
                (Ok(c), Ok(l)) => (c, l),
                (Err(e), _) | (_, Err(e)) => return Err(e),
            };
            let nodes = cluster.nodes.iter().map(|n| n.to_spec(&compiled.policy.levels)).collect();
            // Drained or down now: no new job goes there.
            let unavailable = (cluster.events.iter())
                .filter(|e| e.at_ms == 0 && !matches!(e.kind, gpol_sim::cluster_file::NodeEventKind::Restore))
                .map(|e| e.node.clone())
                .chain(live.iter().flat_map(|l| out_of_service(l)))
                .collect();
            (nodes, unavailable)
        }
        None => {
            let live = sinfo()?;
            (live.iter().map(|n| n.spec.clone()).collect(), out_of_service(&live).collect())
        }
    };
    let jobs = state::jobs(&Source::of(args.squeue.as_deref(), rest.as_ref())).map_err(failed)?;
    let memory = memory(args, rest.is_some()).map_err(failed)?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let queue_from = args.queue_from;
    let state =
        gpol_slurm::plan::State { nodes: &nodes, unavailable: &unavailable, jobs: &jobs, now, queue_from, memory };
    let mut plan = match log {
        Some(log) => {
            let plan = gpol_slurm::plan::plan_recorded(loaded, &state);
            log.write(&plan);
            plan
        }
        None => gpol_slurm::plan::plan(loaded, &state),
    };
    if let Some(file) = &args.accounts {
        let changes = account_changes(compiled, file).map_err(CliError::usage)?;
        // The accounts first: jobs may name them.
        plan.actions.splice(0..0, changes.into_iter().map(gpol_slurm::plan::Action::Account));
    }
    for s in &plan.skipped {
        eprintln!("note: not taken: {s}");
    }
    if plan.actions.is_empty() {
        eprintln!("nothing to change: Slurm already does what the policy decides");
        return Ok(OK);
    }
    let mut failed = 0;
    for a in &plan.actions {
        // Names and reasons come escaped (`describe`, `shell_word`): one line each.
        super::print(&format!("{}\n", a.describe()));
        for c in a.commands() {
            super::print(&format!(
                "  {}\n",
                c.iter().map(|w| gpol_slurm::command::shell_word(w)).collect::<Vec<_>>().join(" ")
            ));
            // The rest of an action that fails waits for the next pass.
            if apply && let Err(e) = gpol_slurm::command::run(&c, gpol_slurm::command::TIMEOUT, 1 << 20) {
                super::show(&CliError::failed(e));
                failed += 1;
                break;
            }
        }
    }
    Ok(if failed > 0 { FAILED } else { OK })
}

fn emit(args: EmitArgs, color: bool) -> Result<u8, CliError> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", args.out.display())))?;
    // Every output checked before the work that fills them.
    let mut outs = Vec::new();
    let names: &[&str] = match args.cluster {
        Some(_) => &["job_submit.lua", "accounts.sh", "topology.conf", "topology-block.conf", "slurm-nodes.conf"],
        None => &["job_submit.lua", "accounts.sh"],
    };
    for name in names {
        outs.push(super::output(&args.out.join(name), &[&args.policy], args.force)?);
    }
    let compiled = super::compile_policy(&args.policy, EngineKind::Interp, color)?;
    let file = args.policy.display().to_string();
    let policy = Policy { program: &compiled.program, hir: &compiled.policy };
    let cluster = match &args.cluster {
        Some(_) => Some(
            super::sim::read(&args.cluster, super::sim::DEFAULT_CLUSTER, MAX_CLUSTER_BYTES, gpol_sim::read_cluster)
                .map_err(|e| e.with_code(USAGE))?,
        ),
        None => None,
    };
    let place = args.cluster.as_ref().map_or(String::new(), |p| p.display().to_string());
    let levels = &compiled.policy.levels;
    let specs: Vec<NodeSpec> = cluster.iter().flat_map(|c| &c.nodes).map(|n| n.to_spec(levels)).collect();
    // The nodes, for the filters job_submit.lua applies.
    let node_table = match &cluster {
        Some(_) => Some(
            gpol_slurm::submit::node_table(&compiled, &specs).map_err(|e| CliError::failed(format!("{place}: {e}")))?,
        ),
        None => None,
    };
    let submit = gpol_slurm::submit::emit(policy, &file, args.hold_for_loop, node_table.as_deref(), args.queue_from);
    if args.hold_for_loop && node_table.is_none() {
        eprintln!(
            "note: without --cluster, job_submit.lua cannot refuse a job no node can hold (a GPU type no node has, \
             more GPUs, CPUs or memory per node than any has): Slurm takes such a job held, and it waits until cancelled"
        );
    }
    // Queues that are partitions are no association tree.
    let accounts = (args.queue_from == gpol_slurm::jobs::QueueFrom::Account)
        .then(|| gpol_slurm::accounts::emit(&compiled.policy, &file));
    if accounts.is_none() {
        eprintln!("note: queues are partitions: accounts.sh is not written (`gpolc slurm run` enforces the quotas)");
    }
    // What to write in each output, in order; `None`: nothing for that one.
    let mut texts = vec![Some(submit.lua.clone()), accounts.as_ref().map(|a| a.script.clone())];
    if let Some(cluster) = &cluster {
        let nodes: Vec<Node> =
            cluster.nodes.iter().map(|n| Node { name: n.spec.name.clone(), topology: n.topology.clone() }).collect();
        let block = args.block_level.clone().or_else(|| levels.iter().find(|l| *l == "block").cloned());
        if let Some(level) = block.as_ref().filter(|b| !levels.contains(b)) {
            let known = levels.join(", ");
            return Err(CliError::usage(format!("--block-level {level}: the policy's topology levels are {known}")));
        }
        let tree = topology::emit(&compiled.policy.name, levels, &nodes, &place);
        let blocks = match &block {
            Some(level) => topology::emit_block(&compiled.policy.name, level, &nodes, &place),
            None => Ok(None),
        };
        for written in [tree, blocks] {
            texts.push(written.map_err(|e| CliError::failed(format!("{place}: {}", e.0)))?);
        }
        let fragment = gpol_slurm::nodes::emit(&compiled, &specs, &place)
            .map_err(|e| CliError::failed(format!("{place}: {e}")))?;
        texts.push(Some(fragment.text));
        if texts[2].is_none() {
            eprintln!("note: the cluster has none of the policy's topology levels: topology.conf is not written");
        }
    }
    for (out, text) in outs.iter().zip(&texts) {
        if let Some(text) = text {
            super::write_output(out, text.as_bytes(), None)?;
        }
    }
    let enforced = submit.rules.iter().filter(|r| r.condition.is_ok()).count();
    eprintln!(
        "wrote {}: {enforced} rule(s) enforced at submission, {} left to the scheduling loop",
        outs[0].path().display(),
        submit.rules.len() - enforced
    );
    if let Some(accounts) = &accounts {
        eprintln!(
            "wrote {}: {} account(s), {} thing(s) Slurm's associations cannot express",
            outs[1].path().display(),
            accounts.script.lines().filter(|l| l.starts_with("sacctmgr")).count(),
            accounts.unexpressed.len()
        );
    }
    for (out, text) in outs.iter().zip(&texts).skip(2) {
        if text.is_some() {
            eprintln!("wrote {}", out.path().display());
        }
    }
    Ok(OK)
}
