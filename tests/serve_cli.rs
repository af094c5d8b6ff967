//! `gpolc serve` as a process: it answers on loopback, swaps in a changed policy and
//! refuses a broken one while the old keeps serving, counts both in its metrics, stops
//! cleanly on SIGTERM, and will not start on a policy that does not check.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
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
        // At `info` for every crate, as an operator turning logs up would: Cranelift's
        // listing of every function it compiles must stay out.
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpolc serve starts")
}

/// An HTTP exchange: the status and the body (None when nothing answers).
fn http(port: u16, path: &str, body: Option<&str>) -> Option<(u32, String)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
    runtime.block_on(async {
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.ok()?;
            tokio::spawn(conn);
            let request = hyper::Request::builder()
                .method(if body.is_some() { "POST" } else { "GET" })
                .uri(path)
                .header("host", "127.0.0.1")
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body.unwrap_or_default().to_string())))
                .ok()?;
            let response = sender.send_request(request).await.ok()?;
            let status = u32::from(response.status().as_u16());
            let bytes = response.into_body().collect().await.ok()?.to_bytes();
            Some((status, String::from_utf8_lossy(&bytes).into_owned()))
        };
        tokio::time::timeout(Duration::from_secs(5), exchange).await.ok().flatten()
    })
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
    // Not a terminal: no colour codes. No compiled code listed (Cranelift's IR).
    assert!(!log.contains('\u{1b}'), "ANSI codes in a log that is not a terminal:\n{log}");
    assert!(!log.contains("block0"), "Cranelift's IR in the log at RUST_LOG=info:\n{log}");
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

/// `--leader-elect` needs the API server, and its lease flags are checked before anything
/// is served: each mistake is a usage error (2) that says what is wrong.
#[test]
fn leader_election_flags_are_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("p.gpol");
    std::fs::write(&policy, SPREAD).expect("written");
    let policy = policy.display().to_string();
    for (flags, says) in [
        (&["--leader-elect", "--no-api"][..], "cannot be used with"),
        (&["--lease-name", "x"][..], "--leader-elect"),
        (&["--leader-elect", "--lease-duration", "5", "--lease-grace", "5"][..], "shorter than the lease duration"),
        (&["--leader-elect", "--lease-identity", ""][..], "--lease-identity"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gpolc"))
            .args(["serve", &policy, "--listen", "127.0.0.1:0"])
            .args(flags)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
}

fn gpolc(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpolc")).args(args).output().expect("gpolc runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// `--decision-log`: each decision a JSON line, read back by `gpolc explain --log` as
/// explain renders a decision; a log it cannot use is refused before serving.
#[test]
fn decisions_are_logged_and_explained_from_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.gpol");
    std::fs::write(&policy, SPREAD).expect("written");
    let log = dir.path().join("decisions.jsonl");
    let (policy_arg, log_arg) = (policy.display().to_string(), log.display().to_string());
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpolc"))
        .args(["serve", &policy_arg, "--no-api", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--decision-log", &log_arg])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpolc serve starts");
    until("it answers /healthz", || http(port, "/healthz", None).is_some_and(|(s, _)| s == 200));
    assert_eq!(best(port), "big");
    let filter = PRIORITIZE.replace(r#""nvidia.com/gpu": "1""#, r#""nvidia.com/gpu": "4""#);
    let (status, body) = http(port, "/gpol/filter", Some(&filter)).expect("an answer");
    assert_eq!(status, 200, "{body}");
    let _ = child.kill();
    let _ = child.wait();

    // The latest decision about the pod: the filter, four cards fitting on `big` only.
    let (code, out, err) = gpolc(&["explain", "default/p", "--log", &log_arg]);
    assert_eq!(code, Some(0), "{err}");
    // The policy as `sha256sum` names it.
    let sum = Command::new("sha256sum").arg(&policy).output().expect("sha256sum runs");
    let digest = String::from_utf8_lossy(&sum.stdout).split_whitespace().next().unwrap_or_default().to_string();
    assert_eq!(digest.len(), 64);
    let heading = out.lines().next().unwrap_or_default();
    assert!(heading.starts_with("== filter of default/p at "), "{out}");
    assert!(heading.contains(&format!("(policy sha256:{digest}, inputs sha256:")), "{out}");
    assert!(out.contains("node small: passes; score") && out.contains("does not fit"), "{out}");
    assert!(out.contains("→ would go to big"), "{out}");
    // Every decision, oldest first.
    let (code, all, _) = gpolc(&["explain", "default/p", "--log", &log_arg, "--all"]);
    assert_eq!(code, Some(0));
    let verbs: Vec<&str> =
        all.lines().filter(|l| l.starts_with("== ")).map(|l| &l[3..l.find(" of").unwrap_or(3)]).collect();
    assert_eq!(verbs, ["prioritize", "filter"]);

    // A name that would act on a terminal (set its title, ring its bell) is shown escaped.
    let first = std::fs::read_to_string(&log).expect("the log").lines().next().unwrap_or_default().to_string();
    let hostile = dir.path().join("hostile.jsonl");
    std::fs::write(&hostile, first.replace("default/p", "default/\\u001b]0;owned\\u0007p") + "\n").expect("written");
    let (code, out, err) = gpolc(&["explain", "default/\u{1b}]0;owned\u{7}p", "--log", &hostile.display().to_string()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.contains(['\u{1b}', '\u{7}']), "{out:?}");
    assert!(out.starts_with("== prioritize of default/\\u{1b}]0;owned\\u{7}p at "), "{out}");

    // A job it never decided about, a malformed line, a log that is the policy or a FIFO.
    let (code, _, err) = gpolc(&["explain", "default/q", "--log", &log_arg]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no decision about `default/q` among its 2 records"), "{err}");
    let mut text = std::fs::read(&log).expect("the log");
    text.extend_from_slice(b"{\"verb\": \"filter\"}\n");
    std::fs::write(&log, text).expect("written");
    let (code, _, err) = gpolc(&["explain", "default/p", "--log", &log_arg]);
    assert_eq!(code, Some(1));
    assert!(err.contains(&format!("{log_arg}:3: not a decision record: missing field")), "{err}");
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    for (bad, says) in [(&policy_arg, "is also an input"), (&fifo.display().to_string(), "is a FIFO")] {
        let (code, _, err) = gpolc(&["serve", &policy_arg, "--no-api", "--decision-log", bad]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("--decision-log") && err.contains(says), "{err}");
    }
    // Without --log, a test must be named.
    let (code, _, err) = gpolc(&["explain", &policy_arg]);
    assert_eq!(code, Some(2), "{err}");
}
