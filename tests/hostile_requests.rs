//! The hostile requests (tests/hostile/requests.toml): each sent, byte for byte as
//! written, to a real `gpolc serve --no-api` process running under an address-space
//! limit. Every request must get the status given and a body saying why, the process must
//! never die, and it must still answer /healthz when the corpus is through.

use serde::Deserialize;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The body limit the server runs with (small, so generated bodies stay small too).
const MAX_BODY: usize = 1 << 20;
/// A safety net far above what the server needs, not a timing or memory target.
const MEMORY_BYTES: u64 = 4 << 30;

#[derive(Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    #[serde(default = "post")]
    method: String,
    path: String,
    #[serde(default)]
    headers: Vec<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    generate: Option<String>,
    status: u16,
    #[serde(default)]
    expect: Vec<String>,
}

fn post() -> String {
    "POST".into()
}

/// Bodies too large or too strange to write in TOML.
fn generate(kind: &str) -> Vec<u8> {
    match kind {
        "names_past_the_limit" => {
            let names: Vec<String> = (0..=100_000).map(|i| format!("\"n{i}\"")).collect();
            format!(r#"{{"Pod": {{"metadata": {{"name": "p"}}}}, "NodeNames": [{}]}}"#, names.join(",")).into_bytes()
        }
        "chunked_past_the_limit" => {
            // 2 MiB in 64 KiB chunks, never announced as a whole.
            let chunk = format!("{:x}\r\n{}\r\n", 64 << 10, "x".repeat(64 << 10));
            let mut body = chunk.repeat(32).into_bytes();
            body.extend_from_slice(b"0\r\n\r\n");
            body
        }
        "deep_json" => format!(r#"{{"Pod": {}}}"#, "[".repeat(100_000)).into_bytes(),
        "not_utf8" => vec![b'{', 0xff, 0xfe, b'}'],
        other => panic!("no generator named {other}"),
    }
}

/// The request as bytes: the case's headers, then JSON's content type and the length
/// unless the case gives its own.
fn request(case: &Case) -> Vec<u8> {
    let body = match (&case.body, &case.generate) {
        (Some(b), None) => b.clone().into_bytes(),
        (None, Some(g)) => generate(g),
        (None, None) => Vec::new(),
        _ => panic!("{}: give at most one of body and generate", case.name),
    };
    let has = |h: &str| case.headers.iter().any(|x| x.to_ascii_lowercase().starts_with(h));
    let mut head = format!("{} {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n", case.method, case.path);
    for h in &case.headers {
        head += &format!("{h}\r\n");
    }
    if !has("content-type:") && case.method == "POST" {
        head += "Content-Type: application/json\r\n";
    }
    if !has("content-length:") && !has("transfer-encoding:") && case.method == "POST" {
        head += &format!("Content-Length: {}\r\n", body.len());
    }
    head += "\r\n";
    let mut bytes = head.into_bytes();
    bytes.extend(body);
    bytes
}

/// Sends the bytes and reads the answer until the server closes: status and body.
fn exchange(port: u16, bytes: &[u8]) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("cannot connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    // The server may answer (and close) before the body is through: a failed write is
    // not the answer.
    let _ = s.write_all(bytes);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP answer: {:?}", text.chars().take(200).collect::<String>()))?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(port: u16) -> Server {
    let child = Command::new("prlimit")
        .arg(format!("--as={MEMORY_BYTES}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_gpolc"))
        .args(["serve", "policies/pack_spread.gpol", "--no-api", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--max-body", &MAX_BODY.to_string()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpolc serve starts");
    Server(child)
}

fn healthy(port: u16) -> bool {
    exchange(port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .is_ok_and(|(s, _)| s == 200)
}

#[test]
fn every_hostile_request_is_answered_with_its_status_and_why() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hostile/requests.toml"))
        .expect("the corpus is readable");
    let cases: Cases = toml::from_str(&text).expect("the corpus parses");
    let port = free_port();
    let mut server = serve(port);
    let start = Instant::now();
    while !healthy(port) {
        assert!(start.elapsed() < Duration::from_secs(30), "gpolc serve never answered /healthz");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut failures = Vec::new();
    for case in &cases.case {
        match exchange(port, &request(case)) {
            Ok((status, body)) => {
                if status != case.status {
                    failures.push(format!("{}: status {status}, expected {}: {body}", case.name, case.status));
                }
                for e in &case.expect {
                    if !body.contains(e.as_str()) {
                        failures.push(format!("{}: no `{e}` in the answer: {body}", case.name));
                    }
                }
            }
            Err(e) => failures.push(format!("{}: {e}", case.name)),
        }
        if let Ok(Some(exit)) = server.0.try_wait() {
            panic!("gpolc serve died after `{}`: {exit}", case.name);
        }
    }
    assert!(healthy(port), "gpolc serve no longer answers /healthz");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
