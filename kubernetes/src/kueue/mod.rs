//! Kueue objects from a policy (`gpolc build --target kueue`): the quota tree as
//! ClusterQueues and hierarchical Cohorts, GPU models as ResourceFlavors, priority classes
//! as WorkloadPriorityClasses, victim rules as ClusterQueue preemption settings, and a
//! finding for every construct Kueue cannot enforce, saying who does. docs/kubernetes.md
//! has the table of what each construct becomes.

pub mod conditions;
pub mod names;
pub mod objects;
pub mod preemption;
pub mod quotas;
pub mod windows;

use gpol_compiler::hir::{Policy, Queue, Queueing, Resource};
use gpol_compiler::ir::{GangKind, QuotaKind, RuleKind, VictimKind};
use gpol_compiler::source::Span;
use objects::{
    ClusterQueueSpec, CohortSpec, FairSharing, FlavorSpec, LocalQueueSpec, Object, PriorityClass, QueueingStrategy,
};
pub use quotas::Capacity;
use std::collections::BTreeMap;

/// What the translation is asked for beyond the policy.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Namespaces to give a LocalQueue per ClusterQueue (named as the ClusterQueue).
    pub namespaces: Vec<String>,
    /// The cluster, for roots whose unset guarantee is its capacity.
    pub capacity: Option<Capacity>,
    /// Write the quotas in force at this minute of the local week (0: Monday 00:00), its
    /// open quota windows' amounts; `None`: those with no window open.
    pub minute: Option<u16>,
    /// The objects of [`windows`] go with these: quota windows are followed, not findings.
    pub windows_followed: bool,
}

/// The objects, in the order to apply them, and what Kueue cannot do of the policy.
#[derive(Clone, Debug)]
pub struct Translation {
    pub objects: Vec<Object>,
    pub findings: Vec<Finding>,
    /// Lines of Kueue's own Configuration the objects rely on (YAML, indented).
    pub configuration: Vec<String>,
}

/// Who enforces a construct Kueue cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcer {
    /// `gpolc serve`, pod by pod, as kube-scheduler's extender.
    Serve,
    /// `gpolc serve`'s preempt verb, when kube-scheduler preempts pods (Kueue's own
    /// preemption of workloads does not ask it).
    ServePreempt,
    /// Nothing yet: it needs gpol's runtime to own admission (the gated controller of
    /// docs/kubernetes.md, not built).
    Nobody,
    /// Nobody can: Kueue is stricter than the policy there (it refuses work gpol would
    /// admit) until the objects are given what they lack.
    Stricter,
}

impl Enforcer {
    pub fn text(self) -> &'static str {
        match self {
            Enforcer::Serve => "gpolc serve enforces it pod by pod (deploy the extender: docs/kubernetes.md)",
            Enforcer::ServePreempt => {
                "gpolc serve applies it when kube-scheduler preempts pods; Kueue's preemption of workloads does not"
            }
            Enforcer::Nobody => {
                "nothing enforces it on Kubernetes yet: it needs gpol to own admission (docs/kubernetes.md, the gated controller)"
            }
            Enforcer::Stricter => "Kueue is stricter than the policy here: it will refuse work gpol admits",
        }
    }
}

/// A construct Kueue cannot state as written, or a value it cannot hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub span: Option<Span>,
    /// What it is about, e.g. "filter `fits_memory`".
    pub construct: String,
    pub message: String,
    /// `None`: an error; the objects cannot be written.
    pub enforcer: Option<Enforcer>,
}

impl Finding {
    pub fn unenforced(span: Span, construct: String, message: &str, by: Enforcer) -> Finding {
        Finding { span: Some(span), construct, message: message.to_string(), enforcer: Some(by) }
    }

    pub fn error(span: Option<Span>, construct: String, message: String) -> Finding {
        Finding { span, construct, message, enforcer: None }
    }

    pub fn is_error(&self) -> bool {
        self.enforcer.is_none()
    }

    fn unset_root_guarantee(queue: &Queue, r: &Resource) -> Finding {
        Finding::unenforced(
            queue.span,
            format!("queue `{}`: its unset {r} guarantee", queue.name),
            "at a root, gpol takes an unset guarantee as the cluster's capacity, which Kueue must be given as a number: without `--cluster` (or the guarantee written) the Kueue objects hold only what the queues are promised",
            Enforcer::Stricter,
        )
    }
}

/// The `nvidia.com/gpu.product` value the flavor `name` of a GPU model selects: the
/// product its nodes carry (a flavor selects one label value; where a model's nodes carry
/// several, the one with most cards, and a finding names the rest), else the model's name
/// with a finding that no node will match it.
fn flavor_product(model: &str, name: &str, capacity: Option<&Capacity>, findings: &mut Vec<Finding>) -> String {
    let construct = format!("ResourceFlavor `{name}`");
    let label = crate::nodes::MODEL_LABEL;
    match capacity.and_then(|c| c.product(model)) {
        Some((product, others)) => {
            if !others.is_empty() {
                let list: Vec<String> = others.iter().map(|(p, n)| format!("`{p}` ({n} cards)")).collect();
                let message = format!(
                    "the cluster's `{model}` nodes carry several products, and a flavor selects one `{label}` value: \
                     it selects `{product}`, and the GPUs of {} are outside Kueue's quotas for `{model}`",
                    list.join(", ")
                );
                findings.push(Finding { span: None, construct, message, enforcer: Some(Enforcer::Stricter) });
            }
            product.to_string()
        }
        None => {
            let message = match capacity {
                Some(_) => format!(
                    "no node of the cluster is a `{model}` with a `{label}` label: it selects `{label}: {model}`, which no node carries"
                ),
                None => format!(
                    "it selects `{label}: {model}`, and GPU feature discovery writes product names \
                     (`NVIDIA-H100-80GB-HBM3`): give `--cluster` (`kubectl get nodes -o json`) to select your nodes' products"
                ),
            };
            findings.push(Finding { span: None, construct, message, enforcer: Some(Enforcer::Stricter) });
            model.to_string()
        }
    }
}

/// Translates a checked policy into Kueue's objects.
pub fn translate(policy: &Policy, options: &Options) -> Translation {
    let mut findings = Vec::new();
    let mut configuration = Vec::new();
    let mut objects = Vec::new();
    if policy.has_implicit_queue() {
        findings.push(Finding {
            span: None,
            construct: format!("policy `{}`", policy.name),
            message: "it declares no queues: there are no quotas for Kueue to hold".into(),
            enforcer: Some(Enforcer::Serve),
        });
    } else {
        tree(policy, options, &mut objects, &mut findings, &mut configuration);
    }
    priority_classes(policy, &mut objects, &mut findings);
    unenforced_rules(policy, &mut findings);
    dedup_findings(&mut findings);
    // Objects with names Kubernetes refuses would be half a translation.
    if findings.iter().any(Finding::is_error) {
        objects.clear();
    }
    Translation { objects, findings, configuration }
}

fn tree(
    policy: &Policy,
    options: &Options,
    objects: &mut Vec<Object>,
    findings: &mut Vec<Finding>,
    configuration: &mut Vec<String>,
) {
    let mut object_names = BTreeMap::new();
    for q in &policy.queues {
        match names::object_name(&q.name) {
            Ok(n) => {
                object_names.insert(q.name.clone(), n);
            }
            Err(m) => findings.push(Finding::error(Some(q.span), format!("queue `{}`", q.name), m.to_string())),
        }
    }
    let layout = quotas::Layout::of(policy, findings);
    if layout.models.len() > quotas::MAX_FLAVORS {
        let m = format!(
            "{} GPU models have quotas; a Kueue resource group holds at most {}",
            layout.models.len(),
            quotas::MAX_FLAVORS
        );
        findings.push(Finding::error(None, "the quota tree".into(), m));
    }
    for model in &layout.models {
        if let Err(m) = names::flavor_name(model) {
            findings.push(Finding::error(None, format!("GPU model `{model}`"), m.to_string()));
        } else if !names::is_label_value(model) {
            let m = format!("`{model}` is not a valid label value for `{}`", crate::nodes::MODEL_LABEL);
            findings.push(Finding::error(None, format!("GPU model `{model}`"), m));
        }
    }
    for (name, model) in layout.flavors() {
        let product = model.as_deref().map(|m| flavor_product(m, &name, options.capacity.as_ref(), findings));
        // The product comes from the cluster's nodes, which need not be Kubernetes': a
        // ResourceFlavor's node label must still be a label value.
        if let Some(p) = product.as_ref().filter(|p| !names::is_label_value(p)) {
            let m = format!(
                "it selects `{}: {p}`, which is not a valid Kubernetes label value (at most 63 characters of letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)",
                crate::nodes::MODEL_LABEL
            );
            findings.push(Finding::error(None, format!("ResourceFlavor `{name}`"), m));
        }
        let node_labels =
            product.map(|p| BTreeMap::from([(crate::nodes::MODEL_LABEL.to_string(), p)])).unwrap_or_default();
        let spec = FlavorSpec { node_labels };
        objects.push(Object::ResourceFlavor(objects::named("ResourceFlavor", objects::metadata(&name), spec)));
    }
    let unquoted = quotas::unquoted(&layout);
    if !unquoted.is_empty() {
        let list: Vec<&str> = unquoted.into_iter().collect();
        configuration.push(format!(
            "# no queue quotes {}: gpol does not limit it, so Kueue must not count it",
            list.join(" or ")
        ));
        configuration.push("resources:".into());
        configuration.push("  quotaCheckStrategy: IgnoreUndeclared".into());
    }
    let settings = preemption::settings(policy, findings);
    let by_share = conditions::is_kueue_share_order(policy, &policy.queue_order);
    let share_order = by_share
        && preemption::is_flat(policy)
        && (settings.preemption.reclaim_within_cohort == objects::ReclaimWithinCohort::Never
            || !settings.strategies.is_empty());
    if !policy.queue_order.is_empty() && !share_order {
        let m = if by_share {
            "Kueue's fair-sharing order compares subtrees in nested Cohorts, and turning it on here would add evictions by share the rules do not allow"
        } else {
            "Kueue orders admission across ClusterQueues only by fair-sharing share"
        };
        let span = policy.queue_order[0].expr.span;
        findings.push(Finding::unenforced(span, "`queue_order`".into(), m, Enforcer::Nobody));
    }
    if !settings.strategies.is_empty() || share_order {
        let strategies =
            if settings.strategies.is_empty() { preemption::DEFAULT_STRATEGIES.to_vec() } else { settings.strategies };
        configuration.push("# fair sharing: the policy's share rules".into());
        configuration.push("fairSharing:".into());
        configuration.push("  preemptionStrategies:".into());
        configuration.extend(strategies.iter().map(|s| format!("  - {s}")));
    }
    let preemption = settings.preemption;
    let tree = quotas::Tree::new(policy, options.capacity.as_ref(), options.minute);
    let name_of = |q: usize| object_names.get(&policy.queues[q].name).cloned().unwrap_or_default();
    let order = pre_order(policy);
    let fair = |q: &Queue, findings: &mut Vec<Finding>| {
        (q.weight != 1.0).then(|| {
            let weight = quotas::number(q.weight).unwrap_or_else(|m| {
                findings.push(Finding::error(Some(q.span), format!("queue `{}`: its weight", q.name), m.to_string()));
                String::new()
            });
            FairSharing { weight }
        })
    };
    for &q in order.iter().filter(|&&q| !policy.queues[q].children.is_empty()) {
        let queue = &policy.queues[q];
        let spec = CohortSpec {
            parent_name: queue.parent.map(name_of),
            resource_groups: tree.groups(&layout, q, findings),
            fair_sharing: fair(queue, findings),
        };
        objects.push(Object::Cohort(objects::named("Cohort", objects::metadata(&name_of(q)), spec)));
    }
    let leaves: Vec<usize> = order.iter().copied().filter(|&q| policy.queues[q].children.is_empty()).collect();
    for &q in &leaves {
        let queue = &policy.queues[q];
        let strategy = match queueing(policy, q) {
            Queueing::Strict => QueueingStrategy::StrictFIFO,
            Queueing::BestEffort => QueueingStrategy::BestEffortFIFO,
        };
        let spec = ClusterQueueSpec {
            cohort_name: queue.parent.map(name_of),
            namespace_selector: BTreeMap::new(),
            queueing_strategy: strategy,
            resource_groups: tree.groups(&layout, q, findings),
            preemption: preemption.clone(),
            fair_sharing: fair(queue, findings),
        };
        objects.push(Object::ClusterQueue(objects::named("ClusterQueue", objects::metadata(&name_of(q)), spec)));
    }
    for ns in &options.namespaces {
        for &q in &leaves {
            let mut meta = objects::metadata(&name_of(q));
            meta.namespace = Some(ns.clone());
            let spec = LocalQueueSpec { cluster_queue: name_of(q) };
            objects.push(Object::LocalQueue(objects::named("LocalQueue", meta, spec)));
        }
    }
    queue_findings(policy, options, findings);
}

/// A queue's queueing: its own, else its nearest ancestor's, else the policy's.
fn queueing(policy: &Policy, mut q: usize) -> Queueing {
    loop {
        let queue = &policy.queues[q];
        match (queue.queueing, queue.parent) {
            (Some(setting), _) => return setting,
            (None, Some(parent)) => q = parent,
            (None, None) => return policy.settings.queueing,
        }
    }
}

/// Queues parents first, siblings in declaration order.
fn pre_order(policy: &Policy) -> Vec<usize> {
    let mut out = Vec::with_capacity(policy.queues.len());
    let mut stack: Vec<usize> = (0..policy.queues.len()).filter(|&q| policy.queues[q].parent.is_none()).rev().collect();
    while let Some(q) = stack.pop() {
        out.push(q);
        stack.extend(policy.queues[q].children.iter().rev());
    }
    out
}

/// Queue settings Kueue has no field for.
fn queue_findings(policy: &Policy, options: &Options, findings: &mut Vec<Finding>) {
    for q in &policy.queues {
        if q.quota(QuotaKind::UserLimit).is_some_and(|m| !m.is_empty()) {
            let m = "Kueue has no per-user quota";
            findings.push(Finding::unenforced(
                q.span,
                format!("queue `{}`: its user_limit", q.name),
                m,
                Enforcer::Serve,
            ));
        }
        for w in &q.windows {
            let m = match (options.windows_followed, windows::followable(policy, q, w)) {
                (true, true) => continue,
                (true, false) => {
                    "the followed phases cannot hold it (a per-user limit, a root's limit, borrow or lend limit, or a resource no queue quotes at all times): Kueue keeps the amounts with no window open"
                }
                _ => {
                    "a ClusterQueue's quotas are fixed: it holds the amounts in force with no window open (`--follow-windows NAMESPACE` adds a CronJob per window edge that applies its amounts; `--at` writes a phase's)"
                }
            };
            let c = format!("queue `{}`: its {} {}", q.name, w.kind.keyword(), w.window);
            findings.push(Finding::unenforced(w.span, c, m, Enforcer::Nobody));
        }
        if q.usage_half_life.is_some() {
            let m = "Kueue's shares count what a queue holds now, not decayed past usage";
            let c = format!("queue `{}`: its usage half-life", q.name);
            findings.push(Finding::unenforced(q.span, c, m, Enforcer::Nobody));
        }
        if q.fairshare_parent {
            let m = "Slurm's Fair Tree has no Kueue equivalent";
            let c = format!("queue `{}`: `fairshare parent`", q.name);
            findings.push(Finding::unenforced(q.span, c, m, Enforcer::Nobody));
        }
    }
}

/// The same finding once (the layout reports per resource).
fn dedup_findings(findings: &mut Vec<Finding>) {
    let mut seen = Vec::new();
    findings.retain(|f| {
        let key = (f.construct.clone(), f.message.clone());
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
}

fn priority_classes(policy: &Policy, objects: &mut Vec<Object>, findings: &mut Vec<Finding>) {
    for (name, value) in &policy.priority_classes {
        let construct = format!("priority class `{name}`");
        let object_name = match names::object_name(name) {
            Ok(n) => n,
            Err(m) => {
                findings.push(Finding::error(None, construct, m.to_string()));
                continue;
            }
        };
        let Some(value) = whole_i32(*value) else {
            let m = format!("its value {value} is not a whole number within Kueue's 32-bit priorities");
            findings.push(Finding::error(None, construct, m));
            continue;
        };
        objects.push(Object::WorkloadPriorityClass(PriorityClass {
            api_version: objects::API_VERSION,
            kind: "WorkloadPriorityClass",
            metadata: objects::metadata(&object_name),
            value,
            description: format!("gpol priority class `{name}` of policy `{}`", policy.name),
        }));
    }
}

/// A whole number that fits Kueue's `int32`.
pub fn whole_i32(x: f64) -> Option<i32> {
    (x.fract() == 0.0 && x >= f64::from(i32::MIN) && x <= f64::from(i32::MAX)).then_some(x as i32)
}

/// Rules and clauses Kueue has no place for.
fn unenforced_rules(policy: &Policy, findings: &mut Vec<Finding>) {
    for r in &policy.rules {
        let (message, by) = match r.kind {
            RuleKind::Admit => ("Kueue admits by quota alone", Enforcer::Serve),
            RuleKind::Filter | RuleKind::Score | RuleKind::CardScore => {
                ("Kueue assigns flavors, not nodes or cards", Enforcer::Serve)
            }
        };
        findings.push(Finding::unenforced(r.span, format!("{} `{}`", r.kind.keyword(), r.name), message, by));
    }
    for g in &policy.gang {
        let level = policy.levels.get(usize::from(g.level)).map(String::as_str).unwrap_or("?");
        let m = "Kueue admits a job's pods together but places them by topology only with its Topology-Aware Scheduling, which this translation does not configure";
        let kind = match g.kind {
            GangKind::Require => "require",
            GangKind::Prefer => "prefer",
        };
        let c = format!("gang clause `{kind} same {level}`");
        findings.push(Finding::unenforced(g.span, c, m, Enforcer::Nobody));
    }
    if !policy.job_order.is_empty() && !conditions::is_kueue_job_order(&policy.job_order) {
        let m = "Kueue orders a ClusterQueue's workloads by priority, then creation time";
        let span = policy.job_order[0].expr.span;
        findings.push(Finding::unenforced(span, "`job_order`".into(), m, Enforcer::Nobody));
    }
    if !policy.victim_order.is_empty() {
        let m =
            "Kueue takes victims in its own order (borrowing queues first, lowest priority, most recently admitted)";
        let span = policy.victim_order[0].expr.span;
        findings.push(Finding::unenforced(span, "`victim_order`".into(), m, Enforcer::ServePreempt));
    }
    // A rule Kueue does not state at all was named already; its cost is no news.
    let named: Vec<String> = findings.iter().map(|f| f.construct.clone()).collect();
    for v in policy.victims.iter().filter(|v| v.cost.is_some() && v.kind != VictimKind::Protect) {
        if named.contains(&format!("{} `{}`", v.kind.keyword(), v.name)) {
            continue;
        }
        let m = "Kueue has no eviction costs";
        let c = format!("{} `{}`: its cost", v.kind.keyword(), v.name);
        findings.push(Finding::unenforced(v.span, c, m, Enforcer::ServePreempt));
    }
    if policy.settings.reserve_after.is_some() {
        findings.push(Finding {
            span: None,
            construct: "`reserve_after`".into(),
            message: "Kueue does not hold nodes for a waiting job".into(),
            enforcer: Some(Enforcer::Nobody),
        });
    }
}

/// An object that cannot be written as YAML: its kind and name, and the writer's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    pub kind: &'static str,
    pub name: String,
    pub error: String,
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} `{}`: {}", self.kind, self.name, self.error)
    }
}

impl std::error::Error for YamlError {}

/// The objects as one YAML stream, with the Configuration they need and the findings as
/// comments at the top.
pub fn yaml(t: &Translation, header: &str) -> Result<String, YamlError> {
    let mut out = String::new();
    for line in header.lines() {
        out.push_str(&format!("# {line}\n"));
    }
    if !t.configuration.is_empty() {
        out.push_str("#\n# Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) must have:\n");
        for line in &t.configuration {
            out.push_str(&format!("#   {line}\n"));
        }
    }
    let unenforced = t.findings.iter().filter(|f| !f.is_error()).count();
    if unenforced > 0 {
        out.push_str(&format!("#\n# What Kueue does not enforce ({unenforced}):\n"));
        for f in t.findings.iter().filter(|f| !f.is_error()) {
            out.push_str(&format!("#   - {}: {}\n", f.construct, f.message));
        }
    }
    for o in &t.objects {
        out.push_str("---\n");
        let text = serde_saphyr::to_string(o).map_err(|error| YamlError {
            kind: o.kind(),
            name: o.name().to_string(),
            error: error.to_string(),
        })?;
        out.push_str(&text);
    }
    Ok(out)
}
