//! The served extender's connections, over real sockets on loopback: headers sent too
//! slowly and idle keep-alive connections are cut at the header deadline, connections
//! past the cap wait until one closes, TLS with client certificates (kube-scheduler's
//! extender `tlsConfig`) admits only clients the CA signed and serves a rotated
//! certificate without a restart, and a bearer token file guards the verbs.

use gpol_compiler::engine::EngineKind;
use gpol_kubernetes::served::Extender;
use gpol_kubernetes::server::{self, Options};
use gpol_kubernetes::tls::TlsFiles;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const POLICY: &str = "policy served\n\nscore most_free { node.free_gpu / 8 gpu }\n";

/// A served extender on a free loopback port, stopped when the sender is dropped.
struct Served {
    addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

async fn serve(options: Options) -> Served {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policy.gpol");
    std::fs::write(&path, POLICY).expect("written");
    let ext = Arc::new(Extender::load(path, EngineKind::Interp).expect("loads"));
    ext.set_ready(true);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("an address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        server::serve(ext, listener, options, shutdown).await.expect("serves");
    });
    Served { addr, _stop: stop, _dir: dir }
}

/// Reads until the server closes the connection; how long that took (None: still open
/// after `within`).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at((start + within).into(), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
            Err(_) => return None,
        }
    }
}

#[tokio::test]
async fn slow_headers_and_idle_connections_are_cut_at_the_deadline() {
    let served = serve(Options { header_timeout: Duration::from_millis(400), ..Options::default() }).await;
    // Two bytes a second: the server hangs up at the deadline, long before the headers end.
    let mut slow = TcpStream::connect(served.addr).await.expect("connects");
    let writer = async {
        for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" {
            if slow.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let mut reader = TcpStream::connect(served.addr).await.expect("connects");
    let (_, idle) = tokio::join!(tokio::time::timeout(Duration::from_secs(3), writer), async {
        // A request answered, then nothing: the idle connection is closed too.
        reader.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("sent");
        closed_within(&mut reader, Duration::from_secs(3)).await
    });
    let idle = idle.expect("the idle connection was closed");
    assert!(idle >= Duration::from_millis(300), "closed after {idle:?}");
    let mut buf = [0u8; 64];
    let slow_closed =
        matches!(tokio::time::timeout(Duration::from_secs(2), slow.read(&mut buf)).await, Ok(Ok(0)) | Ok(Err(_)));
    assert!(slow_closed, "the slow connection is still open");
}

#[tokio::test]
async fn connections_past_the_cap_wait_for_one_to_close() {
    let served =
        serve(Options { max_connections: 2, header_timeout: Duration::from_secs(30), ..Options::default() }).await;
    let mut first = TcpStream::connect(served.addr).await.expect("connects");
    let _second = TcpStream::connect(served.addr).await.expect("connects");
    // Both are taken (a first request proves the server has accepted them).
    first.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("sent");
    let mut buf = [0u8; 256];
    assert!(first.read(&mut buf).await.expect("an answer") > 0);
    let mut third = TcpStream::connect(served.addr).await.expect("the kernel's backlog takes it");
    third.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("sent");
    let waited = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(waited.is_err(), "a third connection was served past the cap of 2");
    drop(first);
    let n = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf)).await.expect("served").expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
}

/// A CA, and certificates it signs.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key")).expect("a CA");
        Ca { issuer }
    }

    /// A certificate for `names` and its key, as PEM.
    fn sign(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("a key");
        let params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("written");
    path
}

/// A TLS client trusting `ca`, with a client certificate when given; the server's
/// certificate and an answer to GET /healthz, or the handshake's error.
async fn https(
    addr: SocketAddr,
    ca: &Ca,
    client: Option<(&str, &str)>,
) -> Result<(CertificateDer<'static>, u16), String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.issuer.der().clone()).expect("a root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => {
            let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert")];
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
            builder.with_client_auth_cert(chain, key).expect("client auth")
        }
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").expect("a name");
    let tls = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
    let peer = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).cloned().ok_or("no certificate")?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = hyper::Request::get("/healthz")
        .header("host", "localhost")
        .body(http_body_util::Empty::<axum::body::Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    Ok((peer, status))
}

use rustls::pki_types::pem::PemObject;

#[tokio::test]
async fn tls_admits_clients_the_ca_signed_and_serves_a_rotated_certificate() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key) = ca.sign(&["localhost"]);
    let files = TlsFiles {
        cert: write(dir.path(), "tls.crt", &cert),
        key: write(dir.path(), "tls.key", &key),
        client_ca: Some(write(dir.path(), "ca.crt", &ca.issuer.pem())),
    };
    let health_port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
    let health_at: SocketAddr = ([127, 0, 0, 1], health_port).into();
    let options = Options {
        tls: Some(files.clone()),
        reload_every: Duration::from_millis(100),
        health_listen: Some(health_at),
        ..Options::default()
    };
    let served = serve(options).await;
    // Probes without a client certificate read health and readiness on the plain port,
    // which answers nothing else.
    let plain_get = |path: &'static str| async move {
        // The server binds its ports as it starts: wait for this one.
        let start = Instant::now();
        let mut s = loop {
            match TcpStream::connect(health_at).await {
                Ok(s) => break s,
                Err(e) => assert!(start.elapsed() < Duration::from_secs(10), "the health port: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
            .await
            .expect("sent");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    };
    assert!(plain_get("/readyz").await.starts_with("HTTP/1.1 200"));
    let verb = plain_get("/gpol/filter").await;
    assert!(
        verb.starts_with("HTTP/1.1 404") && verb.contains("this port answers /healthz, /readyz and /metrics only"),
        "{verb}"
    );
    let (client_cert, client_key) = ca.sign(&["kube-scheduler"]);
    let client = Some((client_cert.as_str(), client_key.as_str()));
    let (first, status) = https(served.addr, &ca, client).await.expect("a signed client is served");
    assert_eq!(status, 200);
    // No client certificate, or one another CA signed: no connection.
    assert!(https(served.addr, &ca, None).await.is_err(), "a client without a certificate was served");
    let stranger = Ca::new();
    let (other_cert, other_key) = stranger.sign(&["intruder"]);
    assert!(https(served.addr, &ca, Some((&other_cert, &other_key))).await.is_err(), "a stranger was served");
    // Plain HTTP gets no answer.
    let mut plain = TcpStream::connect(served.addr).await.expect("connects");
    plain.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("sent");
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), plain.read(&mut buf)).await.map(|r| r.unwrap_or(0));
    assert!(!matches!(n, Ok(n) if buf[..n].starts_with(b"HTTP/1.1 200")), "plain HTTP was answered");

    // Rotated: a half-written key is refused and the old certificate keeps serving; the
    // complete new pair is served to new connections without a restart.
    let (new_cert, new_key) = ca.sign(&["localhost"]);
    std::fs::write(&files.cert, &new_cert).expect("written");
    std::fs::write(&files.key, &new_key[..new_key.len() / 2]).expect("written");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (during, _) = https(served.addr, &ca, client).await.expect("still served");
    assert_eq!(during, first, "a broken pair replaced the certificate");
    std::fs::write(&files.key, &new_key).expect("written");
    let start = Instant::now();
    loop {
        let (now, status) = https(served.addr, &ca, client).await.expect("served");
        assert_eq!(status, 200);
        if now != first {
            assert_eq!(now, CertificateDer::from_pem_slice(new_cert.as_bytes()).expect("cert"));
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the rotated certificate was never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_token_file_guards_the_verbs_and_is_read_again_when_it_changes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let token = write(dir.path(), "token", "s3cret\n");
    let options =
        Options { token_file: Some(token.clone()), reload_every: Duration::from_millis(100), ..Options::default() };
    let served = serve(options).await;
    let ask = |bearer: Option<&'static str>| async move {
        let mut s = TcpStream::connect(served.addr).await.expect("connects");
        let auth = bearer.map(|b| format!("Authorization: Bearer {b}\r\n")).unwrap_or_default();
        let body = r#"{"Pod": {"metadata": {"name": "p"}}, "NodeNames": []}"#;
        let request = format!(
            "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.expect("sent");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    };
    let refused = ask(None).await;
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(refused.contains("filter: no valid bearer token"), "{refused}");
    assert!(ask(Some("wrong")).await.starts_with("HTTP/1.1 401"));
    assert!(ask(Some("s3cret")).await.starts_with("HTTP/1.1 200"));
    // Health stays open to the kubelet.
    let mut s = TcpStream::connect(served.addr).await.expect("connects");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("sent");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    // Rotated.
    std::fs::write(&token, "n3w\n").expect("written");
    let start = Instant::now();
    while !ask(Some("n3w")).await.starts_with("HTTP/1.1 200") {
        assert!(start.elapsed() < Duration::from_secs(10), "the new token was never read");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ask(Some("s3cret")).await.starts_with("HTTP/1.1 401"));
}
