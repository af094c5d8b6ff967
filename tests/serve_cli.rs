//! `gpolc serve` as a process: it answers on loopback, swaps in a changed policy and
//! refuses a broken one while the old keeps serving, counts both in its metrics, stops
//! cleanly on SIGTERM, and will not start on a policy that does not check.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SPREAD: &str = "policy served\n\nscore most_free { node.free_gpu / 8 gpu }\n";
const PACK: &str = "policy served\n\nscore least_free { 1 - node.free_gpu / 8 gpu }\n";

/// A request with two whole nodes of different sizes.
const PRIORITIZE: &str = r#"{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
  "Nodes": {"items": [
    {"metadata": {"name": "small", "resourceVersion": "1"}, "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "2"}}},
    {"metadata": {"name": "big", "resourceVersion": "1"}, "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}}}]}}"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn serve(policy: &Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_gpolc"))
        .args([
            "serve",
            &policy.display().to_string(),
            "--no-api",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--reload-every",
            "0.2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpolc serve starts")
}

/// An HTTP exchange: the status and the body (None when nothing answers).
fn http(port: u16, path: &str, body: Option<&str>) -> Option<(u32, String)> {
    let mut easy = curl::easy::Easy::new();
    easy.url(&format!("http://127.0.0.1:{port}{path}")).ok()?;
    easy.timeout(Duration::from_secs(5)).ok()?;
    if let Some(b) = body {
        easy.post(true).ok()?;
        easy.post_fields_copy(b.as_bytes()).ok()?;
    }
    let mut out = Vec::new();
    {
        let mut t = easy.transfer();
        t.write_function(|d| {
            out.extend_from_slice(d);
            Ok(d.len())
        })
        .ok()?;
        t.perform().ok()?;
    }
    Some((easy.response_code().ok()?, String::from_utf8_lossy(&out).into_owned()))
}

fn best(port: u16) -> String {
    let (status, body) = http(port, "/gpol/prioritize", Some(PRIORITIZE)).expect("an answer");
    assert_eq!(status, 200, "{body}");
    let v: Vec<serde_json::Value> = serde_json::from_str(&body).expect("JSON");
    v.iter().find(|h| h["Score"] == 10).and_then(|h| h["Host"].as_str()).expect("a best node").to_string()
}

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serves_reloads_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.gpol");
    std::fs::write(&policy, SPREAD).expect("written");
    let port = free_port();
    let mut child = serve(&policy, port);
    until("it answers /healthz", || http(port, "/healthz", None).is_some_and(|(s, _)| s == 200));
    assert_eq!(http(port, "/readyz", None).map(|(s, _)| s), Some(200));
    assert_eq!(best(port), "big");

    // A broken policy is refused; the spreading one keeps serving.
    std::fs::write(&policy, "policy served\n\nscore x { node.nope }\n").expect("written");
    let refused = r#"gpol_extender_policy_reloads_total{outcome="refused"} 1"#;
    until("the refusal is counted", || http(port, "/metrics", None).is_some_and(|(_, m)| m.contains(refused)));
    assert_eq!(best(port), "big");

    // A packing policy is swapped in.
    std::fs::write(&policy, PACK).expect("written");
    until("the packing policy serves", || best(port) == "small");

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill runs");
    assert!(status.success());
    let start = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            break exit;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "still running 10 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit status {exit}");
    let mut log = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut log).expect("the log");
    for line in ["serving", "policy refused", "policy reloaded", "shutting down"] {
        assert!(log.contains(line), "no `{line}` in the log:\n{log}");
    }
    assert!(log.contains("node.nope") || log.contains("nope"), "the refusal's diagnostics are logged:\n{log}");
}

#[test]
fn a_policy_that_does_not_check_is_not_served() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("broken.gpol");
    std::fs::write(&policy, "policy broken\n\nscore x { node.nope }\n").expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_gpolc"))
        .args(["serve", &policy.display().to_string(), "--no-api"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nope") && stderr.contains("cannot be served"), "{stderr}");
}
