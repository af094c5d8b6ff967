//! Quota windows on Kueue. A ClusterQueue's quotas are fixed, so a policy whose amounts
//! follow the clock (`lend_limit 56 gpu from 21:00 to 07:00`) becomes one set of Cohorts
//! and ClusterQueues per phase of the week, and a CronJob per window edge that applies the
//! phase beginning there: the phase's objects in a ConfigMap, `kubectl apply
//! --server-side` of them in a pod run at the edge's local time (`timeZone`: the policy's
//! `timezone`), under a ServiceAccount that may only read and patch ClusterQueues and
//! Cohorts. Edges at the same time of day whose phases are the same are one CronJob over
//! those days.

use super::objects::Object;
use super::{Enforcer, Finding, Options, translate};
use gpol_compiler::clock::Clock;
use gpol_compiler::hir::{Policy, Queue, QuotaWindow};
use gpol_compiler::ir::QuotaKind;
use serde_json::json;
use std::collections::BTreeMap;

/// The name of the ServiceAccount, ClusterRole and binding, and the field manager.
pub const NAME: &str = "gpol-quota-windows";

/// Where the schedule runs and with what.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The namespace of the CronJobs, ConfigMaps and ServiceAccount.
    pub namespace: String,
    /// An image with `/bin/kubectl`.
    pub image: String,
}

/// The image by default: the Kubernetes project's kubectl.
pub const DEFAULT_IMAGE: &str = "registry.k8s.io/kubectl:v1.34.1";

/// Whether the phases carry a window's amounts: a kind the queue's Cohort or ClusterQueue
/// holds (a root holds only its guarantee; nobody a per-user limit), of resources some
/// queue quotes at all times (the flavors are the standing quotas').
pub fn followable(policy: &Policy, queue: &Queue, w: &QuotaWindow) -> bool {
    let held = match w.kind {
        QuotaKind::Guarantee => true,
        QuotaKind::Limit | QuotaKind::BorrowLimit | QuotaKind::LendLimit => queue.parent.is_some(),
        QuotaKind::UserLimit => false,
    };
    held && w.amounts.keys().all(|r| policy.queues.iter().any(|q| super::quotas::quotes(q, r)))
}

/// The objects that apply each phase at its edge (none when the policy has no windows),
/// and what the phases' translations found beyond the standing one's (`known`), and edges
/// in an hour the clocks skip.
pub fn objects(
    policy: &Policy,
    options: &Options,
    schedule: &Schedule,
    known: &[Finding],
) -> Result<(Vec<Object>, Vec<Finding>), String> {
    let edges = policy.quota_edges();
    let mut findings: Vec<Finding> = Vec::new();
    if edges.is_empty() {
        return Ok((Vec::new(), findings));
    }
    let clock = Clock::of_zone(policy.settings.timezone.as_deref());
    for &edge in edges.iter().filter(|&&e| clock.skips(e)) {
        let (day, h, m) = (edge / 1440, edge % 1440 / 60, edge % 60);
        let name = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"][usize::from(day % 7)];
        findings.push(Finding {
            span: None,
            construct: format!("the quota window edge {name} {h:02}:{m:02}"),
            message: "it falls in the hour the clocks skip when they go forward: Kubernetes skips that CronJob run, so on that day the phase begins at the next edge".into(),
            enforcer: Some(Enforcer::Nobody),
        });
    }
    // (minute of day, the phase's objects) → the days (cron's: 0 is Sunday) it begins on.
    let mut groups: BTreeMap<(u16, String), Vec<u16>> = BTreeMap::new();
    for &edge in &edges {
        let phase = translate(policy, &Options { minute: Some(edge), ..options.clone() });
        for f in phase.findings {
            let seen = |g: &Finding| g.construct == f.construct && g.message == f.message;
            if !known.iter().any(seen) && !findings.iter().any(seen) {
                findings.push(f);
            }
        }
        let mut text = String::new();
        for o in phase.objects.iter().filter(|o| matches!(o, Object::Cohort(_) | Object::ClusterQueue(_))) {
            text.push_str("---\n");
            text.push_str(&serde_saphyr::to_string(o).map_err(|e| format!("{} `{}`: {e}", o.kind(), o.name()))?);
        }
        let day = (edge / 1440 + 1) % 7;
        groups.entry((edge % 1440, text)).or_default().push(day);
    }
    let ns = schedule.namespace.as_str();
    let labels = json!({"app.kubernetes.io/managed-by": "gpolc"});
    let mut out = vec![
        Object::Core(json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": NAME, "namespace": ns, "labels": labels},
        })),
        Object::Core(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels},
            "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "cohorts"],
                       "verbs": ["get", "list", "patch"]}],
        })),
        Object::Core(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}],
        })),
    ];
    let zone = policy.settings.timezone.as_deref().unwrap_or("Etc/UTC");
    for ((minute, text), mut days) in groups {
        days.sort_unstable();
        let list: Vec<String> = days.iter().map(u16::to_string).collect();
        let (h, m) = (minute / 60, minute % 60);
        let name = format!("gpol-quotas-{h:02}{m:02}-{}", list.join(""));
        out.push(Object::Core(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"objects.yaml": text},
        })));
        let pod = json!({
            "serviceAccountName": NAME,
            "restartPolicy": "OnFailure",
            "containers": [{
                "name": "apply",
                "image": schedule.image,
                "command": ["/bin/kubectl"],
                "args": ["apply", "--server-side", "--force-conflicts", format!("--field-manager={NAME}"),
                         "-f", "/phase/objects.yaml"],
                "volumeMounts": [{"name": "phase", "mountPath": "/phase", "readOnly": true}],
                // What the restricted Pod Security level asks (the image's user is nonroot).
                "securityContext": {
                    "runAsNonRoot": true, "runAsUser": 65532, "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
                },
            }],
            "volumes": [{"name": "phase", "configMap": {"name": name}}],
        });
        out.push(Object::Core(json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "schedule": format!("{m} {h} * * {}", list.join(",")),
                "timeZone": zone,
                "concurrencyPolicy": "Replace",
                "startingDeadlineSeconds": 3600,
                "jobTemplate": {"spec": {"backoffLimit": 6, "template": {"spec": pod}}},
            },
        })));
    }
    Ok((out, findings))
}
