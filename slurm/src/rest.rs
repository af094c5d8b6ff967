//! slurmrestd as the loop's source of Slurm's state: the same documents `sinfo --json` and
//! `squeue --json` print, asked of Slurm's REST daemon at a pinned OpenAPI version
//! (`GET /slurm/VERSION/nodes`, `/slurm/VERSION/jobs`; 22.05 answers v0.0.38, which is
//! also what its commands print). Reached over TCP (`http://host:6820`, `https://…`) with
//! a JWT (`SLURM_JWT`, sent as `X-SLURM-USER-TOKEN`), or over a Unix socket
//! (`unix:/run/slurmrestd.sock`) with slurmrestd's local authentication. Every request is
//! bounded in time and size; an answer whose `errors` list is not empty is an error.

use std::path::PathBuf;
use std::time::Duration;

/// The OpenAPI version asked for unless told otherwise: Slurm 22.05's.
pub const DEFAULT_VERSION: &str = "v0.0.38";

/// How long one request may take, connecting included.
pub const TIMEOUT: Duration = crate::command::TIMEOUT;

/// An address or version slurmrestd cannot be asked at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressError {
    NotAVersion(String),
    NoSocket,
    NotAnAddress(String),
}

impl std::fmt::Display for AddressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddressError::NotAVersion(v) => write!(f, "`{v}` is not an OpenAPI version such as {DEFAULT_VERSION}"),
            AddressError::NoSocket => write!(f, "`unix:` names no socket"),
            AddressError::NotAnAddress(a) => write!(f, "`{a}` is neither unix:PATH nor an http:// or https:// URL"),
        }
    }
}

impl std::error::Error for AddressError {}

/// Why slurmrestd gave no document: the URL asked, and what went wrong.
#[derive(Debug)]
pub struct RestError {
    /// The URL (and the socket it was asked over).
    pub url: String,
    pub failure: RestFailure,
}

/// What went wrong asking slurmrestd.
#[derive(Debug)]
pub enum RestFailure {
    /// The client's runtime could not start.
    Client(std::io::Error),
    /// No answer within [`TIMEOUT`].
    NoAnswer {
        seconds: u64,
    },
    /// The request did not go or its answer did not come back.
    Exchange(Exchange),
    NotUtf8,
    /// An answer other than 200, or with errors: what slurmrestd said (its `errors`, or the
    /// answer's start).
    Refused {
        status: u16,
        said: String,
    },
}

/// What went wrong in one HTTP exchange.
#[derive(Debug)]
pub enum Exchange {
    NotAUrl(hyper::http::uri::InvalidUri),
    NoHost,
    Request(hyper::http::Error),
    Connect(std::io::Error),
    ServerName {
        host: String,
        error: rustls::pki_types::InvalidDnsNameError,
    },
    /// The TLS client could not be made (the machine's CA store, the protocol versions).
    TlsClient(rustls::Error),
    Tls(std::io::Error),
    Http(hyper::Error),
    TooLong {
        limit: usize,
    },
    Body(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for RestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = &self.url;
        match &self.failure {
            RestFailure::Client(e) => write!(f, "{url}: cannot start the client: {e}"),
            RestFailure::NoAnswer { seconds } => write!(f, "{url}: no answer within {seconds} s"),
            RestFailure::Exchange(e) => write!(f, "{url}: {e}"),
            RestFailure::NotUtf8 => write!(f, "{url}: the answer is not UTF-8 text"),
            RestFailure::Refused { status, said } => write!(f, "{url}: HTTP {status}: {said}"),
        }
    }
}

impl std::fmt::Display for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exchange::NotAUrl(e) => write!(f, "not a URL: {e}"),
            Exchange::NoHost => write!(f, "the URL names no host"),
            Exchange::Request(e) => write!(f, "{e}"),
            Exchange::Connect(e) => write!(f, "{e}"),
            Exchange::ServerName { host, error } => write!(f, "`{host}`: {error}"),
            Exchange::TlsClient(e) => write!(f, "{e}"),
            Exchange::Tls(e) => write!(f, "TLS: {e}"),
            Exchange::Http(e) => write!(f, "{e}"),
            Exchange::TooLong { limit } => write!(f, "the answer is longer than {limit} bytes"),
            Exchange::Body(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RestError {}

/// Where slurmrestd listens, and who asks.
#[derive(Clone, Debug, PartialEq)]
pub struct Rest {
    /// `http://host:port` (no trailing slash), or `http://localhost` over `socket`.
    base: String,
    socket: Option<PathBuf>,
    /// The OpenAPI version in the paths (`v0.0.38`).
    pub version: String,
    /// `X-SLURM-USER-NAME` and `X-SLURM-USER-TOKEN`, when a token is given.
    pub user: Option<String>,
    pub token: Option<String>,
}

impl Rest {
    /// slurmrestd at `address`: `unix:PATH` or an `http://`/`https://` URL.
    pub fn new(address: &str, version: &str) -> Result<Rest, AddressError> {
        if !version.starts_with('v') || !version[1..].chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(AddressError::NotAVersion(version.to_string()));
        }
        let (base, socket) = match address.strip_prefix("unix:") {
            Some(path) if !path.is_empty() => ("http://localhost".to_string(), Some(PathBuf::from(path))),
            Some(_) => return Err(AddressError::NoSocket),
            None if address.starts_with("http://") || address.starts_with("https://") => {
                (address.trim_end_matches('/').to_string(), None)
            }
            None => return Err(AddressError::NotAnAddress(address.to_string())),
        };
        Ok(Rest { base, socket, version: version.to_string(), user: None, token: None })
    }

    /// The nodes, as `sinfo --json` prints them.
    pub fn nodes(&self, limit: u64) -> Result<String, RestError> {
        self.get(&format!("/slurm/{}/nodes", self.version), limit)
    }

    /// The jobs, as `squeue --json` prints them.
    pub fn jobs(&self, limit: u64) -> Result<String, RestError> {
        self.get(&format!("/slurm/{}/jobs", self.version), limit)
    }

    /// Where a path is asked, in messages.
    pub fn url(&self, path: &str) -> String {
        match &self.socket {
            Some(s) => format!("{}{path} (over {})", self.base, s.display()),
            None => format!("{}{path}", self.base),
        }
    }

    /// The body of `GET path`, at most `limit` bytes; an error names the URL and says
    /// what slurmrestd said.
    fn get(&self, path: &str, limit: u64) -> Result<String, RestError> {
        let fail = |failure| RestError { url: self.url(path), failure };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(RestFailure::Client(e)))?;
        let (status, body) = runtime
            .block_on(async { tokio::time::timeout(TIMEOUT, self.exchange(path, limit)).await })
            .map_err(|_| fail(RestFailure::NoAnswer { seconds: TIMEOUT.as_secs() }))?
            .map_err(|e| fail(RestFailure::Exchange(e)))?;
        let text = String::from_utf8(body).map_err(|_| fail(RestFailure::NotUtf8))?;
        let said = crate::errors::of_text(&text);
        if status != 200 || !said.is_empty() {
            let said = if said.is_empty() { text.chars().take(200).collect() } else { said.join("; ") };
            return Err(fail(RestFailure::Refused { status, said }));
        }
        Ok(text)
    }

    /// One HTTP/1.1 GET over the socket, plain TCP or TLS: the status and the body.
    async fn exchange(&self, path: &str, limit: u64) -> Result<(u16, Vec<u8>), Exchange> {
        let uri: hyper::Uri = format!("{}{path}", self.base).parse().map_err(Exchange::NotAUrl)?;
        let host = uri.host().ok_or(Exchange::NoHost)?.to_string();
        let mut request = hyper::Request::get(uri.path_and_query().map_or(path, |p| p.as_str()))
            .header(hyper::header::HOST, uri.authority().map_or(host.as_str(), |a| a.as_str()))
            .header(hyper::header::ACCEPT, "application/json");
        if let Some(token) = &self.token {
            if let Some(user) = &self.user {
                request = request.header("X-SLURM-USER-NAME", user);
            }
            request = request.header("X-SLURM-USER-TOKEN", token);
        }
        let request = request.body(http_body_util::Empty::<hyper::body::Bytes>::new()).map_err(Exchange::Request)?;
        let tls = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        match (&self.socket, tls) {
            (Some(socket), _) => {
                send(tokio::net::UnixStream::connect(socket).await.map_err(Exchange::Connect)?, request, limit).await
            }
            (None, false) => {
                send(
                    tokio::net::TcpStream::connect((host.as_str(), port)).await.map_err(Exchange::Connect)?,
                    request,
                    limit,
                )
                .await
            }
            (None, true) => {
                let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await.map_err(Exchange::Connect)?;
                let name = rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|error| Exchange::ServerName { host: host.clone(), error })?;
                let stream = tls_connector()?.connect(name, tcp).await.map_err(Exchange::Tls)?;
                send(stream, request, limit).await
            }
        }
    }
}

/// A TLS client that trusts what this machine trusts (its CA store, through the platform
/// verifier), with ring as the crypto provider as everywhere in gpol.
fn tls_connector() -> Result<tokio_rustls::TlsConnector, Exchange> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new(std::sync::Arc::clone(&provider)).map_err(Exchange::TlsClient)?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(Exchange::TlsClient)?
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(verifier))
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)))
}

/// Sends the request on the connection and reads the answer, at most `limit` bytes of it.
async fn send<S>(
    stream: S,
    request: hyper::Request<http_body_util::Empty<hyper::body::Bytes>>,
    limit: u64,
) -> Result<(u16, Vec<u8>), Exchange>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::BodyExt;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.map_err(Exchange::Http)?;
    tokio::spawn(connection);
    let response = sender.send_request(request).await.map_err(Exchange::Http)?;
    let status = response.status().as_u16();
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let body = http_body_util::Limited::new(response.into_body(), limit).collect().await.map_err(|e| {
        match e.downcast_ref::<http_body_util::LengthLimitError>() {
            Some(_) => Exchange::TooLong { limit },
            None => Exchange::Body(e),
        }
    })?;
    Ok((status, body.to_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_a_socket_or_a_url() {
        let r = Rest::new("unix:/run/slurmrestd.sock", DEFAULT_VERSION).expect("a socket");
        assert_eq!(r.url("/slurm/v0.0.38/jobs"), "http://localhost/slurm/v0.0.38/jobs (over /run/slurmrestd.sock)");
        let r = Rest::new("https://slurm.example:6820/", "v0.0.41").expect("a URL");
        assert_eq!(r.url("/x"), "https://slurm.example:6820/x");
        let refused = |address: &str, version: &str| Rest::new(address, version).expect_err("refused").to_string();
        assert!(refused("slurm:6820", DEFAULT_VERSION).contains("neither unix:PATH"));
        assert!(Rest::new("unix:", DEFAULT_VERSION).is_err());
        assert!(refused("unix:/s", "0.0.38/../x").contains("not an OpenAPI version"));
    }

    #[test]
    fn an_answers_errors_are_its_messages() {
        use crate::errors::of_text;
        let v38 = r#"{"errors": [{"error": "Unable to query jobs", "errno": 1}], "jobs": []}"#;
        assert_eq!(of_text(v38), ["Unable to query jobs (error 1)"]);
        let v41 = r#"{"errors": [{"description": "Authentication failure", "error": "Invalid user", "source": "rest_auth"}]}"#;
        assert_eq!(of_text(v41), ["Authentication failure: Invalid user: rest_auth"]);
        assert!(of_text(r#"{"errors": [], "jobs": []}"#).is_empty());
        assert!(of_text("Authentication failure").is_empty());
    }

    /// A one-shot HTTP server on loopback: answers `body` to the first request and
    /// returns what it was asked.
    fn answer_once(body: String) -> (String, std::thread::JoinHandle<String>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let served = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("a connection");
            let mut asked = Vec::new();
            let mut buf = [0u8; 4096];
            while !asked.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).expect("read");
                if n == 0 {
                    break;
                }
                asked.extend_from_slice(&buf[..n]);
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(body.as_bytes());
            String::from_utf8_lossy(&asked).into_owned()
        });
        (base, served)
    }

    #[test]
    fn a_get_over_tcp_carries_the_token_and_is_bounded() {
        let (base, served) = answer_once(r#"{"errors": [], "jobs": []}"#.into());
        let mut r = Rest::new(&base, DEFAULT_VERSION).expect("a URL");
        (r.user, r.token) = (Some("alice".into()), Some("jwt-123".into()));
        assert_eq!(r.jobs(1 << 20).expect("answered"), r#"{"errors": [], "jobs": []}"#);
        let asked = served.join().expect("served").to_ascii_lowercase();
        assert!(asked.starts_with("get /slurm/v0.0.38/jobs http/1.1\r\n"), "{asked}");
        assert!(
            asked.contains("x-slurm-user-name: alice\r\n") && asked.contains("x-slurm-user-token: jwt-123\r\n"),
            "{asked}"
        );
        // An answer past the limit is refused, not read whole.
        let (base, served) = answer_once("x".repeat(10_000));
        let e = Rest::new(&base, DEFAULT_VERSION).expect("a URL").nodes(1_000).expect_err("too long").to_string();
        assert!(e.ends_with("the answer is longer than 1000 bytes"), "{e}");
        let _ = served.join();
    }

    #[test]
    fn nothing_listening_is_an_error_naming_where() {
        let dir = std::env::temp_dir().join(format!("gpol-rest-test-{}", std::process::id()));
        let r = Rest::new(&format!("unix:{}", dir.join("none.sock").display()), DEFAULT_VERSION).expect("a socket");
        let e = r.jobs(1 << 20).expect_err("nothing listens").to_string();
        assert!(e.starts_with("http://localhost/slurm/v0.0.38/jobs (over "), "{e}");
    }
}
