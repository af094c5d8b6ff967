//! The kube-scheduler extender protocol (k8s.io/kube-scheduler `extender/v1`) on the wire.
//!
//! The Go types carry no JSON tags: kube-scheduler writes each key as its Go field name
//! (PascalCase) and reads keys whatever their case. So these types write PascalCase, and
//! [`decode`] first folds every protocol key to it, whatever its case — only the
//! protocol's own keys: node names (map keys) and the Kubernetes objects inside (Pods,
//! NodeLists, which keep their camelCase) are left as they are. Go writes absent
//! pointers, maps and slices as `null`: `null` reads as absent.
//!
//! Pods and Nodes are kept as JSON here; the mapping to gpol's records is elsewhere.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The highest score prioritize gives (`MaxExtenderPriority`); kube-scheduler multiplies
/// it by the extender's weight and by 10.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;
/// The lowest (`MinExtenderPriority`).
pub const MIN_EXTENDER_PRIORITY: i64 = 0;

/// Node name → why it failed, in the order answered.
pub type FailedNodes = indexmap::IndexMap<String, Arc<str>>;

/// A filter or prioritize request: the pod, and the nodes as full objects
/// (`nodeCacheCapable: false`) or as names (`true`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ExtenderArgs {
    pub pod: Option<Value>,
    /// A `v1.NodeList`.
    pub nodes: Option<Value>,
    pub node_names: Option<Vec<String>>,
}

/// A filter answer: the nodes that pass, in the form the request used, and those that
/// fail (unresolvable ones are not worth preempting for).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ExtenderFilterResult {
    pub nodes: Option<Value>,
    pub node_names: Option<Vec<String>>,
    pub failed_nodes: Option<FailedNodes>,
    pub failed_and_unresolvable_nodes: Option<FailedNodes>,
    pub error: String,
}

/// One node's prioritize score; the answer is a bare list of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct HostPriority {
    pub host: String,
    pub score: i64,
}

/// A preempt request: the pod, and the victims kube-scheduler proposes per node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ExtenderPreemptionArgs {
    pub pod: Option<Value>,
    pub node_name_to_victims: Option<BTreeMap<String, Victims>>,
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

/// Victims as full pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Victims {
    pub pods: Option<Vec<Value>>,
    #[serde(rename = "NumPDBViolations")]
    pub num_pdb_violations: i64,
}

/// Victims by UID.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct MetaVictims {
    pub pods: Option<Vec<MetaPod>>,
    #[serde(rename = "NumPDBViolations")]
    pub num_pdb_violations: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetaPod {
    #[serde(rename = "UID")]
    pub uid: String,
}

/// A preempt answer: the victims per node, by UID.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ExtenderPreemptionResult {
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

/// A bind request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ExtenderBindingArgs {
    pub pod_name: String,
    pub pod_namespace: String,
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    pub node: String,
}

impl ExtenderBindingArgs {
    /// The first field a bind cannot do without that the request leaves empty (`PodUID`
    /// may be: the pod is then bound whatever its UID).
    pub fn missing(&self) -> Option<&'static str> {
        [("PodName", &self.pod_name), ("PodNamespace", &self.pod_namespace), ("Node", &self.node)]
            .into_iter()
            .find(|(_, v)| v.is_empty())
            .map(|(k, _)| k)
    }
}

/// A bind answer: empty, or what went wrong.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ExtenderBindingResult {
    pub error: String,
}

/// Every key of the protocol's own objects, as kube-scheduler writes it.
const KEYS: [&str; 17] = [
    "Pod",
    "Nodes",
    "NodeNames",
    "FailedNodes",
    "FailedAndUnresolvableNodes",
    "Error",
    "Host",
    "Score",
    "NodeNameToVictims",
    "NodeNameToMetaVictims",
    "Pods",
    "NumPDBViolations",
    "UID",
    "PodName",
    "PodNamespace",
    "PodUID",
    "Node",
];

/// A protocol object's keys in their canonical case (unknown keys kept as they are).
fn fold(object: Map<String, Value>) -> Map<String, Value> {
    object
        .into_iter()
        .map(|(k, v)| match KEYS.iter().find(|known| known.eq_ignore_ascii_case(&k)) {
            Some(known) => (known.to_string(), v),
            None => (k, v),
        })
        .collect()
}

/// Folds the protocol's objects in a request or answer: the top level, the victims per
/// node (their values, not the node names), and the UID objects inside them. Pods and
/// nodes are Kubernetes objects: left alone.
fn fold_document(v: Value) -> Value {
    let victims = |m: Value| match m {
        Value::Object(per_node) => Value::Object(
            per_node
                .into_iter()
                .map(|(node, v)| {
                    let v = match v {
                        Value::Object(o) => {
                            let mut o = fold(o);
                            // MetaVictims' pods are `{"UID": …}` objects; Victims' are Pods.
                            if let Some(Value::Array(pods)) = o.get_mut("Pods") {
                                for p in pods.iter_mut() {
                                    if let Value::Object(pod) = p
                                        && pod.keys().all(|k| k.eq_ignore_ascii_case("uid"))
                                    {
                                        *p = Value::Object(fold(std::mem::take(pod)));
                                    }
                                }
                            }
                            Value::Object(o)
                        }
                        other => other,
                    };
                    (node, v)
                })
                .collect(),
        ),
        other => other,
    };
    match v {
        Value::Object(o) => {
            let mut o = fold(o);
            for key in ["NodeNameToVictims", "NodeNameToMetaVictims"] {
                if let Some(m) = o.remove(key) {
                    o.insert(key.to_string(), victims(m));
                }
            }
            Value::Object(o)
        }
        // A prioritize answer: a list of host priorities.
        Value::Array(items) => Value::Array(
            items.into_iter().map(|i| if let Value::Object(o) = i { Value::Object(fold(o)) } else { i }).collect(),
        ),
        other => other,
    }
}

/// Why a body is no extender message.
#[derive(Debug)]
pub enum DecodeError {
    NotJson(serde_json::Error),
    NotMessage(serde_json::Error),
    /// A field the verb needs is empty or missing.
    Missing(&'static str),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::NotJson(e) => write!(f, "not JSON: {e}"),
            DecodeError::NotMessage(e) => write!(f, "not an extender message: {e}"),
            DecodeError::Missing(field) => write!(f, "the request has no `{field}`"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A request or answer as kube-scheduler writes it (any key case), or what is wrong with it.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
    let v: Value = serde_json::from_slice(body).map_err(DecodeError::NotJson)?;
    serde_json::from_value(fold_document(v)).map_err(DecodeError::NotMessage)
}

/// A request or answer as kube-scheduler reads it.
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    // Serializing these types cannot fail: their maps have string keys.
    serde_json::to_vec(message).unwrap_or_default()
}
