//! kube-scheduler's own compatibility fixtures for the extender protocol
//! (kubernetes/kube-scheduler `extender/v1/types_test.go`, `TestCompatibility`, at
//! fe5b8efed2833d34919413e825daf2017f37c934; Apache-2.0): each message read and written
//! back is the same JSON, and read with every key in lower case (as upstream checks: Go
//! reads keys whatever their case) it is the same message.

use gpol_kubernetes::extender::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const PREEMPTION_RESULT: &str = r#"{"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}}"#;
const PREEMPTION_ARGS: &str = r#"{"Pod":{"metadata":{"name":"podname"},"spec":{"containers":null},"status":{}},"NodeNameToVictims":{"foo":{"Pods":[{"metadata":{"name":"podname"},"spec":{"containers":null},"status":{}}],"NumPDBViolations":1}},"NodeNameToMetaVictims":{"foo":{"Pods":[{"UID":"myuid"}],"NumPDBViolations":1}}}"#;
const ARGS: &str = r#"{"Pod":{"metadata":{"name":"podname"},"spec":{"containers":null},"status":{}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"nodename"},"spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"","architecture":""}}}]},"NodeNames":["node1"]}"#;
const FILTER_RESULT: &str = r#"{"Nodes":{"metadata":{},"items":[{"metadata":{"name":"nodename"},"spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"","osImage":"","containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"","operatingSystem":"","architecture":""}}}]},"NodeNames":["node1"],"FailedNodes":{"foo":"bar"},"FailedAndUnresolvableNodes":{"baz":"qux"},"Error":"myerror"}"#;
const BINDING_ARGS: &str =
    r#"{"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid","Node":"mynode"}"#;
const BINDING_RESULT: &str = r#"{"Error":"myerror"}"#;
const HOST_PRIORITY: &str = r#"{"Host":"myhost","Score":1}"#;

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON")
}

/// Every key of a JSON value in lower case.
fn lower(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.to_lowercase(), lower(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(lower).collect()),
        other => other.clone(),
    }
}

/// Read and written back, the fixture is the same JSON; read lower-cased, the same
/// message up to the case of the Kubernetes objects' keys, which stay as sent. Returns
/// the message read from each.
fn round_trip<T: DeserializeOwned + Serialize + std::fmt::Debug>(fixture: &str) -> (T, T) {
    let message: T = decode(fixture.as_bytes()).unwrap_or_else(|e| panic!("{fixture}: {e}"));
    assert_eq!(json(&String::from_utf8_lossy(&encode(&message))), json(fixture), "{message:?}");
    let lowered = fixture.to_lowercase();
    let again: T = decode(lowered.as_bytes()).unwrap_or_else(|e| panic!("{lowered}: {e}"));
    let written = json(&String::from_utf8_lossy(&encode(&again)));
    assert_eq!(lower(&written), lower(&json(fixture)), "{again:?}");
    (message, again)
}

#[test]
fn messages_without_kubernetes_objects_read_the_same_in_any_case() {
    let (a, b) = round_trip::<ExtenderPreemptionResult>(PREEMPTION_RESULT);
    assert_eq!(a, b);
    let victims = &a.node_name_to_meta_victims.as_ref().expect("victims")["foo"];
    assert_eq!((victims.pods.as_ref().expect("pods")[0].uid.as_str(), victims.num_pdb_violations), ("myuid", 1));
    let (a, b) = round_trip::<ExtenderBindingArgs>(BINDING_ARGS);
    assert_eq!(a, b);
    assert_eq!((a.pod_name.as_str(), a.pod_uid.as_str(), a.node.as_str()), ("mypodname", "mypoduid", "mynode"));
    let (a, b) = round_trip::<ExtenderBindingResult>(BINDING_RESULT);
    assert_eq!(a.error, "myerror");
    assert_eq!(a, b);
    let (a, b) = round_trip::<HostPriority>(HOST_PRIORITY);
    assert_eq!((a.host.as_str(), a.score), ("myhost", 1));
    assert_eq!(a, b);
}

#[test]
fn messages_with_kubernetes_objects_keep_them_and_fold_only_the_protocols_keys() {
    let (a, b) = round_trip::<ExtenderArgs>(ARGS);
    assert_eq!(
        (a.node_names.as_deref(), b.node_names.as_deref()),
        (Some(&["node1".to_string()][..]), Some(&["node1".to_string()][..]))
    );
    assert_eq!(a.nodes.as_ref().and_then(|n| n["items"][0]["metadata"]["name"].as_str()), Some("nodename"));
    let (a, b) = round_trip::<ExtenderFilterResult>(FILTER_RESULT);
    for r in [&a, &b] {
        assert_eq!(r.failed_nodes.as_ref().map(|f| &*f["foo"]), Some("bar"));
        assert_eq!(r.failed_and_unresolvable_nodes.as_ref().map(|f| &*f["baz"]), Some("qux"));
        assert_eq!(r.error, "myerror");
    }
    let (a, b) = round_trip::<ExtenderPreemptionArgs>(PREEMPTION_ARGS);
    for r in [&a, &b] {
        let meta = &r.node_name_to_meta_victims.as_ref().expect("meta victims")["foo"];
        assert_eq!(meta.pods.as_ref().expect("pods")[0].uid, "myuid");
        let full = &r.node_name_to_victims.as_ref().expect("victims")["foo"];
        assert_eq!((full.pods.as_ref().map(Vec::len), full.num_pdb_violations), (Some(1), 1));
    }
}

#[test]
fn a_prioritize_answer_is_a_bare_list_and_nulls_read_as_absent() {
    let list: Vec<HostPriority> = decode(br#"[{"Host":"a","Score":10},{"host":"b","score":0}]"#).expect("a list");
    assert_eq!(list, [HostPriority { host: "a".into(), score: 10 }, HostPriority { host: "b".into(), score: 0 }]);
    assert_eq!(String::from_utf8_lossy(&encode(&list)), r#"[{"Host":"a","Score":10},{"Host":"b","Score":0}]"#);
    // Go writes nil pointers, maps and slices as null.
    let args: ExtenderArgs = decode(br#"{"Pod":null,"Nodes":null,"NodeNames":["n1","n2"]}"#).expect("args");
    assert_eq!((args.pod, args.nodes, args.node_names.map(|n| n.len())), (None, None, Some(2)));
    // Node names are data, not keys to fold.
    let r: ExtenderFilterResult = decode(br#"{"failednodes":{"POD":"x","Node-1":"y"}}"#).expect("result");
    assert_eq!(r.failed_nodes.expect("failed").keys().cloned().collect::<Vec<_>>(), ["Node-1", "POD"]);
}

#[test]
fn what_is_not_a_message_is_an_error_naming_why() {
    assert!(decode::<ExtenderArgs>(b"{").expect_err("truncated").to_string().starts_with("not JSON"));
    assert!(
        decode::<ExtenderArgs>(br#"{"NodeNames":"n1"}"#)
            .expect_err("a string")
            .to_string()
            .starts_with("not an extender message")
    );
    assert!(decode::<Vec<HostPriority>>(br#"{"Host":"a"}"#).is_err());
}
