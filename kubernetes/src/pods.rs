//! A Kubernetes `Pod` as gpol's job (one replica): one mapping, for the extender and for
//! every other reader of pods. The table is docs/kubernetes.md's "The job model":
//!
//! | gpol | Pod |
//! |---|---|
//! | `name` | `namespace/name` |
//! | `queue` | label `gpol.dev/queue`, else label `kueue.x-k8s.io/queue-name` (a LocalQueue named as `gpolc build --target kueue` names it: `team-a` is `team_a`), else the policy's only leaf queue |
//! | `user` | label `gpol.dev/user`, else the namespace |
//! | `priority_class`, `priority` | `spec.priorityClassName` when the policy has that class, else label `kueue.x-k8s.io/priority-class` (named as the generated WorkloadPriorityClass) when it has that one; `spec.priority` (else the class's value, else 0) |
//! | `whole_cards` | `nvidia.com/gpu` (limits, or requests), summed over containers |
//! | `gpu_fraction` | annotation `gpol.dev/gpu-fraction` (0–1) on a pod asking for one `nvidia.com/gpu` |
//! | `mig_profile` | one `nvidia.com/mig-<profile>` |
//! | `gpu_mem` | annotation `gpol.dev/gpu-memory` (a quantity, bytes) |
//! | `cpu`, `mem` | `requests.cpu`, `requests.memory`: containers summed, or the largest init container if larger |
//! | `allowed_models` | `nodeSelector` or required node affinity (`In`) on `nvidia.com/gpu.product`, through gpol's model table (`NVIDIA-H100-80GB-HBM3` is `h100`); pinned to a MIG-single product (`…-MIG-1g.10gb`), each `nvidia.com/gpu` is an instance of that profile |
//! | `bursty`, `latency_critical`, `preemptible` | labels `gpol.dev/bursty`, `gpol.dev/latency-critical`, `gpol.dev/preemptible` set to `"true"` |
//! | `expected_duration` | annotation `gpol.dev/expected-duration` (seconds) |
//! | `submitted`, `waiting` | since `metadata.creationTimestamp` |
//! | `runtime` (a bound pod) | since `status.startTime` |
//! | `labels` | the pod's labels |
//! | `replicas` | 1 (a pod is one replica: gangs need the runtime to own the cycle) |

use crate::FieldError;
use crate::quantity::{self, Quantity};
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLOCK_MS};
use gpol_compiler::schema::MIG_PROFILES;
use gpol_compiler::spec::{JobSpec, MILLI, Request};
use serde_json::Value;

/// Where the pod stands, as far as capacity goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not bound to a node yet.
    Pending,
    /// Bound to a node and holding its resources.
    Bound,
    /// Succeeded or failed: holds nothing.
    Ended,
}

/// A pod as gpol sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct MappedPod {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`, once bound.
    pub node: Option<String>,
    pub phase: Phase,
    pub job: JobSpec,
    /// The cards (and MIG instances) `bind` gave it: annotation `gpol.dev/cards`.
    pub cards: Option<Vec<(usize, Option<usize>)>>,
    /// When it was created (`metadata.creationTimestamp`), Unix milliseconds: its job has
    /// waited since then.
    pub created_ms: Option<i64>,
    /// When its node started it (`status.startTime`), Unix milliseconds: its job has run
    /// since then.
    pub started_ms: Option<i64>,
}

/// A card assignment as annotation `gpol.dev/cards` writes it: card indices on the node,
/// comma-separated (`0,1`), and for a MIG instance the card and the instance's index in
/// its layout (`3:1`).
pub fn cards_text(cards: &[(usize, Option<usize>)]) -> String {
    let one = |&(card, instance): &(usize, Option<usize>)| match instance {
        Some(i) => format!("{card}:{i}"),
        None => card.to_string(),
    };
    cards.iter().map(one).collect::<Vec<_>>().join(",")
}

/// A part of a card assignment that is not a card or instance index: the part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadCardIndex(pub String);

impl std::fmt::Display for BadCardIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is not a card or instance index", self.0)
    }
}

impl std::error::Error for BadCardIndex {}

/// Reads [`cards_text`]'s form back.
pub fn parse_cards(text: &str) -> Result<Vec<(usize, Option<usize>)>, BadCardIndex> {
    let index = |t: &str| -> Result<usize, BadCardIndex> {
        t.trim()
            .parse::<usize>()
            .ok()
            .filter(|&i| i < MAX_CARDS_PER_NODE as usize * 8)
            .ok_or_else(|| BadCardIndex(t.to_string()))
    };
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|part| match part.split_once(':') {
            Some((card, instance)) => Ok((index(card)?, Some(index(instance)?))),
            None => Ok((index(part)?, None)),
        })
        .collect()
}

/// Label and annotation keys gpol reads on pods.
pub mod keys {
    pub const QUEUE: &str = "gpol.dev/queue";
    /// A LocalQueue named as `gpolc build --target kueue` names it (`team-a` for `team_a`).
    pub const KUEUE_QUEUE: &str = "kueue.x-k8s.io/queue-name";
    /// A WorkloadPriorityClass, named as `gpolc build --target kueue` names it.
    pub const KUEUE_PRIORITY_CLASS: &str = "kueue.x-k8s.io/priority-class";
    pub const USER: &str = "gpol.dev/user";
    pub const GPU_FRACTION: &str = "gpol.dev/gpu-fraction";
    pub const GPU_MEMORY: &str = "gpol.dev/gpu-memory";
    pub const EXPECTED_DURATION: &str = "gpol.dev/expected-duration";
    pub const BURSTY: &str = "gpol.dev/bursty";
    pub const LATENCY_CRITICAL: &str = "gpol.dev/latency-critical";
    pub const PREEMPTIBLE: &str = "gpol.dev/preemptible";
    /// Written by `bind`: the cards (and MIG instances) the pod was given.
    pub const CARDS: &str = "gpol.dev/cards";
    pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
}

/// The policy facts the mapping needs: which priority classes it defines.
pub trait Classes {
    fn has_class(&self, name: &str) -> bool;
}

impl<F: Fn(&str) -> bool> Classes for F {
    fn has_class(&self, name: &str) -> bool {
        self(name)
    }
}

/// Maps one `Pod` object; errors name the field and the pod.
pub fn pod(item: &Value, classes: &dyn Classes) -> Result<MappedPod, FieldError> {
    let text = |path: &str| item.pointer(path).and_then(Value::as_str);
    let name = text("/metadata/name").ok_or_else(|| FieldError::new("metadata.name", "missing"))?.to_string();
    let namespace = text("/metadata/namespace").unwrap_or("default").to_string();
    let full = format!("{namespace}/{name}");
    let err = |field: &str, m: String| FieldError::new(field, format!("pod `{full}`: {m}"));
    let strings = |path: &str| -> Vec<(String, String)> {
        item.pointer(path)
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default()
    };
    let labels = strings("/metadata/labels");
    let annotations = strings("/metadata/annotations");
    let label = |k: &str| labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let annotation = |k: &str| annotations.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let flag = |k: &str| label(k) == Some("true");

    let resources = Resources::of(item).map_err(|(field, m)| err(&field, m))?;
    let count = |key: &str, max: u64| -> Result<u32, FieldError> {
        match resources.get(key) {
            None => Ok(0),
            Some(q) => quantity::whole_count(&q, &q.to_string(), max)
                .map_err(|m| err(&format!("spec.containers[].resources.limits.{key}"), m.to_string())),
        }
    };
    let cards = count("nvidia.com/gpu", u64::from(MAX_CARDS_PER_NODE))?;
    let mut mig = None;
    for (p, profile) in MIG_PROFILES.iter().enumerate() {
        let key = format!("nvidia.com/mig-{profile}");
        match count(&key, 1000)? {
            0 => {}
            1 if mig.is_none() => mig = Some(p as u8),
            _ => {
                let field = format!("spec.containers[].resources.limits.{key}");
                return Err(err(&field, "a pod takes one MIG instance (gpol's job model); ask for one".into()));
            }
        }
    }
    let fraction = annotation(keys::GPU_FRACTION)
        .map(|t| {
            let field = format!("metadata.annotations.{}", keys::GPU_FRACTION);
            let f: f64 = t.trim().parse().map_err(|_| err(&field, format!("expected a number, found `{t}`")))?;
            let milli = (f * f64::from(MILLI)).round();
            if !(1.0..f64::from(MILLI)).contains(&milli) {
                return Err(err(&field, format!("`{t}` is not a share of a card (between 0.001 and 0.999)")));
            }
            if cards != 1 {
                return Err(err(&field, format!("a share of a card needs `nvidia.com/gpu: 1`, not {cards}")));
            }
            Ok(milli as u32)
        })
        .transpose()?;
    let models = models(item);
    // A pod pinned to a single-strategy MIG product (`…-MIG-1g.10gb`) gets one instance
    // of that profile per `nvidia.com/gpu`: the device plugin hands out instances there.
    let single = match models.as_slice() {
        [m] => gpol_compiler::models::normalise(m).mig_profile.and_then(|p| gpol_compiler::mig::profile(&p)),
        _ => None,
    };
    let mig = match (mig, single, cards) {
        (None, Some(p), 1) => Some(p),
        (None, Some(_), c) if c > 1 => {
            let m = format!("asks for {c} GPUs on a MIG product; a replica takes one MIG instance");
            return Err(err("spec.containers[].resources.limits.nvidia.com/gpu", m));
        }
        (m, _, _) => m,
    };
    let cards = if mig.is_some() && single.is_some() { 0 } else { cards };
    let request = match (mig, fraction, cards) {
        (Some(_), _, c) if c > 0 => {
            return Err(err(
                "spec.containers[].resources.limits",
                "asks for both whole GPUs and a MIG instance".into(),
            ));
        }
        (Some(p), _, _) => Request::Mig(p),
        (None, Some(m), _) => Request::Fraction(m),
        (None, None, 0) => Request::None,
        (None, None, c) => Request::Whole(c),
    };
    // As the scheduler counts them: the exact sum, CPU in milli-cores and memory in
    // bytes, each rounded up (`MilliValue`, `Value`).
    let cpu_milli = quantity::milli_cores(&resources.cpu, &resources.cpu.to_string())
        .map_err(|m| err("requests.cpu", m.to_string()))?;
    let mem = quantity::bytes(&resources.mem, &resources.mem.to_string())
        .map_err(|m| err("requests.memory", m.to_string()))?;
    let gpu_mem = annotation(keys::GPU_MEMORY)
        .map(|t| {
            let field = format!("metadata.annotations.{}", keys::GPU_MEMORY);
            let b = quantity::read(t).map_err(|m| err(&field, m.to_string()))?;
            quantity::bytes(&b, t).map_err(|m| err(&field, m.to_string()))
        })
        .transpose()?
        .unwrap_or(0);
    let duration_ms = annotation(keys::EXPECTED_DURATION)
        .map(|t| {
            let field = format!("metadata.annotations.{}", keys::EXPECTED_DURATION);
            let s: f64 = t.trim().parse().map_err(|_| err(&field, format!("expected seconds, found `{t}`")))?;
            let ms = (s * 1000.0).round();
            if !(ms.is_finite() && ms >= 0.0 && ms <= MAX_CLOCK_MS as f64) {
                return Err(err(&field, format!("`{t}` is not a duration of at most 100 years")));
            }
            Ok(ms as u64)
        })
        .transpose()?;
    let cards = annotation(keys::CARDS)
        .map(|t| parse_cards(t).map_err(|m| err(&format!("metadata.annotations.{}", keys::CARDS), m.to_string())))
        .transpose()?;
    let kueue_class = label(keys::KUEUE_PRIORITY_CLASS).map(crate::kueue::names::ident_of);
    let class = text("/spec/priorityClassName")
        .map(str::to_string)
        .filter(|c| !c.is_empty() && classes.has_class(c))
        .or(kueue_class.filter(|c| classes.has_class(c)));
    let priority = item.pointer("/spec/priority").and_then(Value::as_i64).map(|p| p as f64);
    let node = text("/spec/nodeName").filter(|n| !n.is_empty()).map(str::to_string);
    let phase = match text("/status/phase") {
        Some("Succeeded" | "Failed") => Phase::Ended,
        _ if node.is_some() => Phase::Bound,
        _ => Phase::Pending,
    };
    let created_ms =
        timestamp(item, "/metadata/creationTimestamp").map_err(|m| err("metadata.creationTimestamp", m))?;
    let started_ms = timestamp(item, "/status/startTime").map_err(|m| err("status.startTime", m))?;
    let job = JobSpec {
        name: full,
        queue: label(keys::QUEUE).map(str::to_string).or(label(keys::KUEUE_QUEUE).map(crate::kueue::names::ident_of)),
        user: Some(label(keys::USER).unwrap_or(&namespace).to_string()),
        priority_class: class,
        priority,
        request,
        gpu_mem,
        cpu_milli,
        mem,
        models: models.iter().map(|m| gpol_compiler::models::name(m)).collect(),
        bursty: flag(keys::BURSTY),
        latency_critical: flag(keys::LATENCY_CRITICAL),
        preemptible: flag(keys::PREEMPTIBLE),
        duration_ms,
        labels,
        ..JobSpec::default()
    };
    let uid = text("/metadata/uid").unwrap_or_default().to_string();
    Ok(MappedPod { uid, namespace, name, node, phase, job, cards, created_ms, started_ms })
}

/// An RFC 3339 time (`2026-11-27T06:31:36Z`) as Unix milliseconds; absent is `None`.
fn timestamp(item: &Value, path: &str) -> Result<Option<i64>, String> {
    let Some(text) = item.pointer(path).and_then(Value::as_str) else { return Ok(None) };
    let at: jiff::Timestamp = text.parse().map_err(|e| format!("`{text}` is not an RFC 3339 time: {e}"))?;
    Ok(Some(at.as_millisecond()))
}

/// The GPU models a pod is pinned to by `nodeSelector` or by required node affinity.
fn models(item: &Value) -> Vec<String> {
    if let Some(m) = item.pointer("/spec/nodeSelector").and_then(|s| s.get(keys::GPU_PRODUCT)).and_then(Value::as_str) {
        return vec![m.to_string()];
    }
    let terms = item
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array);
    let mut models = Vec::new();
    for term in terms.into_iter().flatten() {
        // Terms are alternatives: a term that does not pin the model allows any.
        let pinned = term.get("matchExpressions").and_then(Value::as_array).and_then(|exprs| {
            exprs.iter().find(|e| {
                e.get("key").and_then(Value::as_str) == Some(keys::GPU_PRODUCT)
                    && e.get("operator").and_then(Value::as_str) == Some("In")
            })
        });
        match pinned.and_then(|e| e.get("values")).and_then(Value::as_array) {
            Some(values) => models.extend(values.iter().filter_map(Value::as_str).map(str::to_string)),
            None => return Vec::new(),
        }
    }
    models.sort();
    models.dedup();
    models
}

/// A pod's effective requests: containers summed, or an init container's if larger
/// (init containers run one at a time, before the others), as Kubernetes counts them:
/// exactly, each quantity as the API server reads it.
struct Resources {
    cpu: Quantity,
    mem: Quantity,
    extended: Vec<(String, Quantity)>,
}

/// The larger of two quantities.
fn larger(a: Quantity, b: Quantity) -> Quantity {
    if b.nano() > a.nano() { b } else { a }
}

impl Resources {
    fn of(item: &Value) -> Result<Resources, (String, String)> {
        let sum = Self::containers(item, "containers")?;
        let init = Self::containers(item, "initContainers")?;
        let mut r = sum;
        r.cpu = larger(r.cpu, init.cpu);
        r.mem = larger(r.mem, init.mem);
        for (k, v) in init.extended {
            match r.extended.iter_mut().find(|(key, _)| *key == k) {
                Some((_, x)) => *x = larger(*x, v),
                None => r.extended.push((k, v)),
            }
        }
        Ok(r)
    }

    /// For `containers`, the sum; for `initContainers`, the largest of each resource.
    fn containers(item: &Value, list: &str) -> Result<Resources, (String, String)> {
        let zero = Quantity::from_nano(0);
        let mut r = Resources { cpu: zero, mem: zero, extended: Vec::new() };
        let summed = list == "containers";
        // A sum past what gpol holds is past every limit: the field's check names it.
        let add = |x: &mut Quantity, v: Quantity| {
            *x = if summed { x.checked_add(&v).unwrap_or(Quantity::from_nano(i128::MAX)) } else { larger(*x, v) }
        };
        let containers = item.pointer(&format!("/spec/{list}")).and_then(Value::as_array);
        for (i, c) in containers.into_iter().flatten().enumerate() {
            let requests = c.pointer("/resources/requests").and_then(Value::as_object);
            let limits = c.pointer("/resources/limits").and_then(Value::as_object);
            // A request not given defaults to the limit, as the API server fills it in.
            let mut keys: Vec<&String> = requests.into_iter().chain(limits).flat_map(|m| m.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let (which, v) = match requests.and_then(|m| m.get(key)) {
                    Some(v) => ("requests", v),
                    None => ("limits", limits.and_then(|m| m.get(key)).unwrap_or(&Value::Null)),
                };
                let text = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                let field = format!("spec.{list}[{i}].resources.{which}.{key}");
                let amount = quantity::read(&text).map_err(|m| (field, m.to_string()))?;
                match key.as_str() {
                    "cpu" => add(&mut r.cpu, amount),
                    "memory" => add(&mut r.mem, amount),
                    _ => match r.extended.iter_mut().find(|(k, _)| k == key) {
                        Some((_, x)) => add(x, amount),
                        None => r.extended.push((key.clone(), amount)),
                    },
                }
            }
        }
        Ok(r)
    }

    fn get(&self, key: &str) -> Option<Quantity> {
        self.extended.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn any_class(_: &str) -> bool {
        true
    }

    #[test]
    fn a_training_pod_becomes_a_job() {
        let p = json!({
            "metadata": {"name": "train-0", "namespace": "ml", "uid": "u1",
                "labels": {"gpol.dev/queue": "training", "gpol.dev/preemptible": "true", "team": "vision"},
                "annotations": {"gpol.dev/expected-duration": "3600", "gpol.dev/gpu-memory": "40Gi"}},
            "spec": {"priorityClassName": "high", "priority": 1000, "nodeName": "gpu-a",
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "initContainers": [{"resources": {"requests": {"cpu": "8", "memory": "1Gi"}}}],
                "containers": [
                    {"resources": {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"nvidia.com/gpu": "4"}}},
                    {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"}});
        let m = pod(&p, &any_class).expect("a valid pod");
        assert_eq!((m.uid.as_str(), m.node.as_deref(), m.phase), ("u1", Some("gpu-a"), Phase::Bound));
        let j = m.job;
        assert_eq!(j.name, "ml/train-0");
        assert_eq!((j.queue.as_deref(), j.user.as_deref()), (Some("training"), Some("ml")));
        assert_eq!((j.priority_class.as_deref(), j.priority), (Some("high"), Some(1000.0)));
        assert_eq!(j.request, Request::Whole(4));
        // The init container's 8 CPUs exceed the containers' 2.5; its memory does not.
        assert_eq!((j.cpu_milli, j.mem), (8000, 9 << 30));
        assert_eq!((j.gpu_mem, j.duration_ms), (40 << 30, Some(3_600_000)));
        assert_eq!(j.models, vec!["h100".to_string()], "the product through gpol's model table");
        assert!(j.preemptible && !j.bursty);
        assert!(j.labels.contains(&("team".into(), "vision".into())));
    }

    #[test]
    fn kueue_names_map_back_to_the_policys() {
        let p = json!({"metadata": {"name": "k", "labels": {"kueue.x-k8s.io/queue-name": "team-a",
            "kueue.x-k8s.io/priority-class": "batch-low"}}, "spec": {"containers": []}});
        let m = pod(&p, &|c: &str| c == "batch_low").expect("a valid pod");
        assert_eq!((m.job.queue.as_deref(), m.job.priority_class.as_deref()), (Some("team_a"), Some("batch_low")));
        // gpol's own label is taken as written, and wins.
        let p = json!({"metadata": {"name": "k", "labels": {"kueue.x-k8s.io/queue-name": "team-a",
            "gpol.dev/queue": "x-y"}}, "spec": {"priorityClassName": "batch_low", "containers": []}});
        let m = pod(&p, &|c: &str| c == "batch_low").expect("a valid pod");
        assert_eq!((m.job.queue.as_deref(), m.job.priority_class.as_deref()), (Some("x-y"), Some("batch_low")));
    }

    #[test]
    fn shares_mig_and_affinity() {
        let p = json!({"metadata": {"name": "s", "annotations": {"gpol.dev/gpu-fraction": "0.25"},
            "labels": {"kueue.x-k8s.io/queue-name": "serving"}},
            "spec": {"priorityClassName": "unknown",
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["L4", "A10"]}]},
                    {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["L4"]}]}]}}},
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
        let m = pod(&p, &|c: &str| c == "high").expect("a valid pod");
        assert_eq!((m.namespace.as_str(), m.phase), ("default", Phase::Pending));
        assert_eq!(m.job.request, Request::Fraction(250));
        assert_eq!(m.job.queue.as_deref(), Some("serving"));
        // A class the policy does not define is no class.
        assert_eq!(m.job.priority_class, None);
        assert_eq!(m.job.models, vec!["a10".to_string(), "l4".to_string()]);
        let p = json!({"metadata": {"name": "m"}, "spec": {"containers": [
            {"resources": {"limits": {"nvidia.com/mig-3g.40gb": "1"}}}]}, "status": {"phase": "Succeeded"}});
        let m = pod(&p, &any_class).expect("a valid pod");
        let profile = MIG_PROFILES.iter().position(|p| *p == "3g.40gb").expect("a known profile") as u8;
        assert_eq!((m.job.request, m.phase), (Request::Mig(profile), Phase::Ended));
        // Under the single strategy a pod asks for `nvidia.com/gpu` on a MIG product.
        let single = |gpus: u32| {
            json!({"metadata": {"name": "one"}, "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"},
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
        };
        let m = pod(&single(1), &any_class).expect("a valid pod");
        let small = MIG_PROFILES.iter().position(|p| *p == "1g.10gb").expect("a known profile") as u8;
        assert_eq!((m.job.request, m.job.models.clone()), (Request::Mig(small), vec!["h100".to_string()]));
        let e = pod(&single(2), &any_class).expect_err("two instances for one replica");
        assert!(e.message.contains("asks for 2 GPUs on a MIG product"), "{e}");
    }

    #[test]
    fn card_assignments_read_back_as_written() {
        for cards in [vec![(0, None), (1, None)], vec![(3, Some(1))], vec![]] {
            assert_eq!(parse_cards(&cards_text(&cards)), Ok(cards.clone()));
        }
        assert_eq!(cards_text(&[(0, None), (5, None)]), "0,5");
        assert!(parse_cards("0,x").is_err());
        assert!(parse_cards("99999").is_err());
    }

    #[test]
    fn requests_are_summed_exactly_and_rounded_up_as_the_scheduler_counts_them() {
        let requests = |cpu: &[&str], mem: &[&str]| {
            let containers: Vec<Value> =
                cpu.iter().zip(mem).map(|(c, m)| json!({"resources": {"requests": {"cpu": c, "memory": m}}})).collect();
            let m = pod(&json!({"metadata": {"name": "p"}, "spec": {"containers": containers}}), &any_class);
            m.map(|m| (m.job.cpu_milli, m.job.mem))
        };
        // (cpu of each container, memory of each) → (milli-cores, bytes): Kubernetes adds
        // the quantities exactly, then `MilliValue` and `Value` round up.
        type Case<'a> = (&'a [&'a str], &'a [&'a str], (u64, u64));
        let cases: [Case; 5] = [
            (&["100u"], &["1.4"], (1, 2)),
            (&["0.0005", "0.0005"], &["1Ki", "0.5Ki"], (1, 1536)),
            (&["250m", "1.5"], &["1Gi", "1G"], (1750, (1 << 30) + 1_000_000_000)),
            (&["1E3"], &["1E3"], (1_000_000, 1000)),
            (&["3.001n"], &["0"], (1, 0)),
        ];
        for (cpu, mem, want) in cases {
            assert_eq!(requests(cpu, mem), Ok(want), "{cpu:?} {mem:?}");
        }
        let e = requests(&["1E"], &["1"]).expect_err("10^18 cores");
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("requests.cpu", "pod `default/p`: `1000000000000000000` is too large, at most 100000 cores")
        );
        let e = requests(&["1"], &["-1Gi"]).expect_err("negative");
        assert_eq!(e.field, "spec.containers[0].resources.requests.memory");
    }

    #[test]
    fn bad_pods_say_which_field() {
        let cases = [
            (json!({"metadata": {}}), "metadata.name", "missing"),
            (
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}}),
                "spec.containers[0].resources.requests.cpu",
                "`x` is not a quantity",
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1.5"}}}]}}),
                "spec.containers[].resources.limits.nvidia.com/gpu",
                "expected a whole number",
            ),
            (
                json!({"metadata": {"name": "p", "annotations": {"gpol.dev/gpu-fraction": "1.5"}},
                    "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}),
                "metadata.annotations.gpol.dev/gpu-fraction",
                "not a share of a card",
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.10gb": "2"}}}]}}),
                "spec.containers[].resources.limits.nvidia.com/mig-1g.10gb",
                "one MIG instance",
            ),
        ];
        for (p, field, message) in cases {
            let e = pod(&p, &any_class).expect_err(field);
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(message), "{e}");
        }
    }
}
