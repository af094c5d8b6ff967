//! The Slurm adapter against gpol's own simulator: each scenario is one job stream, run
//! once through `gpolc sim` and once through a real Slurm (16 nodes × 8 fake GPUs) driven
//! by `gpolc slurm apply` with the policy's `job_submit.lua --hold-for-loop`; Slurm must do
//! what gpol decides for every job — the step it starts at, its nodes, its evictions, its
//! rejection.
//!
//! Time runs in steps of a minute of simulated time. At each step, in Slurm: the jobs the
//! simulation finished then are cancelled, the step's jobs are submitted with `sbatch`
//! (their options from the one job model), one pass of the loop is applied, and Slurm's
//! queue is recorded once Slurm has done what the pass asked.

use gpol_compiler::spec::{JobSpec, Request};
use gpol_sim::decisions::Decision;
use gpol_sim::trace::{self, TraceJob};
use std::collections::BTreeMap;
use std::path::Path;

mod support;
use support::slurm::{in_test_cluster, slurm_here, write};

/// Seconds of simulated time between steps.
const STEP_S: u64 = 60;

/// A test cluster: as `gpolc sim` reads it, and as slurm/tests/slurm/cluster.sh starts it.
struct Cluster {
    toml: &'static str,
    /// cluster.sh's `nodes.conf` (`None`: its 16 nodes gpu-[0-15]).
    nodes: Option<&'static str>,
    /// Shards per card of its time-sliced nodes.
    shards_per_card: Option<u32>,
}

/// cluster.sh's 16 nodes with their racks of four nodes and NVLink blocks of eight.
const BLOCKS: Cluster = Cluster {
    toml: "name = \"test\"\n\n[[pool]]\nname = \"gpu\"\ncount = 16\ngpu_model = \"h100\"\ngpus = 8\ncpu = 64\nmem = \"500GiB\"\ntopology = { rack = 4, block = 8 }\n",
    nodes: None,
    shards_per_card: None,
};

/// Twelve exclusive nodes and four time-sliced ones, each of whose cards Slurm shares as
/// eight shards.
const SHARDS: Cluster = Cluster {
    toml: "name = \"test\"\n\n[[pool]]\nname = \"gpu\"\ncount = 12\ngpu_model = \"h100\"\ngpus = 8\ncpu = 64\nmem = \"500GiB\"\n\n\
           [[pool]]\nname = \"ts\"\ncount = 4\ngpu_model = \"h100\"\ngpus = 8\ncpu = 64\nmem = \"500GiB\"\nsharing = \"timeslice\"\nmax_clients = 8\n",
    nodes: Some(
        "gpu-0 gpu:h100:8\ngpu-1 gpu:h100:8\ngpu-2 gpu:h100:8\ngpu-3 gpu:h100:8\ngpu-4 gpu:h100:8\ngpu-5 gpu:h100:8\n\
         gpu-6 gpu:h100:8\ngpu-7 gpu:h100:8\ngpu-8 gpu:h100:8\ngpu-9 gpu:h100:8\ngpu-10 gpu:h100:8\ngpu-11 gpu:h100:8\n\
         ts-0 gpu:h100:8,shard:64\nts-1 gpu:h100:8,shard:64\nts-2 gpu:h100:8,shard:64\nts-3 gpu:h100:8,shard:64\n",
    ),
    shards_per_card: Some(8),
};

/// A job of `queue` arriving at `step`, asking for `cards` on each of `nodes` nodes (one
/// CPU and 16 GiB each, which Slurm's defaults would otherwise decide).
fn job(name: &str, step: u64, queue: &str, cards: u32, nodes: u32) -> TraceJob {
    let mut j = TraceJob::new(name, step * STEP_S * 1000);
    j.job = JobSpec {
        queue: Some(queue.into()),
        request: Request::Whole(cards),
        replicas: nodes,
        cpu_milli: 1000,
        mem: 16 << 30,
        ..JobSpec::named(name)
    };
    j
}

/// What happened to one job at one step.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fate {
    Placed(Vec<String>),
    Evicted,
    Rejected,
}

type Story = BTreeMap<String, Vec<(u64, Fate)>>;

/// The scenario's story in `gpolc sim` and in a real Slurm, over `steps` steps, and what
/// the Slurm run printed.
fn both(policy: &Path, cluster: &Cluster, jobs: &[TraceJob], steps: u64) -> (Story, Story, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    write(d, "cluster.toml", cluster.toml);
    if let Some(nodes) = cluster.nodes {
        write(d, "nodes.conf", nodes);
    }
    let shards_per_card = cluster.shards_per_card;
    write(d, "trace.csv", &trace::to_csv(jobs));
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let run = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new(&gpolc).args(args).output().expect("gpolc runs");
        assert!(out.status.success(), "gpolc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    run(&[
        &os("sim"),
        policy.as_os_str(),
        &os("--cluster"),
        d.join("cluster.toml").as_os_str(),
        &os("--trace"),
        d.join("trace.csv").as_os_str(),
        &os("--decisions"),
        d.join("decisions.jsonl").as_os_str(),
    ]);
    let decisions: Vec<Decision> = std::fs::read_to_string(d.join("decisions.jsonl"))
        .expect("written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a decision"))
        .collect();
    let step = |d: &Decision| (d.at_s / STEP_S as f64).floor() as u64;
    let mut sim = Story::new();
    let mut finished: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for d in &decisions {
        let fate = match d.kind.as_str() {
            "placed" => Fate::Placed(sorted(d.nodes.clone())),
            "evicted" => Fate::Evicted,
            "rejected" => Fate::Rejected,
            "finished" => {
                finished.entry(step(d)).or_default().push(d.job.clone());
                continue;
            }
            _ => continue,
        };
        sim.entry(d.job.clone()).or_default().push((step(d), fate));
    }

    // The same stream in Slurm.
    run(&[
        &os("slurm"),
        &os("emit"),
        policy.as_os_str(),
        &os("--hold-for-loop"),
        &os("--cluster"),
        d.join("cluster.toml").as_os_str(),
        &os("--out"),
        d.as_os_str(),
    ]);
    let quote = |w: &str| format!("'{}'", w.replace('\'', "'\\''"));
    let mut script = format!(
        "G={g}; P={p}; C={c}; D={d}\n\
         # Until Slurm has done what was asked: nothing starting or ending, and every waiting\n\
         # job held (the loop holds all it does not place).\n\
         settle() {{ for _ in $(seq 160); do\n\
           [ -z \"$(squeue -h -t CG,CF -o %i)\" ] && [ -z \"$(squeue -h -t PD -o %r | grep -v -e '^JobHeld' -e 'held state')\" ] && return\n\
           sleep 0.25; done; echo 'Slurm did not settle'; squeue; }}\n",
        g = quote(&gpolc.display().to_string()),
        p = quote(&policy.display().to_string()),
        c = quote(&d.join("cluster.toml").display().to_string()),
        d = quote(&d.display().to_string()),
    );
    for k in 0..steps {
        script.push_str(&format!("echo \"== step {k} $(date +%s.%N)\"\n"));
        for name in finished.get(&k).into_iter().flatten() {
            script.push_str(&format!("scancel -n {}\n", quote(name)));
        }
        script.push_str("settle\n");
        for j in jobs.iter().filter(|j| j.arrival_ms == k * STEP_S * 1000) {
            let request = gpol_slurm::jobs::Request::of(
                &j.job,
                &gpol_slurm::jobs::Reading { shards_per_card, ..Default::default() },
            )
            .expect("a job Slurm can express");
            let args: Vec<String> = request.sbatch_args().iter().map(|a| quote(a)).collect();
            script.push_str(&format!(
                "sbatch --parsable {} -o /dev/null --wrap 'sleep 3600' >/dev/null 2>>\"$D/sbatch-{k}.txt\" || echo {} >>\"$D/rejected-{k}.txt\"\n",
                args.join(" "),
                quote(&j.job.name)
            ));
        }
        script.push_str(&format!(
            "\"$G\" slurm apply \"$P\" --cluster \"$C\" 2>&1\nsettle\nsqueue --json >\"$D/squeue-{k}.json\"\n\
             # Jobs of different steps start in different seconds, as Slurm counts time.\n\
             sleep 1\n"
        ));
    }
    let said = in_test_cluster(d, &script);
    assert!(!said.contains("Slurm did not settle"), "{said}");
    let mut slurm = Story::new();
    let mut last: BTreeMap<String, (bool, u32)> = BTreeMap::new();
    for k in 0..steps {
        if let Ok(text) = std::fs::read_to_string(d.join(format!("rejected-{k}.txt"))) {
            for name in text.lines() {
                slurm.entry(name.to_string()).or_default().push((k, Fate::Rejected));
            }
        }
        let text = std::fs::read_to_string(d.join(format!("squeue-{k}.json"))).expect("recorded");
        let queue = gpol_slurm::squeue::read(&text).unwrap_or_else(|e| panic!("squeue at step {k}: {e:?}\n{said}"));
        for j in queue {
            let (was_running, restarts) = last.get(&j.request.name).copied().unwrap_or((false, 0));
            let fate = if j.is_running() && !was_running {
                Some(Fate::Placed(sorted(j.nodes.clone())))
            } else if j.is_pending() && was_running && j.restarts > restarts {
                Some(Fate::Evicted)
            } else {
                None
            };
            if let Some(f) = fate {
                slurm.entry(j.request.name.clone()).or_default().push((k, f));
            }
            last.insert(j.request.name.clone(), (j.is_running(), j.restarts));
        }
    }
    (sim, slurm, said)
}

fn sorted(mut nodes: Vec<String>) -> Vec<String> {
    nodes.sort_by_key(|n| (n.len(), n.clone()));
    nodes.dedup();
    nodes
}

/// Runs a scenario in both and checks that Slurm did what gpol decided; gpol's story.
fn agree(policy: &Path, cluster: &Cluster, jobs: &[TraceJob], steps: u64) -> Option<Story> {
    if !slurm_here() {
        return None;
    }
    let (sim, slurm, said) = both(policy, cluster, jobs, steps);
    assert_eq!(slurm, sim, "Slurm (left) did not do what gpolc sim (right) decided; the loop said:\n{said}");
    Some(sim)
}

fn placed_at<'a>(story: &'a Story, job: &str) -> Vec<(u64, &'a [String])> {
    (story.get(job).into_iter().flatten())
        .filter_map(|(k, f)| match f {
            Fate::Placed(nodes) => Some((*k, nodes.as_slice())),
            _ => None,
        })
        .collect()
}

#[test]
fn fair_share_serves_the_account_that_has_used_less_first() {
    // Accounts a and b run eight whole nodes each, a's from step 0 and b's from step 1, so
    // a has used more. Both then wait with one more job, a's submitted first; one node
    // frees at step 3 and goes to b, the next at step 4 to a.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = write(
        dir.path(),
        "policy.gpol",
        "policy usage\n\nqueue org {\n  queue a { }\n  queue b { }\n}\n\nqueue_order { queue.usage asc }\n",
    );
    let mut jobs = Vec::new();
    for i in 0..8 {
        let mut a = job(&format!("a-{i}"), 0, "a", 8, 1);
        a.job.duration_ms = (i == 0).then_some(3 * STEP_S * 1000);
        jobs.push(a);
    }
    for i in 0..8 {
        let mut b = job(&format!("b-{i}"), 1, "b", 8, 1);
        b.job.duration_ms = (i == 0).then_some(3 * STEP_S * 1000);
        jobs.push(b);
    }
    jobs.push(job("a-late", 2, "a", 8, 1));
    jobs.push(job("b-late", 2, "b", 8, 1));
    let Some(story) = agree(&policy, &BLOCKS, &jobs, 5) else { return };
    assert_eq!(placed_at(&story, "b-late").first().map(|p| p.0), Some(3), "{story:#?}");
    assert_eq!(placed_at(&story, "a-late").first().map(|p| p.0), Some(4), "{story:#?}");
}

#[test]
fn training_packs_and_serving_spreads() {
    // policies/pack_spread.gpol: training jobs share a node, inference jobs take a node each.
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/pack_spread.gpol");
    let jobs = [
        job("t-0", 0, "training", 2, 1),
        job("t-1", 0, "training", 2, 1),
        job("i-0", 0, "inference", 2, 1),
        job("i-1", 0, "inference", 2, 1),
        job("t-2", 1, "training", 4, 1),
        job("i-2", 1, "inference", 4, 1),
    ];
    let Some(story) = agree(&policy, &BLOCKS, &jobs, 2) else { return };
    let node = |j: &str| placed_at(&story, j).first().map(|p| p.1.to_vec()).unwrap_or_default();
    assert_eq!(node("t-0"), node("t-1"), "{story:#?}");
    assert_eq!(node("t-0"), node("t-2"), "{story:#?}");
    let serving = [node("i-0"), node("i-1"), node("i-2")];
    assert!(serving.iter().all(|n| n.len() == 1 && *n != node("t-0")), "{story:#?}");
    assert!(serving[0] != serving[1] && serving[1] != serving[2] && serving[0] != serving[2], "{story:#?}");
}

#[test]
fn a_gang_is_kept_inside_one_block_and_a_refused_shape_is_rejected_at_sbatch() {
    // policies/gangs.gpol: four whole-node jobs fill a rack, so a gang of five whole nodes
    // (more than a rack) does not fit in the first NVLink block of eight and must start
    // inside the second; a gang of half nodes is refused by job_submit.lua, and by the
    // simulation; a gang of four whole nodes then starts inside the one free rack.
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/gangs.gpol");
    let mut jobs: Vec<TraceJob> = (0..4).map(|i| job(&format!("f-{i}"), 0, "finetune", 8, 1)).collect();
    jobs.push(job("gang", 1, "pretraining", 8, 5));
    jobs.push(job("halves", 1, "pretraining", 4, 2));
    // A gang of four whole nodes (a rack's worth) must share a rack (of four, in a block).
    jobs.push(job("gang4", 2, "finetune", 8, 4));
    let Some(story) = agree(&policy, &BLOCKS, &jobs, 3) else { return };
    let gang = placed_at(&story, "gang");
    assert_eq!(gang.len(), 1, "{story:#?}");
    let index = |n: &str| n.trim_start_matches("gpu-").parse::<u32>().unwrap_or(u32::MAX);
    assert_eq!(gang[0].1.len(), 5, "{story:#?}");
    assert!(gang[0].1.iter().all(|n| index(n) / 8 == 1), "{story:#?}");
    let gang4 = placed_at(&story, "gang4");
    assert_eq!(gang4.len(), 1, "{story:#?}");
    assert_eq!(gang4[0].1.len(), 4, "{story:#?}");
    assert!(gang4[0].1.iter().all(|n| index(n) / 4 == 1), "{story:#?}");
    assert_eq!(story.get("halves"), Some(&vec![(1, Fate::Rejected)]), "{story:#?}");
}

#[test]
fn a_lender_takes_back_its_guarantee_by_requeueing_a_borrower() {
    // b borrows a's whole guarantee with preemptible jobs; a's job arrives and a borrower
    // is requeued to make room (and stays held for the loop, waiting).
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = write(
        dir.path(),
        "policy.gpol",
        "policy lend\n\nqueue org {\n  queue a { guarantee 64 gpu }\n  queue b { guarantee 64 gpu }\n}\n\nreclaim take_back { when victim.preemptible }\n",
    );
    let mut jobs: Vec<TraceJob> = (0..16)
        .map(|i| {
            let mut b = job(&format!("b-{i}"), 0, "b", 8, 1);
            b.job.preemptible = true;
            b
        })
        .collect();
    jobs.push(job("a-0", 1, "a", 8, 1));
    let Some(story) = agree(&policy, &BLOCKS, &jobs, 3) else { return };
    let evicted: Vec<&String> = story
        .iter()
        .filter(|(_, fates)| fates.iter().any(|(k, f)| *k == 1 && *f == Fate::Evicted))
        .map(|(j, _)| j)
        .collect();
    assert_eq!(evicted.len(), 1, "{story:#?}");
    assert_eq!(placed_at(&story, "a-0").first().map(|p| p.0), Some(1), "{story:#?}");
}

#[test]
fn a_fraction_of_a_card_runs_as_shards_on_a_time_sliced_node() {
    // policies/gpu_sharing.gpol: whole-card jobs take exclusive nodes; fractions of a card
    // (Slurm shards: half a card is four of a card's eight) go to a time-sliced node and
    // share it.
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/gpu_sharing.gpol");
    let fraction = |name: &str, step: u64, milli: u32| {
        let mut j = job(name, step, "research", 1, 1);
        j.job.request = Request::Fraction(milli);
        j
    };
    let jobs = [job("whole", 0, "research", 8, 1), fraction("half", 0, 500), fraction("quarter", 1, 250)];
    let Some(story) = agree(&policy, &SHARDS, &jobs, 2) else { return };
    let node = |j: &str| placed_at(&story, j).first().map(|p| p.1.to_vec()).unwrap_or_default();
    assert!(node("whole")[0].starts_with("gpu-"), "{story:#?}");
    assert!(node("half")[0].starts_with("ts-"), "{story:#?}");
    assert_eq!(node("half"), node("quarter"), "{story:#?}");
}
