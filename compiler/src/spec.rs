//! The one description of a job and of a node, as users give them: in a policy's `test`
//! blocks, in traces, in cluster files and in adapters' requests. Every reader fills
//! these and nothing else, so a job means the same thing wherever it comes from. The
//! defaults are the `Default` impls, documented in docs/semantics.md ("Jobs and nodes").
//!
//! Amounts are exact integers in base units: milli-GPU, milli-cores, bytes,
//! milliseconds. Queue, user and priority class are names: the runtime resolves them
//! against the policy when the job is submitted.

use crate::fmt::string_literal as quoted;
use crate::limits::{
    MAX_ALLOWED_MODELS, MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD, MAX_CLOCK_MS, MAX_CPU_CORES, MAX_MEMORY_BYTES,
    MAX_REPLICAS,
};
use crate::schema::EnumKind;

/// A GPU is 1000 milli-GPU.
pub const MILLI: u32 = 1000;

/// What one replica asks for of GPUs (decision D2): exactly one of these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Request {
    /// `k` wholly free cards on one node.
    Whole(u32),
    /// A share of one card, in milli-GPU (1–999).
    Fraction(u32),
    /// One free MIG instance of a profile (an index into `schema::MIG_PROFILES`).
    Mig(u8),
    /// No GPU (CPU-only work).
    #[default]
    None,
}

impl Request {
    /// What one replica is charged in GPU quota, in milli-GPU.
    pub fn milli(self) -> u64 {
        match self {
            Request::Whole(k) => u64::from(k) * u64::from(MILLI),
            Request::Fraction(m) => u64::from(m),
            Request::Mig(p) => u64::from(mig_milli(p)),
            Request::None => 0,
        }
    }
}

/// What a MIG instance is charged in quota: its compute slices of its GPU's (D2), on the
/// first GPU with the profile (`mig::nominal_milli`).
pub fn mig_milli(profile: u8) -> u32 {
    crate::mig::nominal_milli(profile)
}

/// A job as it is submitted.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    pub name: String,
    /// Its leaf queue; `None`: the policy's only leaf queue.
    pub queue: Option<String>,
    /// Who submitted it; `None`: the user named after its queue.
    pub user: Option<String>,
    pub priority_class: Option<String>,
    /// `None`: the priority class's value, or 0 without a class.
    pub priority: Option<f64>,
    /// What each replica asks for of GPUs.
    pub request: Request,
    pub replicas: u32,
    /// The fewest replicas an elastic gang starts with; `None`: all of them.
    pub min_replicas: Option<u32>,
    /// GPU memory per replica, bytes.
    pub gpu_mem: u64,
    /// Host CPU per replica, milli-cores.
    pub cpu_milli: u64,
    /// Host memory per replica, bytes.
    pub mem: u64,
    /// GPU models it may run on; empty: any.
    pub models: Vec<String>,
    pub bursty: bool,
    pub latency_critical: bool,
    pub preemptible: bool,
    /// Run time when uninterrupted; `None`: it runs until stopped.
    pub duration_ms: Option<u64>,
    /// How often it saves its work while running; `None`: an eviction loses all of it.
    pub checkpoint_every_ms: Option<u64>,
    /// The share of its allocation it really uses, 0 to 1.
    pub utilization: f64,
    pub labels: Vec<(String, String)>,
}

impl Default for JobSpec {
    /// A job with no GPU, no CPU and no memory, one replica, not preemptible, fully
    /// utilised, in the policy's only leaf queue.
    fn default() -> JobSpec {
        JobSpec {
            name: String::new(),
            queue: None,
            user: None,
            priority_class: None,
            priority: None,
            request: Request::None,
            replicas: 1,
            min_replicas: None,
            gpu_mem: 0,
            cpu_milli: 0,
            mem: 0,
            models: Vec::new(),
            bursty: false,
            latency_critical: false,
            preemptible: false,
            duration_ms: None,
            checkpoint_every_ms: None,
            utilization: 1.0,
            labels: Vec::new(),
        }
    }
}

impl JobSpec {
    /// A job of this name with the defaults elsewhere.
    pub fn named(name: impl Into<String>) -> JobSpec {
        JobSpec { name: name.into(), ..JobSpec::default() }
    }

    /// The fewest replicas it starts with (at least 1, at most `replicas`).
    pub fn min_replicas(&self) -> u32 {
        let all = self.replicas.max(1);
        self.min_replicas.map_or(all, |m| m.clamp(1, all))
    }

    /// GPUs the whole job asks for, in milli-GPU.
    pub fn total_milli(&self) -> u64 {
        self.request.milli() * u64::from(self.replicas.max(1))
    }
}

/// What a job that is already running has behind it (a test's `run`, or a job an
/// adapter finds running when it starts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// How long it has run.
    pub ran_ms: u64,
    /// How long since it last saved its work (at most `ran_ms`).
    pub since_checkpoint_ms: u64,
    /// Evictions it has already suffered.
    pub evictions: u32,
}

/// How a node's cards are shared; the values are the `sharing` enum of the schema.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Sharing {
    #[default]
    Exclusive,
    Mig,
    Timeslice,
    Mps,
}

impl Sharing {
    pub fn from_enum(v: u8) -> Sharing {
        match EnumKind::Sharing.variants().get(usize::from(v)).copied() {
            Some("mig") => Sharing::Mig,
            Some("timeslice") => Sharing::Timeslice,
            Some("mps") => Sharing::Mps,
            _ => Sharing::Exclusive,
        }
    }

    pub fn as_enum(self) -> u8 {
        EnumKind::Sharing.variant(self.name()).unwrap_or(0)
    }

    /// The name policies and cluster files use.
    pub fn name(self) -> &'static str {
        match self {
            Sharing::Exclusive => "exclusive",
            Sharing::Mig => "mig",
            Sharing::Timeslice => "timeslice",
            Sharing::Mps => "mps",
        }
    }
}

/// A node as it joins the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    /// The GPU model of its cards.
    pub model: String,
    pub cards: u32,
    /// Memory of each card, bytes.
    pub card_mem: u64,
    pub sharing: Sharing,
    /// MIG instances of the cards: one layout for every card, or one per card.
    pub mig: Vec<Vec<u8>>,
    /// Jobs that may share one card (time-slicing and MPS).
    pub max_clients: u32,
    pub cpu_milli: u64,
    pub mem: u64,
    /// Domain name per topology level (by level index); unnamed levels make the node its
    /// own domain there.
    pub domains: Vec<(u8, String)>,
    pub labels: Vec<(String, String)>,
}

impl Default for NodeSpec {
    /// A node of model `gpu` with no cards yet (80 GiB each when it has them), 64 cores
    /// and 512 GiB of memory, its cards not shared.
    fn default() -> NodeSpec {
        NodeSpec {
            name: String::new(),
            model: "gpu".into(),
            cards: 0,
            card_mem: 80 << 30,
            sharing: Sharing::Exclusive,
            mig: Vec::new(),
            max_clients: 1,
            cpu_milli: 64_000,
            mem: 512 << 30,
            domains: Vec::new(),
            labels: Vec::new(),
        }
    }
}

impl NodeSpec {
    /// Card `i`'s MIG layout (empty when the node has none).
    pub fn mig_layout(&self, card: usize) -> &[u8] {
        match self.mig.as_slice() {
            [every] => every,
            per_card => per_card.get(card).map_or(&[], Vec::as_slice),
        }
    }

    /// The MIG table the node's cards follow, its layouts checked against it: `None` for
    /// a node not shared by MIG. The error says what is wrong, for the `mig` field.
    pub fn mig_gpu(&self) -> Result<Option<&'static crate::mig::Gpu>, String> {
        match (self.sharing, self.mig.is_empty()) {
            (Sharing::Mig, true) => Err("a MIG node needs a layout of instances".into()),
            (_, false) if self.sharing != Sharing::Mig => {
                Err("a MIG layout on a node that is not shared by MIG".into())
            }
            (_, true) => Ok(None),
            _ => {
                if self.mig.len() != 1 && self.mig.len() != self.cards as usize {
                    return Err(format!(
                        "{} layouts for {} cards: give one for every card or one per card",
                        self.mig.len(),
                        self.cards
                    ));
                }
                let mut profiles: Vec<u8> = self.mig.iter().flatten().copied().collect();
                profiles.sort_unstable();
                profiles.dedup();
                // In words: the runtime and the adapters report it as text.
                let gpu = crate::mig::gpu_for(&self.model, self.card_mem, &profiles).map_err(|e| e.to_string())?;
                for (i, layout) in self.mig.iter().enumerate() {
                    if let Some(why) = gpu.misfit(layout) {
                        let names: Vec<&str> = layout.iter().map(|&p| crate::mig::name(p)).collect();
                        let card = if self.mig.len() == 1 { String::new() } else { format!(" (card {i})") };
                        // A model with no table of its own is read as the first GPU with
                        // the profiles: say so.
                        let read_as = if gpu.model == self.model {
                            String::new()
                        } else {
                            format!(
                                " (by the {} {} GB's rules: model `{}` has no MIG table)",
                                gpu.model, gpu.memory_gb, self.model
                            )
                        };
                        return Err(format!(
                            "the layout [{}]{card} does not fit on one card: {why}{read_as}",
                            names.join(", ")
                        ));
                    }
                }
                Ok(Some(gpu))
            }
        }
    }

    /// A node of this name with the defaults elsewhere.
    pub fn named(name: impl Into<String>) -> NodeSpec {
        NodeSpec { name: name.into(), ..NodeSpec::default() }
    }
}

/// A node's domains for a policy with these topology `levels`, from its topology by
/// level name (levels the policy does not read are left out).
pub fn domains_at(topology: &[(String, String)], levels: &[String]) -> Vec<(u8, String)> {
    topology
        .iter()
        .filter_map(|(level, name)| {
            let i = levels.iter().position(|l| l == level)?;
            Some((u8::try_from(i).ok()?, name.clone()))
        })
        .collect()
}

// ---------------------------------------------------------------- limits

/// A field of a job or node over its documented limit (docs/limits.md), named as a
/// `test` block spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverLimit {
    pub field: &'static str,
    /// The limit, in the field's unit as a `test` block writes it (`64`, `64TiB`).
    pub max: String,
}

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is too large, at most {}", self.field, self.max)
    }
}

fn over(field: &'static str, value: u64, max: u64, show: fn(u64) -> String) -> Option<OverLimit> {
    (value > max).then(|| OverLimit { field, max: show(max) })
}

fn plain(n: u64) -> String {
    n.to_string()
}

fn cores(milli: u64) -> String {
    format!("{} cpu", milli / 1000)
}

fn seconds(ms: u64) -> String {
    format!("{}s", ms / 1000)
}

impl JobSpec {
    /// The first field over its limit: every reader checks a job with this before the
    /// runtime sees it, and the runtime refuses such a job too.
    pub fn over_limit(&self) -> Option<OverLimit> {
        let cards = match self.request {
            Request::Whole(k) => u64::from(k),
            _ => 0,
        };
        over("cards", cards, u64::from(MAX_CARDS_PER_NODE), plain)
            .or_else(|| over("replicas", u64::from(self.replicas), u64::from(MAX_REPLICAS), plain))
            .or_else(|| over("min_replicas", u64::from(self.min_replicas.unwrap_or(0)), u64::from(MAX_REPLICAS), plain))
            .or_else(|| over("gpu_mem", self.gpu_mem, MAX_MEMORY_BYTES, bytes_text))
            .or_else(|| over("cpu", self.cpu_milli, MAX_CPU_CORES * 1000, cores))
            .or_else(|| over("mem", self.mem, MAX_MEMORY_BYTES, bytes_text))
            .or_else(|| over("models", self.models.len() as u64, u64::from(MAX_ALLOWED_MODELS), plain))
            .or_else(|| over("duration", self.duration_ms.unwrap_or(0), MAX_CLOCK_MS, seconds))
            .or_else(|| over("checkpoint", self.checkpoint_every_ms.unwrap_or(0), MAX_CLOCK_MS, seconds))
    }
}

impl NodeSpec {
    /// The first field over its limit (see [`JobSpec::over_limit`]).
    pub fn over_limit(&self) -> Option<OverLimit> {
        over("cards", u64::from(self.cards), u64::from(MAX_CARDS_PER_NODE), plain)
            .or_else(|| over("gpu_mem", self.card_mem, MAX_MEMORY_BYTES, bytes_text))
            .or_else(|| over("max_clients", u64::from(self.max_clients), u64::from(MAX_CLIENTS_PER_CARD), plain))
            .or_else(|| over("cpu", self.cpu_milli, MAX_CPU_CORES * 1000, cores))
            .or_else(|| over("mem", self.mem, MAX_MEMORY_BYTES, bytes_text))
    }
}

// ---------------------------------------------------------------- as test-block text

/// Bytes exactly, in GiB when whole.
fn bytes_text(b: u64) -> String {
    if b > 0 && b.is_multiple_of(1 << 30) { format!("{}GiB", b >> 30) } else { format!("{b}B") }
}

/// Milli-units (of CPU or GPU) as a plain number.
fn milli_text(m: u64) -> String {
    format!("{}", m as f64 / 1000.0)
}

impl JobSpec {
    /// The job's properties as a `test` block writes them (`queue a; cards 2; …`), so
    /// that checking them gives this job back: what a generated scenario or a
    /// counterexample is written as.
    pub fn test_props(&self) -> String {
        let mut p: Vec<String> = Vec::new();
        if let Some(q) = &self.queue {
            p.push(format!("queue {}", quoted(q)));
        }
        if let Some(u) = &self.user {
            p.push(format!("user {}", quoted(u)));
        }
        if let Some(c) = &self.priority_class {
            p.push(format!("priority_class {}", quoted(c)));
        }
        if let Some(x) = self.priority {
            p.push(format!("priority {x}"));
        }
        match self.request {
            Request::Whole(k) => p.push(format!("cards {k}")),
            Request::Fraction(m) => p.push(format!("fraction {}", milli_text(u64::from(m)))),
            Request::Mig(i) => {
                p.push(format!("mig {}", crate::schema::MIG_PROFILES.get(usize::from(i)).unwrap_or(&"?")))
            }
            Request::None => {}
        }
        if self.replicas != 1 {
            p.push(format!("replicas {}", self.replicas));
        }
        if let Some(m) = self.min_replicas {
            p.push(format!("min_replicas {m}"));
        }
        for (key, value) in [("gpu_mem", self.gpu_mem), ("mem", self.mem)] {
            if value > 0 {
                p.push(format!("{key} {}", bytes_text(value)));
            }
        }
        if self.cpu_milli > 0 {
            p.push(format!("cpu {}", milli_text(self.cpu_milli)));
        }
        if !self.models.is_empty() {
            let models: Vec<String> = self.models.iter().map(|m| quoted(m)).collect();
            p.push(format!("models [{}]", models.join(", ")));
        }
        for (on, flag) in
            [(self.bursty, "bursty"), (self.latency_critical, "latency_critical"), (self.preemptible, "preemptible")]
        {
            if on {
                p.push(flag.to_string());
            }
        }
        if let Some(d) = self.duration_ms {
            p.push(format!("duration {d}ms"));
        }
        if let Some(c) = self.checkpoint_every_ms {
            p.push(format!("checkpoint {c}ms"));
        }
        if self.utilization != 1.0 {
            p.push(format!("utilization {}", self.utilization));
        }
        for (k, v) in &self.labels {
            p.push(format!("label {} = {}", quoted(k), quoted(v)));
        }
        p.join("; ")
    }
}

impl NodeSpec {
    /// The node's properties as a `test` block writes them; `levels` are the policy's
    /// topology levels, which name the node's domains.
    pub fn test_props(&self, levels: &[String]) -> String {
        let mut p = vec![format!("model {}", quoted(&self.model)), format!("cards {}", self.cards)];
        p.push(format!("gpu_mem {}", bytes_text(self.card_mem)));
        p.push(format!("sharing {}", self.sharing.name()));
        let layout = |l: &[u8]| format!("[{}]", l.iter().map(|&i| crate::mig::name(i)).collect::<Vec<_>>().join(", "));
        match self.mig.as_slice() {
            [] => {}
            [every] => p.push(format!("mig {}", layout(every))),
            per_card => p.push(format!("mig [{}]", per_card.iter().map(|l| layout(l)).collect::<Vec<_>>().join(", "))),
        }
        p.push(format!("max_clients {}", self.max_clients));
        p.push(format!("cpu {}", milli_text(self.cpu_milli)));
        p.push(format!("mem {}", bytes_text(self.mem)));
        for (level, domain) in &self.domains {
            if let Some(name) = levels.get(usize::from(*level)) {
                p.push(format!("{name} {}", quoted(domain)));
            }
        }
        for (k, v) in &self.labels {
            p.push(format!("label {} = {}", quoted(k), quoted(v)));
        }
        p.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_charged_in_milli_gpu() {
        assert_eq!(Request::Whole(2).milli(), 2000);
        assert_eq!(Request::Fraction(250).milli(), 250);
        assert_eq!(Request::None.milli(), 0);
        // 3g.40gb is three slices of seven.
        let p = EnumKind::MigProfile.variant("3g.40gb").expect("a profile");
        assert_eq!(Request::Mig(p).milli(), 429);
    }

    #[test]
    fn min_replicas_default_to_all_and_stay_in_range() {
        let mut j = JobSpec { replicas: 4, ..JobSpec::named("j") };
        assert_eq!(j.min_replicas(), 4);
        j.min_replicas = Some(0);
        assert_eq!(j.min_replicas(), 1);
        j.min_replicas = Some(9);
        assert_eq!(j.min_replicas(), 4);
    }

    #[test]
    fn sharing_round_trips_through_the_schema_enum() {
        for s in [Sharing::Exclusive, Sharing::Mig, Sharing::Timeslice, Sharing::Mps] {
            assert_eq!(Sharing::from_enum(s.as_enum()), s);
        }
    }
}
