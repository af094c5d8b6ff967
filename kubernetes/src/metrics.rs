//! The extender's Prometheus metrics: latency per verb, requests by answer, decisions,
//! reloads, and what the extender holds. Served as text at `/metrics`.

use prometheus_client::encoding::{EncodeLabelSet, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Verb {
    pub verb: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Answered {
    pub verb: String,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub outcome: String,
}

/// Every metric, registered once.
pub struct Metrics {
    registry: Registry,
    pub latency: Family<Verb, Histogram>,
    pub requests: Family<Answered, Counter>,
    /// Nodes by filter outcome (passed, failed, unresolvable), preemptions agreed and
    /// refused, binds done and failed.
    pub decisions: Family<Outcome, Counter>,
    /// Policy reloads: `ok` or `refused`.
    pub reloads: Family<Outcome, Counter>,
    pub nodes: Gauge,
    pub pods: Gauge,
    /// Bound pods that did not fit on their node in the extender's model.
    pub unplaced: Gauge,
    /// Pods `bind` reserved a place for that the watch has not reported bound yet.
    pub binding: Gauge,
}

impl Default for Metrics {
    fn default() -> Metrics {
        // 50 µs to about 1.6 s.
        let latency =
            Family::<Verb, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(5e-5, 2.0, 16)));
        let mut m = Metrics {
            registry: Registry::with_prefix("gpol_extender"),
            latency,
            requests: Family::default(),
            decisions: Family::default(),
            reloads: Family::default(),
            nodes: Gauge::default(),
            pods: Gauge::default(),
            unplaced: Gauge::default(),
            binding: Gauge::default(),
        };
        let r = &mut m.registry;
        r.register("request_duration_seconds", "Time to answer a request, by verb", m.latency.clone());
        r.register("requests", "Requests answered, by verb and HTTP status", m.requests.clone());
        r.register("decisions", "Decisions: nodes by filter outcome, preemptions, binds", m.decisions.clone());
        r.register("policy_reloads", "Policy reloads, by result", m.reloads.clone());
        r.register("nodes", "Nodes the extender knows", m.nodes.clone());
        r.register("bound_pods", "Bound pods the extender knows", m.pods.clone());
        r.register("unplaced_pods", "Bound pods that did not fit on their node in gpol's model", m.unplaced.clone());
        r.register("binding_pods", "Pods reserved by a bind that the watch has not reported bound", m.binding.clone());
        m
    }
}

impl Metrics {
    pub fn decided(&self, outcome: &str, n: u64) {
        self.decisions.get_or_create(&Outcome { outcome: outcome.into() }).inc_by(n);
    }

    pub fn answered(&self, verb: &str, code: u16, seconds: f64) {
        self.requests.get_or_create(&Answered { verb: verb.into(), code }).inc();
        self.latency.get_or_create(&Verb { verb: verb.into() }).observe(seconds);
    }

    /// What the cluster holds now: after every request and every watch event.
    pub fn held(&self, cluster: &crate::cluster::Cluster) {
        self.nodes.set(cluster.node_count() as i64);
        self.pods.set(cluster.pod_count() as i64);
        self.unplaced.set(cluster.unplaced() as i64);
        self.binding.set(cluster.assumed_count() as i64);
    }

    /// Serves leader election's gauge as `gpol_extender_leader` (with `--leader-elect`
    /// only: a lone replica has no leadership to show).
    pub fn register_leader(&mut self, leader: Gauge) {
        self.registry.register("leader", "1 while this replica leads (holds the lease), else 0", leader);
    }

    pub fn reloaded(&self, ok: bool) {
        self.reloads.get_or_create(&Outcome { outcome: if ok { "ok" } else { "refused" }.into() }).inc();
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = text::encode(&mut out, &self.registry);
        out
    }
}
