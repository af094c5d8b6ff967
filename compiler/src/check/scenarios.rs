//! `test` blocks: scenarios of nodes, jobs, time and expectations, checked against the
//! policy so a typo in a test is an error, not a silently passing test.

use super::Checker;
use super::expr::Scope;
use crate::diag::{Code, Diagnostic, snippet};
use crate::fuzzy;
use crate::hir::{self, Expect, Step, TestName, Value};
use crate::kinds::{RuleKind, VictimKind};
use crate::limits::{
    MAX_ALLOWED_MODELS, MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD, MAX_CLOCK_MS, MAX_CPU_CORES, MAX_MEMORY_BYTES,
    MAX_NODES, MAX_REPLICAS,
};
use crate::schema::{Context, EnumKind, Record};
use crate::source::Span;
use crate::spec::{History, JobSpec, NodeSpec, Request, Sharing};
use crate::syntax::{self as ast, Expectation, Item, Prop, TestStmt};
use crate::types::Ty;
use crate::units::Dim;
use std::collections::HashMap;

/// Reasons a job can be pending that are not rules.
pub(crate) const BUILTIN_REASONS: &[&str] = &["quota", "capacity", "order", "gang", "unschedulable"];

/// What kind of value a property takes.
#[derive(Clone, Copy)]
enum Kind {
    /// A number in a unit; `bare` allows a plain number to mean that unit.
    Num(Dim, bool),
    Flag,
    /// A name, written bare or as a string.
    Symbol,
    Enum(EnumKind),
    MigList,
    StrList,
}

const NODE_PROPS: &[(&str, Kind)] = &[
    ("model", Kind::Symbol),
    ("cards", Kind::Num(Dim::GPU, true)),
    ("gpu_mem", Kind::Num(Dim::BYTES, false)),
    ("sharing", Kind::Enum(EnumKind::Sharing)),
    ("mig", Kind::MigList),
    ("max_clients", Kind::Num(Dim::NONE, true)),
    ("cpu", Kind::Num(Dim::CPU, true)),
    ("mem", Kind::Num(Dim::BYTES, false)),
];

const JOB_PROPS: &[(&str, Kind)] = &[
    ("queue", Kind::Symbol),
    ("user", Kind::Symbol),
    ("priority_class", Kind::Symbol),
    ("priority", Kind::Num(Dim::NONE, true)),
    ("cards", Kind::Num(Dim::GPU, true)),
    ("fraction", Kind::Num(Dim::GPU, true)),
    ("mig", Kind::Enum(EnumKind::MigProfile)),
    ("replicas", Kind::Num(Dim::NONE, true)),
    ("min_replicas", Kind::Num(Dim::NONE, true)),
    ("gpu_mem", Kind::Num(Dim::BYTES, false)),
    ("cpu", Kind::Num(Dim::CPU, true)),
    ("mem", Kind::Num(Dim::BYTES, false)),
    ("models", Kind::StrList),
    ("bursty", Kind::Flag),
    ("latency_critical", Kind::Flag),
    ("preemptible", Kind::Flag),
    ("duration", Kind::Num(Dim::TIME, false)),
    ("checkpoint", Kind::Num(Dim::TIME, false)),
    ("utilization", Kind::Num(Dim::NONE, true)),
    ("runtime", Kind::Num(Dim::TIME, false)),
    ("since_checkpoint", Kind::Num(Dim::TIME, false)),
    ("evictions", Kind::Num(Dim::NONE, true)),
];

impl Checker<'_> {
    pub(super) fn check_tests(&mut self, m: usize, parsed: &ast::File, p: &mut hir::Policy) {
        let mut names: HashMap<String, Span> = HashMap::new();
        let rules: Vec<String> = parsed
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Rule(r) if matches!(r.kind, RuleKind::Admit | RuleKind::Filter) => Some(r.name.name.clone()),
                _ => None,
            })
            .collect();
        for item in &parsed.items {
            let Item::Test(t) = item else { continue };
            if let Some(first) = names.get(&t.name.value) {
                self.err(
                    Diagnostic::new(
                        Code::Duplicate,
                        t.name.span,
                        format!("test \"{}\" is defined twice", snippet(&t.name.value)),
                    )
                    .label("second definition")
                    .with_secondary(*first, "first defined here")
                    .help("give each test a unique name"),
                );
            }
            names.insert(t.name.value.clone(), t.name.span);
            let test = self.check_test(m, t, &rules, p);
            p.tests.push(test);
        }
    }

    fn check_test(&mut self, m: usize, t: &ast::TestBlock, rules: &[String], p: &hir::Policy) -> hir::Test {
        let mut nodes: HashMap<String, Span> = HashMap::new();
        let mut jobs: HashMap<String, Span> = HashMap::new();
        let mut steps = Vec::new();
        // The test's clock, in seconds: the sum of its `advance`s.
        let mut clock = 0.0;
        for s in &t.stmts {
            match s {
                TestStmt::Node { names, props, span } => {
                    let template = self.test_node(m, props, *span);
                    for n in names {
                        let count = n.range.map_or(1, |(a, b)| u64::from(b.saturating_sub(a)) + 1);
                        if nodes.len() as u64 + count > u64::from(MAX_NODES) {
                            self.err(
                                Diagnostic::new(
                                    Code::TestScenario,
                                    n.name.span,
                                    format!("too many nodes in one test: at most {MAX_NODES}"),
                                )
                                .label(format!("these would make {}", nodes.len() as u64 + count))
                                .help("docs/limits.md lists the limits of clusters"),
                            );
                            break;
                        }
                        let expanded: Vec<String> = match n.range {
                            Some((a, b)) => (a..=b).map(|i| format!("{}{i}", n.name.name)).collect(),
                            None => vec![n.name.name.clone()],
                        };
                        for name in expanded {
                            if !self.declare(&name, n.name.span, "node", &nodes, &jobs, p) {
                                continue;
                            }
                            nodes.insert(name.clone(), n.name.span);
                            steps.push(Step::Node(NodeSpec { name, ..template.clone() }));
                        }
                    }
                }
                TestStmt::Submit { job, props, .. } | TestStmt::Run { job, props, .. } => {
                    self.declare(&job.name, job.span, "job", &nodes, &jobs, p);
                    jobs.insert(job.name.clone(), job.span);
                    let (j, history) = self.test_job(m, job, props, p);
                    match s {
                        TestStmt::Run { nodes: on, .. } => {
                            for n in on {
                                self.known(&nodes, n, "node");
                            }
                            self.distinct(on);
                            if on.len() != j.replicas as usize {
                                let at = on.first().map_or(job.span, |f| f.span.to(on[on.len() - 1].span));
                                self.err(
                                    Diagnostic::new(
                                        Code::TestScenario,
                                        at,
                                        format!(
                                            "job `{}` has {} replica(s) on {} node(s)",
                                            job.name,
                                            j.replicas,
                                            on.len()
                                        ),
                                    )
                                    .label("one node per replica")
                                    .help("list one node for each replica, or set `replicas`"),
                                );
                            }
                            steps.push(Step::Run(j, on.iter().map(|n| n.name.clone()).collect(), history));
                        }
                        _ => steps.push(Step::Submit(j)),
                    }
                }
                TestStmt::Advance(e, _) => {
                    if let Some(d) = self.const_number(m, e, &Ty::Num(Dim::TIME), "`advance`") {
                        if d < 0.0 {
                            self.err(
                                Diagnostic::new(Code::TestScenario, e.span, "time cannot go backwards")
                                    .label("negative duration")
                                    .help("advance by a positive duration"),
                            );
                        } else if clock + d > (MAX_CLOCK_MS / 1000) as f64 {
                            let max = MAX_CLOCK_MS / 1000;
                            self.err(
                                Diagnostic::new(
                                    Code::TestScenario,
                                    e.span,
                                    format!("time too large: the test's clock would pass {max}s (100 years)"),
                                )
                                .label(format!("advancing {}s from {}s", shown(d), shown(clock)))
                                .help("docs/limits.md lists the limits of time"),
                            );
                        } else {
                            clock += d;
                            steps.push(Step::Advance(d));
                        }
                    }
                }
                TestStmt::Complete(j, _) => {
                    self.known(&jobs, j, "job");
                    steps.push(Step::Complete(j.name.clone()));
                }
                TestStmt::Fail(n, _) => {
                    self.known(&nodes, n, "node");
                    steps.push(Step::Fail(n.name.clone()));
                }
                TestStmt::Usage { queue, user, amount, .. } => {
                    let q = if user.is_some() {
                        let why = (
                            "users have usage in leaf queues",
                            "name one of its children, or drop `user` to set the queue's own usage",
                        );
                        self.leaf_queue(p, &queue.name, queue.span, why)
                    } else {
                        self.known_queue(p, &queue.name, queue.span)
                    };
                    let amount = self.const_number(m, amount, &Ty::Num(Dim::GPU_TIME), "`usage`");
                    if let Some(a) = amount
                        && !(a >= 0.0 && a.is_finite())
                    {
                        self.err(
                            Diagnostic::new(Code::TestScenario, queue.span, "usage is a finite amount, not negative")
                                .label(format!("usage {a}"))
                                .help("usage is billed time, e.g. `4 gpu * 1h`"),
                        );
                    } else if let (Some(queue), Some(amount)) = (q, amount) {
                        steps.push(Step::Usage { queue, user: user.as_ref().map(|u| u.name.clone()), amount });
                    }
                }
                TestStmt::Expect(e, span) => {
                    if let Some(x) = self.expectation(m, e, &nodes, &jobs, rules, p) {
                        steps.push(Step::Expect(x, *span));
                    }
                }
            }
        }
        hir::Test { name: t.name.value.clone(), steps, span: t.span }
    }

    /// A node or job name must be new in the test and differ from every queue's name, so
    /// `expect NAME.field` is never ambiguous.
    fn declare(
        &mut self,
        name: &str,
        at: Span,
        what: &str,
        nodes: &HashMap<String, Span>,
        jobs: &HashMap<String, Span>,
        p: &hir::Policy,
    ) -> bool {
        let clash = if let Some(first) = nodes.get(name) {
            Some(("a node", Some(*first)))
        } else if let Some(first) = jobs.get(name) {
            Some(("a job", Some(*first)))
        } else if p.queue(name).is_some() {
            Some(("a queue", None))
        } else {
            None
        };
        let Some((other, first)) = clash else { return true };
        let mut d = Diagnostic::new(Code::Duplicate, at, format!("`{}` already names {other}", snippet(name)))
            .label(format!("this {what}"))
            .help("queues, nodes and jobs of a test need distinct names");
        if let Some(first) = first {
            d = d.with_secondary(first, "first used here");
        }
        self.err(d);
        false
    }

    fn distinct(&mut self, names: &[ast::Ident]) {
        for (i, n) in names.iter().enumerate() {
            if let Some(first) = names[..i].iter().find(|m| m.name == n.name) {
                self.err(
                    Diagnostic::new(Code::TestScenario, n.span, format!("node `{}` is listed twice", n.name))
                        .label("repeated")
                        .with_secondary(first.span, "first listed here")
                        .help("a node appears once in the list"),
                );
            }
        }
    }

    /// The queue named `name`, or E0021 (with the nearest name) when there is none.
    fn known_queue(&mut self, p: &hir::Policy, name: &str, at: Span) -> Option<usize> {
        let q = p.queue(name);
        if q.is_none() {
            let sugg = fuzzy::suggest(name, p.queues.iter().map(|q| q.name.as_str()));
            self.err(
                Diagnostic::new(Code::UnknownQueue, at, format!("no queue is named `{}`", snippet(name)))
                    .label("unknown queue")
                    .help(fuzzy::help(sugg, || "declare the queue in the policy's queue tree".into())),
            );
        }
        q
    }

    /// The leaf queue named `name`; for a parent, E0021 with `why` (label, help).
    fn leaf_queue(&mut self, p: &hir::Policy, name: &str, at: Span, why: (&str, &str)) -> Option<usize> {
        let q = self.known_queue(p, name, at)?;
        if !p.queues[q].children.is_empty() {
            self.err(
                Diagnostic::new(Code::UnknownQueue, at, format!("queue `{}` is not a leaf", snippet(name)))
                    .label(why.0)
                    .help(why.1),
            );
            return None;
        }
        Some(q)
    }

    fn known(&mut self, names: &HashMap<String, Span>, n: &ast::Ident, what: &str) -> bool {
        if names.contains_key(&n.name) {
            return true;
        }
        let sugg = fuzzy::suggest(&n.name, names.keys().map(String::as_str));
        self.err(
            Diagnostic::new(Code::TestScenario, n.span, format!("this test declares no {what} `{}`", snippet(&n.name)))
                .label(format!("unknown {what}"))
                .help(match sugg {
                    Some(s) => format!("did you mean `{s}`?"),
                    None if what == "job" => {
                        "declare jobs with `submit NAME { … }` or `run NAME on NODE { … }` first".into()
                    }
                    None => "declare nodes with `node NAME { … }` first".into(),
                }),
        );
        false
    }

    fn expectation(
        &mut self,
        m: usize,
        e: &Expectation,
        nodes: &HashMap<String, Span>,
        jobs: &HashMap<String, Span>,
        rules: &[String],
        p: &hir::Policy,
    ) -> Option<Expect> {
        Some(match e {
            Expectation::On { job, nodes: on } => {
                let mut ok = self.known(jobs, job, "job");
                for n in on {
                    ok &= self.known(nodes, n, "node");
                }
                self.distinct(on);
                Expect::On(job.name.clone(), on.iter().map(|n| n.name.clone()).collect()).into_ok(ok)?
            }
            Expectation::Pending { job, because } | Expectation::Rejected { job, because } => {
                let ok = self.known(jobs, job, "job");
                if let Some(r) = because {
                    let is_rule = rules.contains(&r.name) || BUILTIN_REASONS.contains(&r.name.as_str());
                    if !is_rule {
                        let mut all: Vec<&str> = rules.iter().map(String::as_str).collect();
                        all.extend(BUILTIN_REASONS);
                        let sugg = fuzzy::suggest(&r.name, all.iter().copied());
                        self.err(
                            Diagnostic::new(
                                Code::UnknownRule,
                                r.span,
                                format!("no admit or filter rule is named `{}`", snippet(&r.name)),
                            )
                            .label("unknown reason")
                            .help(fuzzy::help(sugg, || {
                                format!("reasons are the admit and filter rules, or {}", BUILTIN_REASONS.join(", "))
                            })),
                        );
                        return None;
                    }
                }
                let reason = because.as_ref().map(|r| r.name.clone());
                if !ok {
                    return None;
                }
                match e {
                    Expectation::Pending { .. } => Expect::Pending(job.name.clone(), reason),
                    _ => Expect::Rejected(job.name.clone(), reason),
                }
            }
            Expectation::Evicted { job, by, under } => {
                let mut ok = self.known(jobs, job, "job");
                if let Some(b) = by {
                    ok &= self.known(jobs, b, "job");
                }
                if let Some(r) = under
                    && !p.victims.iter().any(|v| v.name == r.name && v.kind != VictimKind::Protect)
                {
                    ok = false;
                    let names = p.victims.iter().filter(|v| v.kind != VictimKind::Protect).map(|v| v.name.as_str());
                    let sugg = fuzzy::suggest(&r.name, names);
                    self.err(
                        Diagnostic::new(
                            Code::TestScenario,
                            r.span,
                            format!("no preempt, reclaim or borrow rule is named `{}`", snippet(&r.name)),
                        )
                        .label("not a victim rule")
                        .help(fuzzy::help(sugg, || "name the rule that allows the eviction".into())),
                    );
                }
                Expect::Evicted(
                    job.name.clone(),
                    by.as_ref().map(|b| b.name.clone()),
                    under.as_ref().map(|r| r.name.clone()),
                )
                .into_ok(ok)?
            }
            Expectation::Running { job } => Expect::Running(job.name.clone()).into_ok(self.known(jobs, job, "job"))?,
            Expectation::Holds(x) => {
                let mut scope = Scope::new(m, Context::Test);
                let mut bound = Vec::new();
                let bind = |scope: &mut Scope, name: &str, ty: Ty| {
                    let id = scope.fresh_id();
                    scope.test_names.push((name.to_string(), id, ty));
                    id
                };
                for (qi, q) in p.queues.iter().enumerate() {
                    let id = bind(&mut scope, &q.name, Ty::Record(Record::Queue));
                    bound.push(TestName::Queue(id, qi));
                }
                let mut sorted_jobs: Vec<&String> = jobs.keys().collect();
                sorted_jobs.sort();
                for j in sorted_jobs {
                    let id = bind(&mut scope, j, Ty::Record(Record::Job));
                    bound.push(TestName::Job(id, j.clone()));
                }
                let mut sorted_nodes: Vec<&String> = nodes.keys().collect();
                sorted_nodes.sort();
                for n in sorted_nodes {
                    let id = bind(&mut scope, n, Ty::Record(Record::Node));
                    bound.push(TestName::Node(id, n.clone()));
                }
                let h = self.expr(&mut scope, x);
                if !self.expect_bool(&h, "an `expect` condition") {
                    return None;
                }
                Expect::Holds(h, bound)
            }
        })
    }

    /// The value of a property, checked against what the property takes.
    fn prop(&mut self, m: usize, name: &ast::Ident, value: Option<&ast::Expr>, kind: Kind) -> Option<Value> {
        let Some(value) = value else {
            if matches!(kind, Kind::Flag) {
                return Some(Value::Bool(true));
            }
            self.err(
                Diagnostic::new(Code::TestScenario, name.span, format!("`{}` needs a value", name.name))
                    .label("no value")
                    .help("write the value on the same line as the property"),
            );
            return None;
        };
        match kind {
            Kind::Symbol => match &value.kind {
                ast::ExprKind::Name(n) => Some(Value::Str(n.name.clone())),
                ast::ExprKind::Str(s) => Some(Value::Str(s.clone())),
                _ => {
                    self.err(
                        Diagnostic::new(Code::TestScenario, value.span, format!("`{}` takes a name", name.name))
                            .label("not a name")
                            .help(format!("write e.g. `{} research`", name.name)),
                    );
                    None
                }
            },
            Kind::Num(dim, bare) => {
                let mut scope = Scope::new(m, Context::Const);
                let mut e = self.expr(&mut scope, value);
                if bare && e.ty == Ty::NUMBER {
                    e.ty = Ty::Num(dim);
                }
                if !self.expect_type(&e, &Ty::Num(dim), &format!("`{}`", name.name)) {
                    return None;
                }
                self.fold_const(&e, "a test property")
            }
            Kind::Flag => {
                let mut scope = Scope::new(m, Context::Const);
                let e = self.expr(&mut scope, value);
                if !self.expect_type(&e, &Ty::Bool, &format!("`{}`", name.name)) {
                    return None;
                }
                self.fold_const(&e, "a test property")
            }
            Kind::Enum(k) => {
                let mut scope = Scope::new(m, Context::Const);
                let e = self.expr(&mut scope, value);
                if !self.expect_type(&e, &Ty::Enum(k), &format!("`{}`", name.name)) {
                    return None;
                }
                self.fold_const(&e, "a test property")
            }
            Kind::MigList | Kind::StrList => {
                let mig = matches!(kind, Kind::MigList);
                let elem = if mig { Ty::Enum(EnumKind::MigProfile) } else { Ty::Str };
                let list = Ty::List(Box::new(elem.clone()));
                let mut scope = Scope::new(m, Context::Const);
                let e = self.expr(&mut scope, value);
                // A MIG layout card by card: a list of layouts.
                if mig && e.ty == Ty::List(Box::new(list.clone())) {
                    return self.fold_const(&e, "a test property");
                }
                let items = if e.ty == elem {
                    self.fold_const(&e, "a test property").map(|v| Value::List(vec![v]))
                } else if self.expect_type(&e, &list, &format!("`{}`", name.name)) {
                    self.fold_const(&e, "a test property")
                } else {
                    None
                };
                // One layout: every card's.
                if mig { items.map(|v| Value::List(vec![v])) } else { items }
            }
        }
    }

    /// Reads `label` properties into `labels` and returns the others, each name once (a
    /// repeat is reported), with where each was set.
    fn split_props<'p>(
        &mut self,
        m: usize,
        props: &'p [Prop],
        labels: &mut Vec<(String, String)>,
    ) -> (Vec<PlainProp<'p>>, HashMap<String, Span>) {
        let mut plain = Vec::new();
        let mut seen: HashMap<String, Span> = HashMap::new();
        let mut keys: HashMap<&str, Span> = HashMap::new();
        for prop in props {
            match prop {
                Prop::Label { key, value, .. } => {
                    if let Some(first) = keys.insert(&key.value, key.span) {
                        self.err(
                            Diagnostic::new(
                                Code::TestScenario,
                                key.span,
                                format!("label \"{}\" is set twice", snippet(&key.value)),
                            )
                            .label("second value")
                            .with_secondary(first, "first value")
                            .help("give each label once"),
                        );
                        continue;
                    }
                    let label = ast::Ident { name: "label".into(), span: key.span };
                    if let Some(Value::Str(v)) = self.prop(m, &label, Some(value), Kind::Symbol) {
                        labels.push((key.value.clone(), v));
                    }
                }
                Prop::Plain { name, value, .. } => match seen.insert(name.name.clone(), name.span) {
                    Some(first) => self.err(
                        Diagnostic::new(Code::TestScenario, name.span, format!("`{}` is set twice", name.name))
                            .label("second value")
                            .with_secondary(first, "first value")
                            .help("give each property once"),
                    ),
                    None => plain.push((name, value.as_ref())),
                },
            }
        }
        (plain, seen)
    }

    fn unknown_prop(&mut self, name: &ast::Ident, what: &str, known: &[&str]) {
        let sugg = fuzzy::suggest(&name.name, known.iter().copied());
        self.err(
            Diagnostic::new(
                Code::TestScenario,
                name.span,
                format!("{what}s have no property `{}`", snippet(&name.name)),
            )
            .label("unknown property")
            .help(fuzzy::help(sugg, || format!("{what} properties are {}", known.join(", ")))),
        );
    }

    fn test_node(&mut self, m: usize, props: &[Prop], at: Span) -> NodeSpec {
        let mut n = NodeSpec::default();
        let (plain, seen) = self.split_props(m, props, &mut n.labels);
        for (name, value) in plain {
            if let Some(level) = self.levels.iter().position(|l| *l == name.name) {
                if let Some(Value::Str(d)) = self.prop(m, name, value, Kind::Symbol) {
                    n.domains.push((u8::try_from(level).unwrap_or(u8::MAX), d));
                }
                continue;
            }
            let Some(&(_, kind)) = NODE_PROPS.iter().find(|(k, _)| *k == name.name) else {
                let levels = self.levels.clone();
                let mut known: Vec<&str> = NODE_PROPS.iter().map(|(k, _)| *k).collect();
                known.extend(levels.iter().map(String::as_str));
                known.push("label");
                self.unknown_prop(name, "node", &known);
                continue;
            };
            let Some(v) = self.prop(m, name, value, kind) else {
                continue;
            };
            match (name.name.as_str(), v) {
                ("model", Value::Str(s)) => n.model = s,
                ("cards", Value::Num(x)) => n.cards = self.whole(x, name, value, MAX_CARDS_PER_NODE),
                ("gpu_mem", Value::Num(x)) => n.card_mem = self.bytes(x, name, value),
                ("sharing", Value::Enum(_, i)) => n.sharing = Sharing::from_enum(i),
                ("mig", Value::List(layouts)) => {
                    let profiles = |l: Value| match l {
                        Value::List(items) => items
                            .into_iter()
                            .filter_map(|i| if let Value::Enum(_, p) = i { Some(p) } else { None })
                            .collect(),
                        _ => Vec::new(),
                    };
                    n.mig = layouts.into_iter().map(profiles).collect()
                }
                ("max_clients", Value::Num(x)) => {
                    n.max_clients = self.whole(x, name, value, MAX_CLIENTS_PER_CARD).max(1)
                }
                ("cpu", Value::Num(x)) => n.cpu_milli = self.cores(x, name, value),
                ("mem", Value::Num(x)) => n.mem = self.bytes(x, name, value),
                _ => {}
            }
        }
        self.check_mig_layout(&n, seen.get("mig").copied().unwrap_or(at), seen.contains_key("sharing"));
        n
    }

    /// A MIG layout belongs to MIG nodes and fits the node's GPU (docs/schema.md, "MIG").
    fn check_mig_layout(&mut self, n: &NodeSpec, at: Span, sharing_given: bool) {
        let Err(message) = n.mig_gpu() else { return };
        let help = if n.mig.is_empty() {
            "add `mig [PROFILE, …]` (every card) or `mig [[…], […]]` (card by card)".to_string()
        } else if n.sharing != Sharing::Mig {
            (if sharing_given { "set `sharing mig`" } else { "add `sharing mig`" }).to_string()
        } else {
            "docs/schema.md lists each GPU's MIG profiles and how many fit".to_string()
        };
        self.err(Diagnostic::new(Code::TestScenario, at, message).label("invalid MIG layout").help(help));
    }

    /// A count of a scenario: a whole number from 0 to `max`.
    fn whole(&mut self, x: f64, name: &ast::Ident, value: Option<&ast::Expr>, max: u32) -> u32 {
        if x >= 0.0 && x.fract() == 0.0 && x <= f64::from(max) {
            return x as u32;
        }
        let span = value.map_or(name.span, |v| v.span);
        let d = if x > f64::from(max) {
            Diagnostic::new(Code::TestScenario, span, format!("`{}` is too large, at most {max}", name.name))
                .label(format!("this is {}", shown(x)))
                .help("docs/limits.md lists the limits of jobs and nodes")
        } else {
            Diagnostic::new(Code::TestScenario, span, format!("`{}` must be a whole number", name.name))
                .label(format!("this is {}", shown(x)))
                .help("use a non-negative whole number")
        };
        self.err(d);
        0
    }

    /// An amount of a scenario in base units, from 0 to `max` (shown as `max_text`).
    fn bounded(&mut self, x: f64, name: &ast::Ident, value: Option<&ast::Expr>, max: f64, max_text: &str) -> f64 {
        let x = self.amount(x, name, value);
        if x <= max {
            return x;
        }
        let span = value.map_or(name.span, |v| v.span);
        self.err(
            Diagnostic::new(Code::TestScenario, span, format!("`{}` is too large, at most {max_text}", name.name))
                .label(format!("this is {}", shown(x)))
                .help("docs/limits.md lists the limits of jobs and nodes"),
        );
        0.0
    }

    fn bytes(&mut self, x: f64, name: &ast::Ident, value: Option<&ast::Expr>) -> u64 {
        self.bounded(x, name, value, MAX_MEMORY_BYTES as f64, "64TiB") as u64
    }

    fn cores(&mut self, x: f64, name: &ast::Ident, value: Option<&ast::Expr>) -> u64 {
        milli(self.bounded(x, name, value, MAX_CPU_CORES as f64, &format!("{MAX_CPU_CORES} cpu")))
    }

    /// A duration in seconds, at most the clock's limit.
    fn seconds(&mut self, x: f64, name: &ast::Ident, value: Option<&ast::Expr>) -> f64 {
        let max = (MAX_CLOCK_MS / 1000) as f64;
        self.bounded(x, name, value, max, &format!("{max}s (100 years)"))
    }

    /// A quantity of a scenario: finite and not negative.
    fn amount(&mut self, x: f64, name: &ast::Ident, value: Option<&ast::Expr>) -> f64 {
        if x.is_finite() && x >= 0.0 {
            return x;
        }
        let span = value.map_or(name.span, |v| v.span);
        self.err(
            Diagnostic::new(Code::TestScenario, span, format!("`{}` cannot be negative", name.name))
                .label("a negative amount")
                .help("use zero or more"),
        );
        0.0
    }

    /// A job of a scenario, and for `run` what it has behind it.
    fn test_job(&mut self, m: usize, job: &ast::Ident, props: &[Prop], p: &hir::Policy) -> (JobSpec, History) {
        let mut j = JobSpec::named(&job.name);
        let (mut ran, mut since_checkpoint, mut evictions) = (0.0, 0.0, 0);
        let (mut cards, mut fraction, mut mig) = (0, 0.0, None);
        let mut queue_set = false;
        let mut request: Option<Span> = None;
        let (plain, seen) = self.split_props(m, props, &mut j.labels);
        for (name, value) in plain {
            let Some(&(_, kind)) = JOB_PROPS.iter().find(|(k, _)| *k == name.name) else {
                let mut known: Vec<&str> = JOB_PROPS.iter().map(|(k, _)| *k).collect();
                known.push("label");
                self.unknown_prop(name, "job", &known);
                continue;
            };
            if matches!(name.name.as_str(), "cards" | "fraction" | "mig") {
                if let Some(first) = request {
                    self.err(
                        Diagnostic::new(
                            Code::TestScenario,
                            name.span,
                            "a job requests one of `cards`, `fraction` or `mig`",
                        )
                        .label("second request")
                        .with_secondary(first, "first request")
                        .help("a replica asks for whole cards, a fraction of one card, or one MIG profile"),
                    );
                    continue;
                }
                request = Some(name.span);
            }
            let Some(v) = self.prop(m, name, value, kind) else {
                continue;
            };
            match (name.name.as_str(), v) {
                ("queue", Value::Str(q)) => {
                    queue_set = true;
                    let at = value.map_or(name.span, |v| v.span);
                    let why = ("jobs are submitted to leaf queues", "name one of its children");
                    if self.leaf_queue(p, &q, at, why).is_some() {
                        j.queue = Some(q);
                    }
                }
                ("user", Value::Str(u)) => j.user = Some(u),
                ("priority_class", Value::Str(c)) => match p.priority_classes.iter().find(|(n, _)| *n == c) {
                    Some(_) => j.priority_class = Some(c),
                    None => {
                        let sugg = fuzzy::suggest(&c, p.priority_classes.iter().map(|(n, _)| n.as_str()));
                        self.err(
                            Diagnostic::new(
                                Code::UnknownPriorityClass,
                                value.map_or(name.span, |v| v.span),
                                format!("no priority class is named `{}`", snippet(&c)),
                            )
                            .label("unknown priority class")
                            .help(fuzzy::help(sugg, || "declare it with `priority_class NAME = VALUE`".into())),
                        );
                    }
                },
                ("priority", Value::Num(x)) => j.priority = Some(x),
                ("cards", Value::Num(x)) => cards = self.whole(x, name, value, MAX_CARDS_PER_NODE),
                ("fraction", Value::Num(x)) => {
                    if x <= 0.0 || x >= 1.0 {
                        self.err(
                            Diagnostic::new(
                                Code::TestScenario,
                                value.map_or(name.span, |v| v.span),
                                "a fraction is between 0 and 1 gpu",
                            )
                            .label(format!("this is {x}"))
                            .help("for one card or more use `cards`"),
                        );
                    }
                    fraction = x;
                }
                ("mig", Value::Enum(_, i)) => mig = Some(i),
                ("replicas", Value::Num(x)) => j.replicas = self.whole(x, name, value, MAX_REPLICAS).max(1),
                ("min_replicas", Value::Num(x)) => j.min_replicas = Some(self.whole(x, name, value, MAX_REPLICAS)),
                ("gpu_mem", Value::Num(x)) => j.gpu_mem = self.bytes(x, name, value),
                ("cpu", Value::Num(x)) => j.cpu_milli = self.cores(x, name, value),
                ("mem", Value::Num(x)) => j.mem = self.bytes(x, name, value),
                ("models", Value::List(items)) => {
                    if items.len() > MAX_ALLOWED_MODELS as usize {
                        self.err(
                            Diagnostic::new(
                                Code::TestScenario,
                                value.map_or(name.span, |v| v.span),
                                format!("`models` is too long, at most {MAX_ALLOWED_MODELS}"),
                            )
                            .label(format!("{} models", items.len()))
                            .help("docs/limits.md lists the limits of jobs and nodes"),
                        );
                    }
                    j.models =
                        items.into_iter().filter_map(|i| if let Value::Str(s) = i { Some(s) } else { None }).collect()
                }
                ("bursty", Value::Bool(b)) => j.bursty = b,
                ("latency_critical", Value::Bool(b)) => j.latency_critical = b,
                ("preemptible", Value::Bool(b)) => j.preemptible = b,
                ("duration", Value::Num(x)) => j.duration_ms = Some(milli(self.seconds(x, name, value))),
                ("checkpoint", Value::Num(x)) => j.checkpoint_every_ms = Some(milli(self.seconds(x, name, value))),
                ("utilization", Value::Num(x)) => j.utilization = self.amount(x, name, value),
                ("runtime", Value::Num(x)) => ran = self.seconds(x, name, value),
                ("since_checkpoint", Value::Num(x)) => since_checkpoint = self.seconds(x, name, value),
                ("evictions", Value::Num(x)) => evictions = self.whole(x, name, value, u32::MAX),
                _ => {}
            }
        }
        if !queue_set {
            match p.queues.iter().position(|q| q.children.is_empty()) {
                Some(_) if p.queues.iter().filter(|q| q.children.is_empty()).count() == 1 => {}
                _ => self.err(
                    Diagnostic::new(Code::TestScenario, job.span, format!("job `{}` names no queue", job.name))
                        .label("which queue?")
                        .help("add `queue NAME` to its properties"),
                ),
            }
        }
        // Zero, or more than it has, means all of its replicas.
        j.min_replicas = j.min_replicas.filter(|&m| m > 0 && m <= j.replicas);
        j.request = if cards > 0 {
            Request::Whole(cards)
        } else if fraction > 0.0 {
            Request::Fraction(((fraction * 1000.0).round() as u32).clamp(1, 999))
        } else if let Some(p) = mig {
            Request::Mig(p)
        } else {
            Request::None
        };
        if since_checkpoint > ran
            && let Some(&at) = seen.get("since_checkpoint")
        {
            self.err(
                Diagnostic::new(Code::TestScenario, at, "more work since the last checkpoint than the job has run")
                    .label("longer than `runtime`")
                    .help("`since_checkpoint` is at most `runtime`"),
            );
        }
        (j, History { ran_ms: milli(ran), since_checkpoint_ms: milli(since_checkpoint.min(ran)), evictions })
    }
}

/// A number for a message: exact when short, in scientific notation when huge.
fn shown(x: f64) -> String {
    if x.abs() < 1e15 { x.to_string() } else { format!("{x:e}") }
}

/// Thousandths of a base unit (milli-cores from cores, ms from seconds), to the nearest.
fn milli(x: f64) -> u64 {
    (x * 1000.0).round() as u64
}

/// A property other than a label: its name and its value, if written.
type PlainProp<'p> = (&'p ast::Ident, Option<&'p ast::Expr>);

trait IntoOk: Sized {
    fn into_ok(self, ok: bool) -> Option<Self> {
        ok.then_some(self)
    }
}

impl IntoOk for Expect {}
