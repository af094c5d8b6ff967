//! `gpolc build --target kueue`: every example policy's objects validate against Kueue's
//! published CRD schemas (tests/fixtures/kueue/, unmodified) and the rules Kueue's
//! webhook adds, and match a golden file; known answers for the quota tree, the
//! preemption settings and the findings.

use gpol_compiler::hir::Policy;
use gpol_kubernetes::kueue::{self, Capacity, Finding, Options, Translation};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn policy_text(text: &str) -> Policy {
    match gpol_compiler::load::Checked::from_text("test.gpol", text).into_policy() {
        Ok(c) => c.policy,
        Err(failed) => panic!("the test policy does not check:\n{failed}"),
    }
}

fn policy_file(path: &Path) -> Policy {
    match gpol_compiler::load::Checked::from_file(path).map(|c| c.into_policy()) {
        Ok(Ok(c)) => c.policy,
        Ok(Err(failed)) => panic!("{} does not check:\n{failed}", path.display()),
        Err(e) => panic!("{e}"),
    }
}

/// The objects as JSON values, through the YAML text the CLI writes.
fn documents(t: &Translation) -> Vec<Value> {
    let text = kueue::yaml(t, "test").expect("renders");
    text.split("\n---\n")
        .skip(1)
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap_or_else(|e| panic!("not YAML: {e}\n{doc}")))
        .collect()
}

/// Kueue's v1beta2 schema of each kind, from the CRDs kept as fixtures.
struct Schemas {
    by_kind: Vec<(String, jsonschema::Validator)>,
}

impl Schemas {
    fn load() -> Schemas {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kueue");
        let mut by_kind = Vec::new();
        for file in ["clusterqueues", "cohorts", "resourceflavors", "workloadpriorityclasses", "localqueues"] {
            let path = dir.join(format!("kueue.x-k8s.io_{file}.yaml"));
            let text = std::fs::read_to_string(&path).expect("the Kueue CRD fixtures are in the repository");
            let crd: Value = serde_saphyr::from_str(&text).expect("a CRD is YAML");
            let kind = crd["spec"]["names"]["kind"].as_str().expect("kind").to_string();
            let versions = crd["spec"]["versions"].as_array().expect("versions");
            let v1beta2 = versions.iter().find(|v| v["name"] == "v1beta2").expect("v1beta2 is served");
            assert_eq!(v1beta2["storage"], Value::Bool(true), "{kind}: v1beta2 is the storage version");
            let schema = v1beta2["schema"]["openAPIV3Schema"].clone();
            let validator = jsonschema::validator_for(&schema).expect("Kueue's schema compiles");
            by_kind.push((kind, validator));
        }
        Schemas { by_kind }
    }

    /// Schema errors, then the rules Kueue's CEL expressions and webhook add.
    fn problems(&self, doc: &Value) -> Vec<String> {
        let kind = doc["kind"].as_str().unwrap_or_default();
        let Some((_, validator)) = self.by_kind.iter().find(|(k, _)| k == kind) else {
            return vec![format!("no schema for kind `{kind}`")];
        };
        let mut out: Vec<String> = validator.iter_errors(doc).map(|e| format!("{}: {e}", e.instance_path())).collect();
        if doc["apiVersion"] != "kueue.x-k8s.io/v1beta2" {
            out.push("apiVersion is not kueue.x-k8s.io/v1beta2".into());
        }
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        if !kueue::names::is_dns_subdomain(name) {
            out.push(format!("name `{name}` is not a DNS-1123 subdomain"));
        }
        out.extend(webhook_rules(doc));
        out
    }
}

/// The rules beyond the OpenAPI schema: Kueue's CEL validations and its webhook's
/// (docs: pkg/webhooks/clusterqueue_webhook.go, cohort_webhook.go).
fn webhook_rules(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let spec = &doc["spec"];
    let kind = doc["kind"].as_str().unwrap_or_default();
    let parent = match kind {
        "ClusterQueue" => spec.get("cohortName"),
        "Cohort" => spec.get("parentName"),
        _ => return out,
    };
    let mut flavors_seen: Vec<&str> = Vec::new();
    let mut resources_seen = Vec::new();
    let weight = spec["fairSharing"].get("weight").map(|w| quantity(w).unwrap_or(-1.0));
    if let Some(w) = weight.filter(|&w| !(w == 0.0 || w > 1e-9)) {
        out.push(format!("fairSharing.weight {w}: 0 or more than 1n"));
    }
    for group in spec["resourceGroups"].as_array().into_iter().flatten() {
        let covered: Vec<&str> =
            group["coveredResources"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        for r in &covered {
            if resources_seen.contains(r) {
                out.push(format!("resource `{r}` in two groups"));
            }
            resources_seen.push(r);
        }
        for flavor in group["flavors"].as_array().into_iter().flatten() {
            let fname = flavor["name"].as_str().unwrap_or_default();
            if flavors_seen.contains(&fname) {
                out.push(format!("flavor `{fname}` twice (in one group or two)"));
            }
            flavors_seen.push(fname);
            let names: Vec<&str> =
                flavor["resources"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
            if names != covered {
                out.push(format!("flavor `{fname}`: resources {names:?} are not the covered {covered:?} in order"));
            }
            for r in flavor["resources"].as_array().into_iter().flatten() {
                let amount = |k: &str| r.get(k).map(|q| quantity(q).unwrap_or(-1.0));
                for k in ["nominalQuota", "borrowingLimit", "lendingLimit"] {
                    if amount(k).is_some_and(|a| a < 0.0) {
                        out.push(format!("{fname}/{}: {k} is negative or not a quantity", r["name"]));
                    }
                }
                if parent.is_none() && (r.get("borrowingLimit").is_some() || r.get("lendingLimit").is_some()) {
                    out.push(format!("{fname}/{}: a limit without a parent", r["name"]));
                }
                let over = matches!((amount("lendingLimit"), amount("nominalQuota")), (Some(l), Some(n)) if l > n);
                if kind == "ClusterQueue" && over {
                    out.push(format!("{fname}/{}: lendingLimit above nominalQuota", r["name"]));
                }
            }
        }
    }
    let p = &spec["preemption"];
    if p["reclaimWithinCohort"] == "Never" && p["borrowWithinCohort"]["policy"] != "Never" {
        out.push("reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never".into());
    }
    if kind == "ClusterQueue" && spec.get("namespaceSelector").is_none() {
        out.push("no namespaceSelector: no namespace could use the ClusterQueue".into());
    }
    out
}

/// A Kubernetes quantity's value, read as the API server reads it.
fn quantity(q: &Value) -> Option<f64> {
    if let Some(n) = q.as_f64() {
        return Some(n);
    }
    gpol_kubernetes::quantity::Quantity::parse(q.as_str()?).ok().map(|q| q.to_f64())
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} `{name}` among {docs:#?}"))
}

fn quota<'a>(doc: &'a Value, flavor: &str, resource: &str) -> &'a Value {
    doc["spec"]["resourceGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["flavors"].as_array().into_iter().flatten())
        .filter(|f| f["name"] == flavor)
        .flat_map(|f| f["resources"].as_array().into_iter().flatten())
        .find(|r| r["name"] == resource)
        .unwrap_or_else(|| panic!("no {flavor}/{resource} in {doc:#}"))
}

fn constructs(t: &Translation) -> Vec<String> {
    t.findings.iter().map(|f| f.construct.clone()).collect()
}

#[test]
fn every_example_policy_validates_against_kueues_schemas_and_matches_its_golden() {
    let schemas = Schemas::load();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("policies"))
        .expect("policies/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "gpol"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 10, "the example policies are found");
    let mut with_objects = 0;
    for path in &paths {
        let policy = policy_file(path);
        let options =
            Options { namespaces: vec!["ml-team".into()], capacity: None, minute: None, windows_followed: false };
        let t = kueue::translate(&policy, &options);
        assert!(!t.findings.iter().any(Finding::is_error), "{}: {:?}", path.display(), t.findings);
        let docs = documents(&t);
        for doc in &docs {
            let problems = schemas.problems(doc);
            assert!(
                problems.is_empty(),
                "{}: {} `{}`: {problems:#?}",
                path.display(),
                doc["kind"],
                doc["metadata"]["name"]
            );
        }
        with_objects += usize::from(docs.iter().any(|d| d["kind"] == "ClusterQueue"));
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        let text = kueue::yaml(&t, &format!("policies/{name}.gpol")).expect("renders");
        insta::assert_snapshot!(format!("kueue_{name}"), text);
    }
    assert!(with_objects >= 5, "most example policies have queues: {with_objects}");
}

#[test]
fn the_validation_fails_what_kueue_refuses() {
    let schemas = Schemas::load();
    let t = kueue::translate(&policy_text(CLASSIC), &Options::default());
    let docs = documents(&t);
    let cq = find(&docs, "ClusterQueue", "a").clone();
    let mutate = |f: &dyn Fn(&mut Value)| {
        let mut d = cq.clone();
        f(&mut d);
        schemas.problems(&d)
    };
    assert!(schemas.problems(&cq).is_empty());
    assert!(!mutate(&|d| d["spec"]["queueingStrategy"] = "Fifo".into()).is_empty(), "an unknown enum value");
    assert!(!mutate(&|d| d["spec"]["preemption"]["reclaimWithinCohort"] = "Never".into()).is_empty(), "CEL rule");
    assert!(
        !mutate(&|d| {
            d["spec"].as_object_mut().map(|s| s.remove("cohortName"));
        })
        .is_empty(),
        "limits without cohort"
    );
    assert!(!mutate(&|d| d["metadata"]["name"] = "Team_A".into()).is_empty(), "a name Kubernetes refuses");
    assert!(!mutate(&|d| d["spec"]["resourceGroups"][0]["coveredResources"] = serde_json::json!([])).is_empty());
}

const CLASSIC: &str = "policy classic
queue cohort {
  guarantee 6 gpu
  queue a {
    guarantee 4 gpu
    borrow_limit 2 gpu
  }
  queue b {
    guarantee 2 gpu
    lend_limit 1 gpu
  }
}
priority_class low = 10
priority_class high = 1000
const threshold = 100
preempt lower { when victim.priority < claimant.priority }
reclaim lower_reclaim { when claimant.priority > victim.priority }
borrow below { when victim.priority < claimant.priority and victim.priority <= threshold }
";

#[test]
fn a_cohort_of_two_queues_with_classic_preemption() {
    let t = kueue::translate(
        &policy_text(CLASSIC),
        &Options { namespaces: vec!["research".into()], capacity: None, minute: None, windows_followed: false },
    );
    let docs = documents(&t);
    let kinds: Vec<(&str, &str)> =
        docs.iter().map(|d| (d["kind"].as_str().unwrap_or(""), d["metadata"]["name"].as_str().unwrap_or(""))).collect();
    assert_eq!(
        kinds,
        [
            ("ResourceFlavor", "any-gpu"),
            ("Cohort", "cohort"),
            ("ClusterQueue", "a"),
            ("ClusterQueue", "b"),
            ("LocalQueue", "a"),
            ("LocalQueue", "b"),
            ("WorkloadPriorityClass", "low"),
            ("WorkloadPriorityClass", "high"),
        ]
    );
    let a = find(&docs, "ClusterQueue", "a");
    assert_eq!(a["spec"]["cohortName"], "cohort");
    assert_eq!(quota(a, "any-gpu", "nvidia.com/gpu")["nominalQuota"], "4");
    assert_eq!(quota(a, "any-gpu", "nvidia.com/gpu")["borrowingLimit"], "2");
    let b = find(&docs, "ClusterQueue", "b");
    assert_eq!(quota(b, "any-gpu", "nvidia.com/gpu")["lendingLimit"], "1");
    assert_eq!(
        a["spec"]["preemption"],
        serde_json::json!({
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}
        })
    );
    let cohort = find(&docs, "Cohort", "cohort");
    assert!(cohort["spec"].get("resourceGroups").is_none(), "the cohort holds nothing of its own: {cohort}");
    assert_eq!(find(&docs, "WorkloadPriorityClass", "high")["value"], 1000);
    let lq = docs.iter().find(|d| d["kind"] == "LocalQueue" && d["metadata"]["name"] == "a").expect("a LocalQueue");
    assert_eq!((&lq["metadata"]["namespace"], &lq["spec"]["clusterQueue"]), (&"research".into(), &"a".into()));
    assert!(t.findings.is_empty(), "Kueue states all of it: {:?}", t.findings);
    assert_eq!(t.configuration.iter().filter(|l| l.contains("IgnoreUndeclared")).count(), 1, "CPU and memory unquoted");
}

#[test]
fn a_hierarchy_with_models_host_resources_and_a_known_capacity() {
    let text = "policy tree
queue org {
  guarantee 16 gpu(h100)
  queue research {
    guarantee 4 gpu(h100), 2 gpu(a100), 64 cpu, 256GiB
    limit 8 gpu(h100)
    queue team_a {
      guarantee 2 gpu(h100), 1 gpu(a100), 32 cpu, 128GiB
      weight 2
    }
    queue team_b { guarantee 1 gpu(h100), 16 cpu, 64GiB }
  }
  queue serving {
    guarantee 6 gpu(h100)
    lend_limit 2 gpu(h100)
    weight 0.5
  }
}
";
    let nodes: Vec<gpol_compiler::spec::NodeSpec> = (0..4)
        .map(|i| gpol_compiler::spec::NodeSpec {
            name: format!("n{i}"),
            model: if i < 3 { "h100".into() } else { "a100".into() },
            cards: 8,
            // As GPU feature discovery labels them: two kinds of H100.
            labels: vec![(
                "nvidia.com/gpu.product".into(),
                ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-NVL", "NVIDIA-A100-SXM4-80GB"][i]
                    .into(),
            )],
            ..Default::default()
        })
        .collect();
    let t = kueue::translate(
        &policy_text(text),
        &Options { namespaces: vec![], capacity: Some(Capacity::of(&nodes)), minute: None, windows_followed: false },
    );
    let docs = documents(&t);
    let schemas = Schemas::load();
    for d in &docs {
        assert!(schemas.problems(d).is_empty(), "{d:#}: {:?}", schemas.problems(d));
    }
    let h100 = find(&docs, "ResourceFlavor", "gpu-h100");
    // Flavors select the products the nodes carry: for two, the one with more cards, and
    // the other is named.
    assert_eq!(h100["spec"]["nodeLabels"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
    let a100 = find(&docs, "ResourceFlavor", "gpu-a100");
    assert_eq!(a100["spec"]["nodeLabels"]["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB");
    let flavor: Vec<&Finding> = t.findings.iter().filter(|f| f.construct.starts_with("ResourceFlavor")).collect();
    assert_eq!(flavor.len(), 1, "{flavor:?}");
    assert_eq!(flavor[0].construct, "ResourceFlavor `gpu-h100`");
    assert!(flavor[0].message.contains("the GPUs of `NVIDIA-H100-NVL` (8 cards) are outside"), "{flavor:?}");
    // And they are no capacity of the model's flavor: an unset root guarantee is 16, not 24.
    let h100_cards = Capacity::of(&nodes).amounts.get(&gpol_compiler::hir::Resource::Gpu(Some("h100".into()))).copied();
    assert_eq!(h100_cards, Some(16.0));
    // org: 16 written, children 4 + 6 promised: 6 of its own.
    let org = find(&docs, "Cohort", "org");
    assert_eq!(quota(org, "gpu-h100", "nvidia.com/gpu")["nominalQuota"], "6");
    assert!(org["spec"].get("parentName").is_none());
    // research: 4 written, children 2 + 1: 1 of its own; its limit 8 is 4 above.
    let research = find(&docs, "Cohort", "research");
    assert_eq!(research["spec"]["parentName"], "org");
    assert_eq!(quota(research, "gpu-h100", "nvidia.com/gpu")["nominalQuota"], "1");
    assert_eq!(quota(research, "gpu-h100", "nvidia.com/gpu")["borrowingLimit"], "4");
    assert_eq!(quota(research, "default-flavor", "memory")["nominalQuota"], "64Gi");
    // org's a100 guarantee is unset: the cluster's 8 cards, research promised 2.
    assert_eq!(quota(org, "gpu-a100", "nvidia.com/gpu")["nominalQuota"], "6");
    let team_a = find(&docs, "ClusterQueue", "team-a");
    assert_eq!(team_a["spec"]["cohortName"], "research");
    assert_eq!(quota(team_a, "default-flavor", "cpu")["nominalQuota"], "32");
    assert_eq!(quota(team_a, "gpu-a100", "nvidia.com/gpu")["nominalQuota"], "1");
    assert_eq!(team_a["spec"]["fairSharing"]["weight"], "2");
    let serving = find(&docs, "ClusterQueue", "serving");
    assert_eq!(quota(serving, "gpu-h100", "nvidia.com/gpu")["lendingLimit"], "2");
    assert_eq!(serving["spec"]["fairSharing"]["weight"], "500m");
    assert!(t.configuration.is_empty(), "every resource is quoted: {:?}", t.configuration);
}

#[test]
fn quota_windows_are_named_and_the_amounts_without_one_written() {
    let text = "policy p\nqueue root {\n  guarantee 8 gpu\n  queue a { guarantee 4 gpu; lend_limit 1 gpu; lend_limit 4 gpu from 22:00 to 07:00 }\n  queue b { guarantee 4 gpu }\n}\n";
    let t = kueue::translate(&policy_text(text), &Options::default());
    assert_eq!(constructs(&t), ["queue `a`: its lend_limit from 22:00 to 07:00"]);
    let docs = documents(&t);
    assert_eq!(quota(find(&docs, "ClusterQueue", "a"), "any-gpu", "nvidia.com/gpu")["lendingLimit"], "1");
    // The objects of a phase: at 23:00 the night's lend limit (all 4 of its guarantee: no
    // lending limit), at noon the day's.
    let lending = |minute: u16| {
        let docs =
            documents(&kueue::translate(&policy_text(text), &Options { minute: Some(minute), ..Options::default() }));
        quota(find(&docs, "ClusterQueue", "a"), "any-gpu", "nvidia.com/gpu")["lendingLimit"].clone()
    };
    assert_eq!((lending(23 * 60), lending(12 * 60)), (Value::Null, "1".into()));
}

#[test]
fn an_unset_root_guarantee_without_the_cluster_is_named() {
    let text = "policy p\nqueue root {\n  queue a { guarantee 2 gpu }\n  queue b { guarantee 2 gpu }\n}\n";
    let t = kueue::translate(&policy_text(text), &Options::default());
    assert_eq!(constructs(&t), ["queue `root`: its unset gpu guarantee"]);
    let with_cluster = Options {
        capacity: Some(Capacity::of(&[gpol_compiler::spec::NodeSpec { cards: 10, ..Default::default() }])),
        ..Options::default()
    };
    let docs = documents(&kueue::translate(&policy_text(text), &with_cluster));
    assert_eq!(quota(find(&docs, "Cohort", "root"), "any-gpu", "nvidia.com/gpu")["nominalQuota"], "6");
}

#[test]
fn rules_kueue_cannot_state_are_named_and_never_widened() {
    let text = "policy p
queue c {
  guarantee 4 gpu
  queue a {
    guarantee 2 gpu
    user_limit 1 gpu
  }
  queue b { guarantee 2 gpu }
}
filter fits { node.free_cards >= job.whole_cards }
preempt gap { when claimant.priority - victim.priority >= 10 }
reclaim newer { when victim.priority < claimant.priority or (victim.priority == claimant.priority and victim.submitted > claimant.submitted) }
borrow any { when true }
";
    let t = kueue::translate(&policy_text(text), &Options::default());
    let docs = documents(&t);
    let p = &find(&docs, "ClusterQueue", "a")["spec"]["preemption"];
    // `gap` cannot be stated: Never; `newer` reclaims only lower priorities in Kueue; `any`
    // borrows only from lower priorities.
    assert_eq!(
        *p,
        serde_json::json!({
            "withinClusterQueue": "Never",
            "reclaimWithinCohort": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority"}
        })
    );
    let mut named = constructs(&t);
    named.sort();
    assert_eq!(
        named,
        ["borrow `any`", "filter `fits`", "preempt `gap`", "queue `a`: its user_limit", "reclaim `newer`"]
    );
    assert!(t.findings.iter().all(|f| f.span.is_some()), "each points at the policy");
}

#[test]
fn a_protect_rule_turns_preemption_off_and_equal_priority_newer_is_stated() {
    let text = "policy p
queue c {
  guarantee 4 gpu
  queue a { guarantee 2 gpu }
  queue b { guarantee 2 gpu }
}
preempt newer { when victim.priority < claimant.priority or (victim.submitted > claimant.submitted and claimant.priority == victim.priority) }
reclaim all { when true }
";
    let t = kueue::translate(&policy_text(text), &Options::default());
    let p = find(&documents(&t), "ClusterQueue", "a")["spec"]["preemption"].clone();
    assert_eq!(p["withinClusterQueue"], "LowerOrNewerEqualPriority");
    assert_eq!(p["reclaimWithinCohort"], "Any");
    assert!(t.findings.is_empty(), "{:?}", t.findings);
    let protected = format!("{text}protect serving {{ when victim.latency_critical }}\n");
    let t = kueue::translate(&policy_text(&protected), &Options::default());
    let p = find(&documents(&t), "ClusterQueue", "a")["spec"]["preemption"].clone();
    assert_eq!(p["withinClusterQueue"], "Never");
    assert_eq!(p["reclaimWithinCohort"], "Never");
    assert_eq!(constructs(&t), ["protect `serving`"]);
}

#[test]
fn fair_sharing_rules_become_kueues_configuration() {
    let path = root().join("runtime/tests/scenarios/kueue_fair_sharing.gpol");
    let t = kueue::translate(&policy_file(&path), &Options::default());
    let config = t.configuration.join("\n");
    assert!(
        config.contains("preemptionStrategies:\n  - LessThanOrEqualToFinalShare\n  - LessThanInitialShare"),
        "{config}"
    );
    let p = find(&documents(&t), "ClusterQueue", "a")["spec"]["preemption"].clone();
    assert_eq!((&p["reclaimWithinCohort"], &p["borrowWithinCohort"]["policy"]), (&"Any".into(), &"Never".into()));
}

#[test]
fn names_kubernetes_cannot_hold_are_errors() {
    let text = "policy p\nqueue Team_A { guarantee 1 gpu }\npriority_class half = 1.5\n";
    let t = kueue::translate(&policy_text(text), &Options::default());
    let errors: Vec<&str> = t.findings.iter().filter(|f| f.is_error()).map(|f| f.construct.as_str()).collect();
    assert_eq!(errors, ["queue `Team_A`", "priority class `half`"]);
}

/// The errors of a translation: construct and message.
fn errors(t: &Translation) -> Vec<(String, String)> {
    t.findings.iter().filter(|f| f.is_error()).map(|f| (f.construct.clone(), f.message.clone())).collect()
}

#[test]
fn quantities_kueue_cannot_hold_are_errors_never_clamped() {
    let one = |amounts: &str| {
        let text = format!("policy p\nqueue r {{\n  queue a {{\n    {amounts}\n  }}\n}}\n");
        kueue::translate(&policy_text(&text), &Options::default())
    };
    // 10^15 GPUs fit Kueue's 64-bit count: written exactly (it once became
    // `9000000000000000000n`, clamped and in billionths).
    let t = one("guarantee 1e15 gpu, 9e15 cpu, 4194304TiB");
    assert!(errors(&t).is_empty(), "{:?}", errors(&t));
    let a = find(&documents(&t), "ClusterQueue", "a").clone();
    assert_eq!(quota(&a, "any-gpu", "nvidia.com/gpu")["nominalQuota"], "1000000000000000");
    assert_eq!(quota(&a, "default-flavor", "cpu")["nominalQuota"], "9000000000000000");
    assert_eq!(quota(&a, "default-flavor", "memory")["nominalQuota"], "4Ei");
    let problems = Schemas::load().problems(&a);
    assert!(problems.is_empty(), "{problems:?}");
    // Past 2^63-1 of Kueue's unit: GPUs in units, CPU in milli-cores (10^16 cores are
    // 10^19 milli-cores), and the limits as well as the quota. No objects are written.
    let cases: [(&str, &str, &str); 6] = [
        (
            "guarantee 1e19 gpu",
            "queue `a`: its gpu nominal quota",
            "10000000000000000000 GPUs is more than Kueue can hold: it reads `nvidia.com/gpu` in whole GPUs, at most 9223372036854775807",
        ),
        (
            "guarantee 1e16 cpu",
            "queue `a`: its cpu nominal quota",
            "10000000000000000000 milli-cores is more than Kueue can hold: it reads `cpu` in whole milli-cores, at most 9223372036854775807",
        ),
        (
            "guarantee 8388608TiB",
            "queue `a`: its memory nominal quota",
            "9223372036854775808 bytes is more than Kueue can hold: it reads `memory` in whole bytes, at most 9223372036854775807",
        ),
        (
            "guarantee 1 gpu; limit 1e19 gpu",
            "queue `a`: its gpu borrowing limit",
            "10000000000000000000 GPUs is more than Kueue can hold: it reads `nvidia.com/gpu` in whole GPUs, at most 9223372036854775807",
        ),
        // Finer than Kueue's unit: it would round up.
        (
            "guarantee 0.5 gpu",
            "queue `a`: its gpu nominal quota",
            "0.5 GPUs is no whole number: it reads `nvidia.com/gpu` in whole GPUs, and would read it as 1",
        ),
        (
            "guarantee 0.0005 cpu",
            "queue `a`: its cpu nominal quota",
            "0.5 milli-cores is no whole number: it reads `cpu` in whole milli-cores, and would read it as 1",
        ),
    ];
    for (amounts, construct, message) in cases {
        let t = one(amounts);
        assert_eq!(errors(&t), [(construct.to_string(), message.to_string())], "{amounts}");
        assert!(t.objects.is_empty(), "{amounts}: no half translation");
        let f = t.findings.iter().find(|f| f.is_error()).expect("the error");
        assert!(f.span.is_some(), "{amounts}: E0044 points at the queue");
    }
    // Thousandths of a core are Kueue's unit: exact.
    let t = one("guarantee 1.5 gpu(h100), 0.25 cpu");
    assert_eq!(errors(&t).len(), 1, "{:?}", errors(&t));
    let t = one("guarantee 2 gpu, 0.25 cpu");
    assert!(errors(&t).is_empty(), "{:?}", errors(&t));
    assert_eq!(quota(find(&documents(&t), "ClusterQueue", "a"), "default-flavor", "cpu")["nominalQuota"], "250m");
    // A weight finer than a billionth would be rounded up by Kubernetes.
    let t = one("guarantee 1 gpu\n    weight 0.0000000001");
    assert_eq!(
        errors(&t),
        [(
            "queue `a`: its weight".to_string(),
            "0.0000000001 is finer than a billionth, Kubernetes' finest unit: it would round it up".to_string()
        )]
    );
}

#[test]
fn flavors_select_only_valid_label_values() {
    let text = "policy p\nqueue r {\n  queue a { guarantee 4 gpu(h100) }\n}\n";
    let capacity = |product: &str| {
        let node = gpol_compiler::spec::NodeSpec {
            name: "n0".into(),
            model: "h100".into(),
            cards: 8,
            labels: vec![("nvidia.com/gpu.product".into(), product.into())],
            ..Default::default()
        };
        let options = Options { capacity: Some(Capacity::of(&[node])), ..Options::default() };
        kueue::translate(&policy_text(text), &options)
    };
    let t = capacity("NVIDIA-H100-80GB-HBM3");
    assert!(errors(&t).is_empty(), "{:?}", errors(&t));
    let long = format!("NVIDIA-H100-{}", "X".repeat(52));
    for product in ["NVIDIA H100 80GB HBM3", "-NVIDIA-H100", long.as_str()] {
        let t = capacity(product);
        let want = format!(
            "it selects `nvidia.com/gpu.product: {product}`, which is not a valid Kubernetes label value (at most 63 characters of letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)"
        );
        assert_eq!(errors(&t), [("ResourceFlavor `gpu-h100`".to_string(), want)], "{product}");
        assert!(t.objects.is_empty());
    }
}

#[test]
fn placement_policies_have_no_queues_for_kueue() {
    let t = kueue::translate(&policy_file(&root().join("policies/fgd.gpol")), &Options::default());
    assert!(t.objects.is_empty());
    assert!(constructs(&t).iter().any(|c| c == "policy `fgd`"), "{:?}", constructs(&t));
}

#[test]
fn more_models_than_a_resource_group_holds_is_an_error() {
    let amounts: Vec<String> = (0..65).map(|i| format!("1 gpu(m{i})")).collect();
    let text = format!("policy p\nqueue r {{\n  queue a {{\n    guarantee {}\n  }}\n}}\n", amounts.join(", "));
    let t = kueue::translate(&policy_text(&text), &Options::default());
    let errors: Vec<&str> = t.findings.iter().filter(|f| f.is_error()).map(|f| f.message.as_str()).collect();
    assert_eq!(errors, ["65 GPU models have quotas; a Kueue resource group holds at most 64"]);
}

#[test]
fn share_rules_are_kueues_only_in_a_flat_tree_and_only_for_borrowing() {
    let flat = "policy p
use std.fair
queue c {
  guarantee 4 gpu
  queue a { guarantee 2 gpu }
  queue b { guarantee 2 gpu }
}
reclaim any { when true }
borrow fair { when std.fair.kueue_share_after(claimant.queue) <= std.fair.kueue_share_after(victim.queue) }
";
    let t = kueue::translate(&policy_text(flat), &Options::default());
    assert!(t.findings.is_empty(), "{:?}", t.findings);
    assert!(t.configuration.join("\n").contains("  - LessThanOrEqualToFinalShare"), "{:?}", t.configuration);
    // The same rule by share on the reclaim side: Kueue reclaims within nominal whatever
    // the shares.
    let reclaim_by_share = flat.replace(
        "reclaim any { when true }",
        "reclaim fair_back { when std.fair.kueue_share_after(claimant.queue) <= std.fair.kueue_share_after(victim.queue) }",
    );
    let t = kueue::translate(&policy_text(&reclaim_by_share), &Options::default());
    let p = find(&documents(&t), "ClusterQueue", "a")["spec"]["preemption"].clone();
    assert_eq!(p["reclaimWithinCohort"], "Never");
    assert!(t.configuration.iter().all(|l| !l.contains("fairSharing")), "{:?}", t.configuration);
    let mut named = constructs(&t);
    named.sort();
    assert_eq!(named, ["borrow `fair`", "reclaim `fair_back`"]);
    // Nested: Kueue compares subtrees' shares, and reclaims for borrowing sub-cohorts.
    let nested = "policy p
use std.fair
queue c {
  guarantee 4 gpu
  queue x {
    queue a { guarantee 1 gpu }
    queue a2 { guarantee 1 gpu }
  }
  queue b { guarantee 2 gpu }
}
reclaim any { when true }
borrow fair { when std.fair.kueue_share_after(claimant.queue) <= std.fair.kueue_share_after(victim.queue) }
";
    let t = kueue::translate(&policy_text(nested), &Options::default());
    let p = find(&documents(&t), "ClusterQueue", "a")["spec"]["preemption"].clone();
    assert_eq!((&p["reclaimWithinCohort"], &p["borrowWithinCohort"]["policy"]), (&"Never".into(), &"Never".into()));
    assert!(t.configuration.iter().all(|l| !l.contains("fairSharing")), "{:?}", t.configuration);
    let mut named = constructs(&t);
    named.sort();
    assert_eq!(named, ["borrow `fair`", "reclaim `any`"]);
}

#[test]
fn queueing_is_inherited_and_weights_keep_their_value() {
    let text = "policy p
queue c {
  guarantee 2 gpu
  queueing strict
  queue a {
    guarantee 1 gpu
    weight 0.0001
  }
  queue b {
    guarantee 1 gpu
    queueing best_effort
    weight 1.5
  }
}
";
    let t = kueue::translate(&policy_text(text), &Options::default());
    let docs = documents(&t);
    let schemas = Schemas::load();
    let a = find(&docs, "ClusterQueue", "a");
    assert_eq!(a["spec"]["queueingStrategy"], "StrictFIFO", "from its parent");
    assert_eq!(a["spec"]["fairSharing"]["weight"], "100000n");
    let b = find(&docs, "ClusterQueue", "b");
    assert_eq!(b["spec"]["queueingStrategy"], "BestEffortFIFO");
    assert_eq!(b["spec"]["fairSharing"]["weight"], "1500m");
    assert!(schemas.problems(a).is_empty() && schemas.problems(b).is_empty());
}

#[test]
fn gpus_of_any_model_and_of_unquoted_models() {
    // Models and any-model amounts: `any-gpu` comes last, and the sum is named.
    let mixed = "policy p
queue c {
  guarantee 8 gpu, 4 gpu(h100)
  queue a { guarantee 6 gpu, 4 gpu(h100) }
  queue b { guarantee 2 gpu }
}
";
    let t = kueue::translate(&policy_text(mixed), &Options::default());
    let docs = documents(&t);
    let a = find(&docs, "ClusterQueue", "a");
    let flavors: Vec<&str> = a["spec"]["resourceGroups"][0]["flavors"]
        .as_array()
        .expect("flavors")
        .iter()
        .map(|f| f["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(flavors, ["gpu-h100", "any-gpu"]);
    assert_eq!(quota(a, "any-gpu", "nvidia.com/gpu")["nominalQuota"], "6");
    let mut named = constructs(&t);
    named.sort();
    assert_eq!(
        named,
        [
            "ResourceFlavor `gpu-h100`",
            "queue `a`: its GPU amounts of any model beside model quotas",
            "queue `b`: its GPU amounts of any model beside model quotas",
            "queue `c`: its GPU amounts of any model beside model quotas",
        ]
    );
    // Models alone: the other models' GPUs are out of Kueue's reach, and it says so.
    let models_only = "policy p\nqueue c {\n  guarantee 4 gpu(h100)\n  queue a { guarantee 4 gpu(h100) }\n}\n";
    let t = kueue::translate(&policy_text(models_only), &Options::default());
    assert_eq!(constructs(&t), ["GPUs of models without a quota", "ResourceFlavor `gpu-h100`"]);
    // Without the cluster, the flavor selects the model's name, which no node carries.
    assert!(t.findings[1].message.contains("give `--cluster`"), "{:?}", t.findings);
    // Two models, one flavor name: an error, and no objects.
    let clash = "policy p\nqueue c {\n  guarantee 2 gpu(H100), 2 gpu(h100)\n  queue a { guarantee 2 gpu(H100), 2 gpu(h100) }\n}\n";
    let t = kueue::translate(&policy_text(clash), &Options::default());
    assert!(
        t.findings.iter().any(|f| f.is_error() && f.message == "two GPU models give flavor `gpu-h100`"),
        "{:?}",
        t.findings
    );
    assert!(t.objects.is_empty(), "no half translation");
}

#[test]
fn an_unset_root_guarantee_is_named_even_when_no_child_is_promised_any() {
    let text = "policy p\nqueue r {\n  queue a { limit 8 gpu }\n  queue b { limit 4 gpu }\n}\n";
    let t = kueue::translate(&policy_text(text), &Options::default());
    let f = t.findings.iter().find(|f| f.construct == "queue `r`: its unset gpu guarantee").expect("named");
    assert_eq!(f.enforcer, Some(kueue::Enforcer::Stricter), "Kueue is stricter there");
}

#[test]
fn quota_windows_are_followed_by_a_cronjob_per_edge() {
    let text = "policy p\nsettings { timezone \"Europe/Berlin\" }\nqueue root {\n  guarantee 8 gpu\n  queue a { guarantee 6 gpu; lend_limit 1 gpu; lend_limit 5 gpu from 22:00 to 07:00 on weekdays }\n  queue b { guarantee 2 gpu }\n}\n";
    let policy = policy_text(text);
    let options = Options { windows_followed: true, ..Options::default() };
    let schedule = kueue::windows::Schedule { namespace: "kueue-system".into(), image: "kubectl:test".into() };
    let mut t = kueue::translate(&policy, &options);
    assert!(constructs(&t).is_empty(), "followed windows are no findings: {:?}", t.findings);
    let (objects, found) = kueue::windows::objects(&policy, &options, &schedule, &t.findings).expect("objects");
    assert!(found.is_empty(), "{found:?}");
    t.objects.extend(objects);
    let docs = documents(&t);
    let crons: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "CronJob").collect();
    let schedules: Vec<&str> = crons.iter().filter_map(|c| c["spec"]["schedule"].as_str()).collect();
    // The night opens at 22:00 Monday to Friday and closes at 07:00 Tuesday to Saturday.
    assert_eq!(schedules, ["0 7 * * 2,3,4,5,6", "0 22 * * 1,2,3,4,5"]);
    assert!(crons.iter().all(|c| c["spec"]["timeZone"] == "Europe/Berlin"));
    // Each applies its phase's ClusterQueues from its ConfigMap: lending 5 at night, 1 by day.
    for (name, lending) in [("gpol-quotas-2200-12345", "5"), ("gpol-quotas-0700-23456", "1")] {
        let cron = find(&docs, "CronJob", name);
        let pod = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
        assert_eq!(
            (pod["serviceAccountName"].as_str(), pod["volumes"][0]["configMap"]["name"].as_str()),
            (Some("gpol-quota-windows"), Some(name))
        );
        let phase = find(&docs, "ConfigMap", name)["data"]["objects.yaml"].as_str().expect("objects");
        let objects: Vec<Value> = phase
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_saphyr::from_str(d).unwrap_or_else(|e| panic!("{e}\n{d}")))
            .collect();
        let schemas = Schemas::load();
        assert!(objects.iter().all(|o| schemas.problems(o).is_empty()), "{phase}");
        assert_eq!(quota(find(&objects, "ClusterQueue", "a"), "any-gpu", "nvidia.com/gpu")["lendingLimit"], lending);
    }
    // The rights: patch ClusterQueues and Cohorts, no more.
    let role = find(&docs, "ClusterRole", "gpol-quota-windows");
    assert_eq!(role["rules"][0]["resources"], serde_json::json!(["clusterqueues", "cohorts"]));
    #[cfg(feature = "serve")]
    for c in crons {
        let typed: k8s_openapi::api::batch::v1::CronJob = serde_json::from_value(c.clone()).expect("a CronJob");
        assert!(typed.spec.is_some_and(|s| s.job_template.spec.is_some()));
    }
    // No windows: nothing to follow.
    let plain = policy_text("policy p\nqueue root {\n  queue a { guarantee 1 gpu }\n}\n");
    assert!(kueue::windows::objects(&plain, &options, &schedule, &[]).expect("none").0.is_empty());
    // What the phases cannot hold stays a finding: a window on a model no queue quotes at
    // all times, and an edge in the hour Berlin skips in March.
    let odd = policy_text(
        "policy p\nsettings { timezone \"Europe/Berlin\" }\nqueue root {\n  guarantee 8 gpu\n  queue a { guarantee 8 gpu; guarantee 2 gpu(a100) from 02:30 to 04:00 on sun }\n}\n",
    );
    let t = kueue::translate(&odd, &options);
    assert!(constructs(&t).iter().any(|c| c.starts_with("queue `a`: its guarantee from 02:30")), "{:?}", t.findings);
    let (_, found) = kueue::windows::objects(&odd, &options, &schedule, &t.findings).expect("objects");
    assert!(found.iter().any(|f| f.construct == "the quota window edge Sunday 02:30"), "{found:?}");
}
