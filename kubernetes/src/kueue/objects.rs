//! Kueue's objects (`kueue.x-k8s.io/v1beta2`), only the fields gpol writes. Field names
//! and enum values are Kueue's; the CRDs kept in tests/fixtures/kueue/ are the truth the
//! tests validate against.

use serde::Serialize;
use std::collections::BTreeMap;

pub const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";

/// One object of the output, in the order it is written.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Object {
    ResourceFlavor(Named<FlavorSpec>),
    Cohort(Named<CohortSpec>),
    ClusterQueue(Named<ClusterQueueSpec>),
    LocalQueue(Named<LocalQueueSpec>),
    WorkloadPriorityClass(PriorityClass),
    /// A core Kubernetes object (a ConfigMap, CronJob, ServiceAccount, ClusterRole or
    /// ClusterRoleBinding of the quota windows' schedule), with its `kind` and `metadata`.
    Core(serde_json::Value),
}

impl Object {
    pub fn kind(&self) -> &'static str {
        match self {
            Object::ResourceFlavor(_) => "ResourceFlavor",
            Object::Cohort(_) => "Cohort",
            Object::ClusterQueue(_) => "ClusterQueue",
            Object::LocalQueue(_) => "LocalQueue",
            Object::WorkloadPriorityClass(_) => "WorkloadPriorityClass",
            Object::Core(v) => match v.get("kind").and_then(serde_json::Value::as_str) {
                Some("ConfigMap") => "ConfigMap",
                Some("CronJob") => "CronJob",
                Some("ServiceAccount") => "ServiceAccount",
                Some("ClusterRole") => "ClusterRole",
                Some("ClusterRoleBinding") => "ClusterRoleBinding",
                _ => "object",
            },
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Object::ResourceFlavor(o) => &o.metadata.name,
            Object::Cohort(o) => &o.metadata.name,
            Object::ClusterQueue(o) => &o.metadata.name,
            Object::LocalQueue(o) => &o.metadata.name,
            Object::WorkloadPriorityClass(o) => &o.metadata.name,
            Object::Core(v) => v.pointer("/metadata/name").and_then(serde_json::Value::as_str).unwrap_or_default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metadata {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// An object with a `spec`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Named<S> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Metadata,
    pub spec: S,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorSpec {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CohortSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cohort_name: Option<String>,
    /// `{}`: every namespace may point a LocalQueue at it (absent would be none).
    pub namespace_selector: BTreeMap<String, String>,
    pub queueing_strategy: QueueingStrategy,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    pub preemption: Preemption,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    pub cluster_queue: String,
}

/// WorkloadPriorityClass has no `spec`: `value` and `description` are top level.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClass {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Metadata,
    pub value: i32,
    pub description: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    pub covered_resources: Vec<String>,
    pub flavors: Vec<FlavorQuotas>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlavorQuotas {
    pub name: String,
    /// One per covered resource, in the same order (Kueue's webhook requires it).
    pub resources: Vec<ResourceQuota>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    pub name: String,
    pub nominal_quota: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FairSharing {
    pub weight: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum QueueingStrategy {
    StrictFIFO,
    BestEffortFIFO,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    pub within_cluster_queue: WithinClusterQueue,
    pub reclaim_within_cohort: ReclaimWithinCohort,
    pub borrow_within_cohort: BorrowWithinCohort,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum WithinClusterQueue {
    #[default]
    Never,
    LowerPriority,
    LowerOrNewerEqualPriority,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ReclaimWithinCohort {
    #[default]
    Never,
    LowerPriority,
    Any,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BorrowWithinCohort {
    pub policy: BorrowPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum BorrowPolicy {
    #[default]
    Never,
    LowerPriority,
}

/// An object's metadata with just a name.
pub fn metadata(name: &str) -> Metadata {
    let labels = BTreeMap::from([("app.kubernetes.io/managed-by".to_string(), "gpolc".to_string())]);
    Metadata { name: name.to_string(), namespace: None, labels }
}

/// An object with a spec.
pub fn named<S>(kind: &'static str, meta: Metadata, spec: S) -> Named<S> {
    Named { api_version: API_VERSION, kind, metadata: meta, spec }
}
