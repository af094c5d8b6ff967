//! Node and pod objects recorded from real clusters (tests/fixtures/recorded/SOURCES.md
//! says where each comes from) mapped to gpol's records: the one mapping `gpolc serve`
//! and `gpolc sim` share, on what GPU feature discovery and the device plugin really write.

use gpol_kubernetes::nodes;
use serde_json::Value;
use std::path::Path;

fn recorded(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recorded").join(file);
    let text = std::fs::read_to_string(&path).expect("the recorded fixtures are in the repository");
    if file.ends_with(".json") {
        serde_json::from_str(&text).expect("JSON")
    } else {
        serde_saphyr::from_str(&text).expect("YAML")
    }
}

fn mapped(v: &Value) -> gpol_compiler::spec::NodeSpec {
    nodes::node(v).unwrap_or_else(|e| panic!("a recorded node maps: {e}")).spec
}

#[test]
fn a_whole_gpu_node_recorded_on_gke() {
    let n = mapped(&recorded("runai-t4-whole-gpu.node.yaml"));
    assert_eq!((n.name.as_str(), n.model.as_str(), n.cards), ("qa-mig-worker-gpu-1", "t4", 2));
    // GPU feature discovery's `nvidia.com/gpu.memory` is MiB; allocatable, not capacity.
    assert_eq!(n.card_mem, 15360 << 20);
    assert_eq!((n.cpu_milli, n.mem), (32_000, 123_560_520 * 1024));
    assert_eq!(
        (n.sharing, n.max_clients),
        (gpol_compiler::spec::Sharing::Exclusive, 1),
        "gpu.replicas=1 is no sharing"
    );
}

#[test]
fn a_vgpu_node_from_kubectl_get_nodes() {
    let list = recorded("edgexr-nori-vgpu-a16.nodelist.json");
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    let n = mapped(&items[0]);
    assert_eq!((n.name.as_str(), n.model.as_str(), n.cards, n.card_mem), ("nori", "a16", 1, 4096 << 20));
    // `sharing-strategy: none` with one replica, and a `mig.strategy: single` label on a
    // card that is not MIG-capable: one exclusive card.
    assert_eq!((n.sharing, n.max_clients, n.mig.len()), (gpol_compiler::spec::Sharing::Exclusive, 1, 0));
    assert_eq!((n.cpu_milli, n.mem), (2_000, 16_367_668 * 1024));
}

#[test]
fn a_mig_node_recorded_three_times_keeps_its_host_facts() {
    let p = |name: &str| gpol_compiler::mig::profile(name).expect("a profile");
    let layouts = [
        ("runai-a100-mig-mixed-3-instances.node.yaml", vec![p("2g.10gb"), p("1g.5gb"), p("1g.5gb")]),
        ("runai-a100-mig-mixed-4-instances.node.yaml", vec![p("2g.10gb"), p("1g.5gb"), p("1g.5gb"), p("1g.5gb")]),
        ("runai-a100-mig-mixed-7g-40gb.node.yaml", vec![p("7g.40gb")]),
    ];
    for (file, layout) in layouts {
        let mapped = nodes::node(&recorded(file)).unwrap_or_else(|e| panic!("a recorded node maps: {e}"));
        let n = &mapped.spec;
        assert_eq!((n.name.as_str(), n.model.as_str()), ("qa-mig-worker-gpu-a100", "a100"), "{file}");
        assert_eq!((n.card_mem, n.cpu_milli, n.mem), (40960 << 20, 12_000, 87_425_380 * 1024), "{file}");
        // The A100 40 GB's own profiles, on its one card, as the device plugin advertises
        // them (zero counts are no instances), with nothing left out.
        assert_eq!((n.cards, n.sharing, &n.mig), (1, gpol_compiler::spec::Sharing::Mig, &vec![layout]), "{file}");
        assert!(mapped.warnings.is_empty(), "{file}: {:?}", mapped.warnings);
        assert_eq!(n.mig_gpu().map(|g| g.map(|g| g.memory_gb)), Ok(Some(40)), "{file}");
    }
}

#[test]
fn a_pod_whose_mig_slice_is_only_an_annotation_asks_for_no_gpu() {
    let pod = recorded("runai-mig-1g-5gb-annotated.pod.yaml");
    let m = gpol_kubernetes::pods::pod(&pod, &|_: &str| false).expect("a recorded pod maps");
    assert_eq!((m.namespace.as_str(), m.name.as_str()), ("runai-team-a", "job-2-0-0"));
    assert_eq!(m.node.as_deref(), Some("qa-mig-worker-gpu-a100"));
    assert_eq!(m.phase, gpol_kubernetes::pods::Phase::Bound);
    // Run:ai's scheduler hands out the slice by annotation; the pod's resources ask for
    // half a core and no `nvidia.com/*` resource, so kube-scheduler (and gpol) see no GPU.
    assert_eq!((m.job.request, m.job.cpu_milli, m.job.mem), (gpol_compiler::spec::Request::None, 500, 0));
    assert_eq!(m.job.user.as_deref(), Some("runai-team-a"), "the namespace is the user");
}
