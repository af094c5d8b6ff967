//! `gpolc diff`: what a change to a policy changes. Each decision kind is proved
//! equivalent from the rules' canonical forms where it can be ([`proof`]); otherwise
//! cases drawn around the constants both versions compare with ([`vocab`],
//! [`generate`]) are played on both ([`probe`]), and every decision that differs is cut
//! down to a `test` block the reference interpreter confirms ([`witness`]). The result is
//! data ([`report`]), rendered at the edge ([`render`]). docs/diff.md says what each
//! verdict guarantees.

pub mod canon;
pub mod clusters;
pub mod generate;
pub mod grid;
pub mod outcome;
pub mod probe;
pub mod proof;
pub mod realize;
pub mod regions;
pub mod renames;
pub mod render;
pub mod replay;
pub mod report;
pub mod side;
pub mod smt;
pub mod vocab;
pub mod witness;
pub mod world;

use canon::Names;
use gpol_compiler::ir::RuleId;
use probe::{Finding, Probe, Tally};
use rayon::prelude::*;
use renames::Renames;
use report::{Counterexample, Decision, DecisionReport, Direction, Report, RuleRef, Verdict};
use side::Side;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use world::World;

/// How long to search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// This many cases.
    Cases(u64),
    /// Until this much time has passed.
    Time(Duration),
}

/// A budget that is neither a number of cases nor a time within the limits: the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadBudget(pub String);

impl std::fmt::Display for BadBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use gpol_compiler::limits::MAX_DIFF_CASES;
        write!(
            f,
            "`{}` is not a budget: give a number of cases (`5000`, at most {MAX_DIFF_CASES}) or a time (`10s`, `2m`, at most 24h)",
            self.0
        )
    }
}

impl std::error::Error for BadBudget {}

impl std::str::FromStr for Budget {
    type Err = BadBudget;

    /// `5000` (cases) or `10s`, `2m` (time).
    fn from_str(s: &str) -> Result<Budget, BadBudget> {
        use gpol_compiler::limits::{MAX_DIFF_CASES, MAX_DIFF_SECONDS};
        let bad = || BadBudget(s.to_string());
        let time = |secs: f64| {
            (secs > 0.0 && secs <= MAX_DIFF_SECONDS as f64).then(|| Budget::Time(Duration::from_secs_f64(secs)))
        };
        let scaled = |num: &str, unit: f64| num.parse::<f64>().ok().and_then(|x| time(x * unit)).ok_or_else(bad);
        if let Some(n) = s.strip_suffix('s') {
            return scaled(n, 1.0);
        }
        if let Some(n) = s.strip_suffix('m') {
            return scaled(n, 60.0);
        }
        if let Some(n) = s.strip_suffix('h') {
            return scaled(n, 3600.0);
        }
        s.parse::<u64>().ok().filter(|n| (1..=MAX_DIFF_CASES).contains(n)).map(Budget::Cases).ok_or_else(bad)
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Cases(n) => write!(f, "{n}"),
            Budget::Time(t) => write!(f, "{}s", t.as_secs_f64()),
        }
    }
}

/// What a diff searches with.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub seed: u64,
    pub budget: Budget,
    /// Cases of the exhaustive small-cluster domain at most ([`clusters`]): played
    /// besides the budget, its palette cut to fit.
    pub bound: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options { seed: 1, budget: Budget::Cases(DEFAULT_CASES), bound: DEFAULT_BOUND }
    }
}

/// Cases a diff plays unless told otherwise.
pub const DEFAULT_CASES: u64 = 4000;
/// Cases of the exhaustive small-cluster domain unless told otherwise.
pub const DEFAULT_BOUND: u64 = 100_000;
/// Differences kept per decision kind to look for counterexamples in.
const KEPT: usize = 24;
/// Counterexamples shown per decision kind (one per group of deciding rules).
const SHOWN: usize = 3;
/// Differences tried per group before giving up on showing it.
const TRIES: usize = 6;

/// Compares two versions of a policy.
pub fn diff(old: &Side, new: &Side, options: &Options) -> Report {
    let (on, nn) = (names(old), names(new));
    let renames = Renames::of(&on, &nn);
    let vocab = vocab::Vocab::of((old.policy(), old.program()), (new.policy(), new.program()));
    let mut reasons: BTreeMap<Decision, String> = BTreeMap::new();
    let mut region_points = Vec::new();
    // Decisions z3 found equal over the reals (not proved for doubles): still searched.
    let mut over_reals: BTreeMap<Decision, (String, u64)> = BTreeMap::new();
    for d in Decision::ALL {
        let renamed = |name: &str| renames.old_to_new(name).unwrap_or(name).to_string();
        let (a, b) = (proof::fingerprint(d, &on, &renamed), proof::fingerprint(d, &nn, &|x: &str| x.to_string()));
        let beyond = |n: &Names<'_>, rename: &dyn Fn(&str) -> String| proof::victim_set_beyond_conditions(n, rename);
        if a.is_some() && a == b {
            reasons.insert(d, proof_reason(d));
        } else if d == Decision::VictimSet
            && reasons.contains_key(&Decision::VictimEligibility)
            && beyond(&on, &renamed).is_some_and(|x| Some(x) == beyond(&nn, &|x: &str| x.to_string()))
        {
            reasons.insert(
                d,
                "the eviction rules' conditions agree everywhere (victim eligibility), with the same costs, victim order, filters, scores, gang clauses, quota tree and priority classes".into(),
            );
        } else {
            match by_regions(d, &on, &nn, &renames) {
                Some(ByRegions::Proved(why)) => {
                    reasons.insert(d, why);
                }
                Some(ByRegions::Differ(points)) => region_points.extend(points.into_iter().map(|p| (d, p))),
                Some(ByRegions::OverReals { domain, combinations }) => {
                    over_reals.insert(d, (domain, combinations));
                }
                None => {}
            }
        }
    }
    let proved: BTreeSet<Decision> = reasons.keys().copied().collect();
    // The rules each decision is put down to, worked out once.
    let changed_map: BTreeMap<Decision, (Vec<RuleId>, Vec<RuleId>)> =
        Decision::ALL.into_iter().map(|d| (d, changed_rules(d, &on, &nn))).collect();
    let changed = |d: Decision| changed_map.get(&d).cloned().unwrap_or_default();
    let probe = Probe { old, new, levels: &vocab.levels, renames: &renames, proved: &proved, changed: &changed };
    let mut search = Search::default();
    let mut grid_samples: Option<(String, Tally)> = None;
    let mut scenario_samples: Option<(String, Tally)> = None;
    let all_proved = proved.len() == Decision::ALL.len();
    if !all_proved {
        // First the cases made from points where the decision regions differ.
        let prefix = generate::name_prefix(&vocab);
        let made: Vec<World> = region_points.iter().map(|(_, p)| realize::world(p, &vocab, &prefix)).collect();
        search.merge(play(&probe, made.into_iter().map(|w| (w, None)).collect()));
        let made_cases = search.cases;
        // The exhaustive small domain.
        if let Some(g) = grid::grid(&vocab, &prefix) {
            let mut tally = Tally::default();
            let fresh = probe.fresh();
            if let Ok(findings) = probe.grid(&g.world, &fresh, &mut tally) {
                grid_samples = Some((g.domain.clone(), tally.clone()));
                let mut part = Search { tally, cases: 1, ..Search::default() };
                for f in findings {
                    part.record(f, &g.world, None);
                }
                search.merge(part);
            }
        }
        // The exhaustive small-cluster domain, for the decisions a cycle takes.
        if SCENARIO_KINDS.iter().any(|d| !proved.contains(d)) {
            let domain = clusters::domain(&vocab, options.bound, &|d| !proved.contains(&d));
            let world = |c: &clusters::Case| domain.world(c, vocab.levels.len(), &prefix);
            let parts: Vec<Search> = domain
                .cases
                .par_chunks(CHUNK as usize)
                .map(|c| play(&probe, c.iter().map(|x| (world(x), None)).collect()))
                .collect();
            let mut all = Search::default();
            for p in parts {
                all.merge(p);
            }
            scenario_samples = Some((domain.text, all.tally.clone()));
            search.merge(all);
        }
        // Then drawn ones, in chunks with seeds of their own: the same cases and the same
        // findings in the same order however many threads play them.
        let chunk = |k: u64, n: u64| {
            let seed = chunk_seed(options.seed, k);
            let mut cases = generate::Cases::new(&vocab, seed);
            let drawn = (0..n).filter_map(|i| Some((cases.next_world()?, Some(Drawn { seed, index: i }))));
            play(&probe, drawn.collect())
        };
        let started = Instant::now();
        let mut next = 0u64;
        loop {
            let wave: Vec<(u64, u64)> = match options.budget {
                Budget::Cases(n) => {
                    // The made cases count against the budget; the exhaustive ones do not.
                    let n = n.saturating_sub(made_cases);
                    let chunks = n.div_ceil(CHUNK);
                    (0..chunks).map(|k| (k, CHUNK.min(n - k * CHUNK))).collect()
                }
                Budget::Time(t) if started.elapsed() < t => {
                    let width = 4 * rayon::current_num_threads() as u64;
                    (next..next + width).map(|k| (k, CHUNK)).collect()
                }
                Budget::Time(_) => break,
            };
            next += wave.len() as u64;
            let results: Vec<Search> = wave.par_iter().map(|&(k, n)| chunk(k, n)).collect();
            for r in results {
                search.merge(r);
            }
            if matches!(options.budget, Budget::Cases(_)) {
                break;
            }
        }
    }
    let Search { tally, cases, kept, differed, direction } = search;
    let mut shrinker = witness::Shrinker::new(old, new, &vocab.levels, &renames);
    shrinker.blur_filters = proved.contains(&Decision::Feasibility);
    let declarations = changed_declarations(old, new);
    let deciding = |d: Decision,
                    f: &Finding,
                    changed: &dyn Fn(Decision) -> (Vec<RuleId>, Vec<RuleId>),
                    declarations: &(Vec<RuleRef>, Vec<RuleRef>)| {
        // The finding's own rules; a side that names none is put down to what changed in it.
        let (mut a, mut b) = (f.old_rules.clone(), f.new_rules.clone());
        if a.is_empty() || b.is_empty() {
            let (ca, cb) = changed(d);
            if a.is_empty() {
                a = ca;
            }
            if b.is_empty() {
                b = cb;
            }
        }
        let (mut ra, mut rb) = (rule_refs(old, &a), rule_refs(new, &b));
        if ra.is_empty() && rb.is_empty() {
            (ra, rb) = declarations.clone();
        }
        (ra, rb)
    };
    let decisions = Decision::ALL
        .into_iter()
        .map(|d| {
            let mut counterexamples = Vec::new();
            let mut ties_only = 0u64;
            type Key = (Vec<RuleRef>, Vec<RuleRef>);
            let mut groups: Vec<(Key, usize)> = Vec::new();
            for (f, w, drawn) in kept.get(&d).map_or(&[][..], Vec::as_slice) {
                if counterexamples.len() >= SHOWN {
                    break;
                }
                // Grouped by the rules each version's decision is put down to: one
                // counterexample per group.
                let (old_rules, new_rules) = deciding(d, f, &changed, &declarations);
                let key = (old_rules.clone(), new_rules.clone());
                let group = match groups.iter().position(|g| g.0 == key) {
                    Some(g) => g,
                    None => {
                        groups.push((key, 0));
                        groups.len() - 1
                    }
                };
                let tries = &mut groups[group].1;
                if *tries == usize::MAX || *tries >= TRIES {
                    continue;
                }
                *tries += 1;
                let name = format!("gpolc diff: {} {}", d.title(), counterexamples.len() + 1);
                // A drawn case is first shrunk by proptest while the decision still
                // differs; the counterexample is sought there, then in the case as found.
                let shrunk = drawn.and_then(|x| proptest_shrink(&probe, &vocab, x, f));
                let mut found = Err(witness::Miss::NotShown);
                for (f, w) in shrunk.iter().map(|(f, w)| (f, w)).chain([(f, w)]) {
                    found = shrinker.witness(w, f, &name);
                    if found.is_ok() {
                        break;
                    }
                }
                if matches!(found, Err(witness::Miss::Tie)) {
                    ties_only += 1;
                }
                if let Ok(wit) = found {
                    groups[group].1 = usize::MAX;
                    counterexamples.push(Counterexample {
                        decision: d,
                        direction: f.direction,
                        old_rules,
                        new_rules,
                        test: wit.test,
                        old_expectations: wit.old_expectations,
                        new_expectations: wit.new_expectations,
                    });
                }
            }
            let count = differed.get(&d).copied().unwrap_or(0);
            let verdict = if proved.contains(&d) {
                Verdict::Proved { reason: reasons.get(&d).cloned().unwrap_or_default() }
            } else if !counterexamples.is_empty() {
                Verdict::Different { direction: direction.get(&d).copied().unwrap_or(Direction::Changed) }
            } else if let Some((domain, n)) = over_reals.get(&d).filter(|_| count == 0) {
                Verdict::UpToBound { domain: domain.clone(), cases: *n }
            } else if let Some((domain, t)) = grid_samples.as_ref().filter(|(_, t)| {
                count == 0
                    && GRID_KINDS.contains(&d)
                    && t.samples_of(d) > 0
                    && !region_points.iter().any(|(x, _)| *x == d)
            }) {
                Verdict::UpToBound { domain: domain.clone(), cases: t.samples_of(d) }
            } else if let Some((domain, t)) = scenario_samples
                .as_ref()
                .filter(|(_, t)| count == 0 && SCENARIO_KINDS.contains(&d) && t.samples_of(d) > 0)
            {
                Verdict::UpToBound { domain: domain.clone(), cases: t.samples_of(d) }
            } else if count > 0 || region_points.iter().any(|(x, _)| *x == d) {
                // A difference seen in a decision, or at a point of the decision regions,
                // that no schedule showed.
                Verdict::Inconclusive { unconfirmed: count.max(1) }
            } else {
                match tally.samples_of(d) {
                    // Not proved and never reached: nothing is known.
                    0 => Verdict::Inconclusive { unconfirmed: 0 },
                    samples => Verdict::Sampled { samples },
                }
            };
            DecisionReport {
                decision: d,
                verdict,
                samples: tally.samples_of(d),
                differed: count,
                ties: ties_only,
                counterexamples,
            }
        })
        .collect();
    Report {
        old: old.label.clone(),
        new: new.label.clone(),
        seed: options.seed,
        cases,
        pairs: tally.pairs,
        decisions,
        renames: renames.list,
        notes: notes(old, new, &vocab),
        replay: Vec::new(),
    }
}

/// What limits the comparison, in words: leaf queues only one version has (cases put
/// jobs only in queues both have).
fn notes(old: &Side, new: &Side, vocab: &vocab::Vocab) -> Vec<String> {
    let leaves = |s: &Side| -> Vec<String> {
        let p = s.policy();
        match p.has_implicit_queue() {
            true => Vec::new(),
            false => p.queues.iter().filter(|q| q.children.is_empty()).map(|q| q.name.clone()).collect(),
        }
    };
    let (a, b) = (leaves(old), leaves(new));
    let only = |x: &[String], y: &[String]| x.iter().filter(|q| !y.contains(q)).cloned().collect::<Vec<_>>();
    let (gone, added) = (only(&a, &b), only(&b, &a));
    let mut out = Vec::new();
    if !a.is_empty() && !b.is_empty() && vocab.leaves.is_empty() {
        out.push(format!(
            "the versions have no leaf queue in common (old: {}; new: {}): cases put jobs in queues both have, so none could be played",
            a.join(", "),
            b.join(", ")
        ));
    } else if !gone.is_empty() || !added.is_empty() {
        out.push(format!(
            "leaf queues only old has: {}; only new has: {} (cases use the queues both have)",
            if gone.is_empty() { "none".into() } else { gone.join(", ") },
            if added.is_empty() { "none".into() } else { added.join(", ") }
        ));
    }
    out
}

/// Replays a trace on both versions (see [`replay`]) and adds what it found to `report`.
pub fn add_replay(
    report: &mut Report,
    old: &Side,
    new: &Side,
    cluster: &gpol_sim::cluster_file::ClusterSpec,
    workload: &gpol_sim::Workload,
    mode: gpol_sim::Mode,
) -> Result<(), gpol_sim::SimError> {
    let renames = Renames::of(&names(old), &names(new));
    report.replay.push(replay::replay(old, new, &renames, cluster, workload, mode, report.seed)?);
    Ok(())
}

/// The decisions a grid covers exhaustively.
const GRID_KINDS: [Decision; 4] = [Decision::Admission, Decision::Feasibility, Decision::Ranking, Decision::JobOrder];

/// The decisions the small-cluster domain covers exhaustively.
const SCENARIO_KINDS: [Decision; 5] =
    [Decision::Quota, Decision::QueueOrder, Decision::Gang, Decision::VictimEligibility, Decision::VictimSet];

/// Cases played per chunk of the search.
const CHUNK: u64 = 50;

/// What a search found: decisions compared, and each that differed.
#[derive(Default)]
struct Search {
    tally: Tally,
    cases: u64,
    /// The first differences of each kind, with their cases.
    kept: BTreeMap<Decision, Vec<(Finding, World, Option<Drawn>)>>,
    differed: BTreeMap<Decision, u64>,
    direction: BTreeMap<Decision, Direction>,
}

impl Search {
    fn record(&mut self, f: Finding, w: &World, drawn: Option<Drawn>) {
        *self.differed.entry(f.decision).or_default() += 1;
        self.direction.entry(f.decision).and_modify(|d| *d = d.join(f.direction)).or_insert(f.direction);
        let list = self.kept.entry(f.decision).or_default();
        if list.len() < KEPT {
            list.push((f, w.clone(), drawn));
        }
    }

    /// Adds a later part of the search.
    fn merge(&mut self, other: Search) {
        self.tally.add(&other.tally);
        self.cases += other.cases;
        for (d, n) in other.differed {
            *self.differed.entry(d).or_default() += n;
        }
        for (d, dir) in other.direction {
            self.direction.entry(d).and_modify(|x| *x = x.join(dir)).or_insert(dir);
        }
        for (d, list) in other.kept {
            let mine = self.kept.entry(d).or_default();
            let room = KEPT.saturating_sub(mine.len());
            mine.extend(list.into_iter().take(room));
        }
    }
}

/// Where a drawn case came from: its chunk's seed and its place in the chunk.
#[derive(Clone, Copy, Debug)]
struct Drawn {
    seed: u64,
    index: u64,
}

/// Evaluations proptest's shrinking may take per counterexample.
const SHRINK_PLAYS: usize = 300;

/// A drawn case redrawn from its seed and shrunk by proptest while the same difference
/// (decision, direction and deciding rules) shows in it, with the difference found there.
fn proptest_shrink(probe: &Probe<'_>, vocab: &vocab::Vocab, drawn: Drawn, like: &Finding) -> Option<(Finding, World)> {
    let mut cases = generate::Cases::new(vocab, drawn.seed);
    for _ in 0..drawn.index {
        cases.next_tree()?;
    }
    let mut tree = cases.next_tree()?;
    let fresh = probe.fresh();
    let first = |w: &World| -> Option<Finding> {
        probe.run(w, &fresh, &mut Tally::default()).ok()?.into_iter().find(|f| {
            (f.decision, f.direction, &f.old_rules, &f.new_rules)
                == (like.decision, like.direction, &like.old_rules, &like.new_rules)
        })
    };
    let small = generate::shrink(tree.as_mut(), &mut |w| first(w).is_some(), SHRINK_PLAYS);
    Some((first(&small)?, small))
}

/// Plays cases on both versions.
fn play(probe: &Probe<'_>, worlds: Vec<(World, Option<Drawn>)>) -> Search {
    let mut s = Search::default();
    let fresh = probe.fresh();
    for (w, drawn) in worlds {
        let mut tally = Tally::default();
        let Ok(findings) = probe.run(&w, &fresh, &mut tally) else { continue };
        s.tally.add(&tally);
        s.cases += 1;
        for f in findings.into_iter().filter(|f| !probe.proved.contains(&f.decision)) {
            s.record(f, &w, drawn);
        }
    }
    s
}

/// The seed of chunk `k`.
fn chunk_seed(seed: u64, k: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k.wrapping_mul(0xD1B5_4A32_D192_ED03).rotate_left(17)
}

fn names(side: &Side) -> Names<'_> {
    Names { policy: side.policy(), program: side.program() }
}

/// Admission or feasibility proved by decision regions (see [`regions`]): the reason, or
/// a point where the versions differ; `None` where the method does not apply.
fn by_regions(d: Decision, old: &Names<'_>, new: &Names<'_>, renames: &Renames) -> Option<ByRegions> {
    fn rules<'r>(
        list: &'r [gpol_compiler::ir::Rule],
        rename: bool,
        renames: &Renames,
    ) -> Vec<(String, bool, &'r gpol_compiler::ir::Node)> {
        list.iter()
            .map(|r| {
                let name = match rename {
                    true => renames.old_to_new(&r.name).unwrap_or(&r.name).to_string(),
                    false => r.name.clone(),
                };
                (name, r.is_static, &r.body.node)
            })
            .collect()
    }
    let (a, b) = match d {
        Decision::Admission => (rules(&old.program.admit, true, renames), rules(&new.program.admit, false, renames)),
        Decision::Feasibility => {
            (rules(&old.program.filters, true, renames), rules(&new.program.filters, false, renames))
        }
        Decision::VictimEligibility => (victim_rules(old, true, renames), victim_rules(new, false, renames)),
        _ => return None,
    };
    // Admission: whether the job is refused, for good or for now (the first refusing
    // rule decides), and by which rules; feasibility: by which filters.
    let observed = move |answers: &[(String, bool, bool)]| -> String {
        let mut refusing: Vec<&str> = answers.iter().filter(|(_, _, ok)| !ok).map(|(n, _, _)| n.as_str()).collect();
        let permanent = answers.iter().find(|(_, _, ok)| !ok).is_some_and(|(_, s, _)| *s);
        refusing.sort_unstable();
        match d {
            Decision::Admission => format!("{permanent} {refusing:?}"),
            // The victim rules whose conditions hold, in order (the first that allows names
            // the eviction; a `protect` forbids it).
            Decision::VictimEligibility => {
                let holding: Vec<&str> = answers.iter().filter(|(_, _, ok)| *ok).map(|(n, _, _)| n.as_str()).collect();
                format!("{holding:?}")
            }
            _ => format!("{refusing:?}"),
        }
    };
    // Fields computed from declarations mean the same in both only when those are equal.
    let same = |f: fn(&gpol_compiler::hir::Policy) -> String| f(old.policy) == f(new.policy);
    let (classes, tree) = (same(proof::classes), same(proof::tree));
    // Whether a victim may be evicted also depends on the quota tree (reclaim and borrow
    // rules evict only from borrowing queues): only with equal trees do equal rule
    // answers mean equal eligibility.
    if d == Decision::VictimEligibility && !tree {
        return None;
    }
    let shared = move |v: &str| {
        let field = v.split_once('.').map_or(v, |(_, f)| f);
        match field {
            "priority" => classes,
            "user_usage" | "fair_tree" => tree,
            f if f.starts_with("queue.") => tree,
            _ => true,
        }
    };
    let (a, b) = (regions::Rules { names: old, rules: a }, regions::Rules { names: new, rules: b });
    let (result, by_z3) = match regions::compare(&a, &b, &observed, &shared) {
        regions::Regions::NotApplicable => (smt::compare(&a, &b, &observed, &shared), true),
        r => (r, false),
    };
    let what = match d {
        Decision::Admission => "the admit rules",
        Decision::VictimEligibility => "the eviction rules' conditions",
        _ => "the filters",
    };
    match result {
        // A point of the eviction rules is not made into a case (it would need a claimant
        // and a victim with a history): the search looks for the difference instead.
        regions::Regions::Differ(_) if d == Decision::VictimEligibility => None,
        regions::Regions::Differ(points) => Some(ByRegions::Differ(points)),
        regions::Regions::NotApplicable => None,
        regions::Regions::Equal { points, fields } => Some(ByRegions::Proved(match by_z3 {
            true => format!(
                "z3: both versions agree in all {points} combinations of answers of {what} ({})",
                fields.join(", ")
            ),
            false => format!(
                "decision regions: both versions agree at all {points} points that decide {what} ({})",
                fields.join(", ")
            ),
        })),
        regions::Regions::EqualOverReals { combinations, fields } => Some(ByRegions::OverReals {
            domain: format!(
                "every real value of {} (z3: all {combinations} combinations of answers of {what} agree; rounding of doubles at a boundary is not modelled)",
                fields.join(", ")
            ),
            combinations,
        }),
    }
}

/// What the decision regions (or z3) say of a decision kind.
enum ByRegions {
    Proved(String),
    /// Points where the versions differ.
    Differ(Vec<BTreeMap<String, regions::V>>),
    /// Equal over the reals, not proved for doubles: the stated domain, and how many
    /// combinations were checked.
    OverReals {
        domain: String,
        combinations: u64,
    },
}

/// The `when` conditions of a version's eviction rules, named by kind and name.
fn victim_rules<'r>(
    side: &'r Names<'_>,
    rename: bool,
    renames: &Renames,
) -> Vec<(String, bool, &'r gpol_compiler::ir::Node)> {
    (side.program.victims.iter())
        .map(|r| {
            let name = match rename {
                true => renames.old_to_new(&r.name).unwrap_or(&r.name),
                false => &r.name,
            };
            (format!("{:?} {name}", r.kind), false, &r.when.node)
        })
        .collect()
}

fn proof_reason(d: Decision) -> String {
    let what = match d {
        Decision::Admission => "the same admit rules",
        Decision::Quota => "the same quota tree and accounting settings",
        Decision::Feasibility => "the same filters",
        Decision::Ranking => "the same scores, tiers and weights",
        Decision::CardChoice => "the same card scores",
        Decision::Gang => "the same gang clauses, filters and scores",
        Decision::QueueOrder => "the same queue_order keys and quota tree",
        Decision::JobOrder => "the same job_order keys",
        Decision::VictimEligibility => "the same eviction and protect conditions",
        Decision::VictimSet => "the same eviction rules, costs, victim_order, placement rules and quota tree",
    };
    format!("{what} (up to names, order and spelling), reading the same declarations")
}

/// The rules of each version that have no equal (by canonical form, and weight, tier,
/// direction or cost where the rule has one) in the other.
fn changed_rules(d: Decision, old: &Names<'_>, new: &Names<'_>) -> (Vec<RuleId>, Vec<RuleId>) {
    let forms = |n: &Names<'_>| -> Vec<(RuleId, Option<String>)> {
        n.program
            .bodies()
            .into_iter()
            .filter(|(id, _, _)| kind_of(*id).contains(&d))
            .map(|(id, _, body)| (id, canon::form(&body.node, n).map(|f| format!("{} {f}", extras(id, n)))))
            .collect()
    };
    let (a, b) = (forms(old), forms(new));
    let unmatched = |x: &[(RuleId, Option<String>)], y: &[(RuleId, Option<String>)]| -> Vec<RuleId> {
        x.iter().filter(|(_, f)| f.is_none() || !y.iter().any(|(_, g)| g == f)).map(|(id, _)| *id).collect()
    };
    (unmatched(&a, &b), unmatched(&b, &a))
}

/// What besides its body makes a rule behave as it does.
fn extras(id: RuleId, n: &Names<'_>) -> String {
    let p = n.program;
    let i = |k: u16| usize::from(k);
    match id {
        RuleId::Score(k) => p.scores.get(i(k)).map(|r| format!("tier {:?} weight {:?}", r.tier, r.weight)),
        RuleId::CardScore(k) => p.card_scores.get(i(k)).map(|r| format!("weight {:?}", r.weight)),
        RuleId::QueueOrder(k) => p.queue_order.get(i(k)).map(|o| format!("{:?} key {k}", o.dir)),
        RuleId::JobOrder(k) => p.job_order.get(i(k)).map(|o| format!("{:?} key {k}", o.dir)),
        RuleId::VictimOrder(k) => p.victim_order.get(i(k)).map(|o| format!("{:?} key {k}", o.dir)),
        RuleId::Gang(k) => p.gang.get(i(k)).map(|g| {
            let level = p.levels.get(usize::from(g.level)).cloned().unwrap_or_default();
            format!("{:?} {level} weight {:?}", g.kind, g.weight)
        }),
        RuleId::Victim(k) => p.victims.get(i(k)).map(|v| {
            let cost = v.cost.as_ref().and_then(|c| canon::form(&c.node, n));
            format!("{:?} cost {cost:?}", v.kind)
        }),
        RuleId::Admit(_) | RuleId::Filter(_) => None,
    }
    .unwrap_or_default()
}

/// The decisions a rule takes part in.
fn kind_of(id: RuleId) -> Vec<Decision> {
    match id {
        RuleId::Admit(_) => vec![Decision::Admission],
        RuleId::Filter(_) => vec![Decision::Feasibility, Decision::Gang],
        RuleId::Score(_) => vec![Decision::Ranking, Decision::Gang],
        RuleId::CardScore(_) => vec![Decision::CardChoice],
        RuleId::QueueOrder(_) => vec![Decision::QueueOrder],
        RuleId::JobOrder(_) => vec![Decision::JobOrder],
        RuleId::Gang(_) => vec![Decision::Gang],
        RuleId::Victim(_) => vec![Decision::VictimEligibility, Decision::VictimSet],
        RuleId::VictimOrder(_) => vec![Decision::VictimSet],
    }
}

/// Declarations of each version with no equal in the other: queues (quotas, weight,
/// accounting, attributes, place in the tree) and priority classes, by name.
fn changed_declarations(old: &Side, new: &Side) -> (Vec<RuleRef>, Vec<RuleRef>) {
    let queues = |s: &Side| -> Vec<(String, String, gpol_compiler::source::Span)> {
        let p = s.policy();
        p.queues
            .iter()
            .filter(|q| !q.is_implicit())
            .map(|q| {
                let parent = q.parent.and_then(|i| p.queues.get(i)).map(|x| x.name.clone());
                let attrs: Vec<(String, String)> = (q.attrs.iter())
                    .map(|(a, v)| {
                        (p.attrs.get(usize::from(*a)).map(|x| x.name.clone()).unwrap_or_default(), format!("{v:?}"))
                    })
                    .collect();
                let form = format!(
                    "{parent:?} {:?} {} {:?} {} {:?} {:?} {:?} {attrs:?}",
                    q.quotas,
                    proof::windows(q),
                    q.unset_guarantee,
                    q.fairshare_parent,
                    q.weight,
                    q.usage_half_life,
                    q.queueing
                );
                (q.name.clone(), form, q.span)
            })
            .collect()
    };
    let classes = |s: &Side| -> Vec<(String, String)> {
        s.policy().priority_classes.iter().map(|(n, v)| (n.clone(), format!("{v:?}"))).collect()
    };
    let refs = |s: &Side, other: &Side| -> Vec<RuleRef> {
        let theirs = queues(other);
        let mut out: Vec<RuleRef> = queues(s)
            .into_iter()
            .filter(|q| !theirs.iter().any(|t| t.0 == q.0 && t.1 == q.1))
            .map(|(name, _, span)| {
                let file = s.sources.get(span.file);
                let (line, column) = file.line_col(span.start as usize);
                RuleRef { label: format!("queue {name}"), file: file.name.clone(), line, column }
            })
            .collect();
        let their_classes = classes(other);
        for (name, value) in classes(s).into_iter().filter(|c| !their_classes.contains(c)) {
            let at = s.text.find(&format!("priority_class {name}")).unwrap_or(0);
            let file = s.sources.get(s.file);
            let (line, column) = file.line_col(at);
            out.push(RuleRef {
                label: format!("priority_class {name} = {value}"),
                file: file.name.clone(),
                line,
                column,
            });
        }
        out
    };
    (refs(old, new), refs(new, old))
}

/// Where rules are written.
fn rule_refs(side: &Side, rules: &[RuleId]) -> Vec<RuleRef> {
    rules
        .iter()
        .map(|&id| {
            let span = side.program().rule_span(side.policy(), id).unwrap_or_default();
            let file = side.sources.get(span.file);
            let (line, column) = file.line_col(span.start as usize);
            RuleRef { label: side.program().rule_label(id), file: file.name.clone(), line, column }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_cases_or_times_within_their_limits() {
        assert_eq!("4000".parse(), Ok(Budget::Cases(4000)));
        assert_eq!("10s".parse(), Ok(Budget::Time(Duration::from_secs(10))));
        assert_eq!("2m".parse(), Ok(Budget::Time(Duration::from_secs(120))));
        assert_eq!("1h".parse(), Ok(Budget::Time(Duration::from_secs(3600))));
        for bad in ["0", "-5", "soon", "25h", "0s", "NaNs", "50000001", ""] {
            assert!(bad.parse::<Budget>().is_err(), "{bad}");
        }
    }

    #[test]
    fn chunks_have_seeds_of_their_own() {
        let seeds: std::collections::BTreeSet<u64> = (0..1000).map(|k| chunk_seed(1, k)).collect();
        assert_eq!(seeds.len(), 1000);
        assert_ne!(chunk_seed(1, 0), chunk_seed(2, 0));
    }
}
