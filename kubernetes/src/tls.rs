//! Who may talk to the served extender: TLS with the server's certificate and key files
//! (reloaded when they change, so a rotated certificate needs no restart), optionally
//! asking every client for a certificate signed by a given CA (kube-scheduler's extender
//! `tlsConfig` sends one), and optionally a bearer token read from a file.
//!
//! Files are read through [`gpol_compiler::files`] (bounded, regular files only). A
//! reload that fails (a half-written key, a certificate that does not match it) keeps
//! the configuration in force and says why.

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use tokio_rustls::TlsAcceptor;

/// The largest certificate, key, CA or token file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The files TLS is served from.
#[derive(Clone, Debug, PartialEq)]
pub struct TlsFiles {
    /// The server's certificate chain (PEM), its own certificate first.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// When given, every client must present a certificate signed by one of these CAs
    /// (PEM); without, clients are not asked for one.
    pub client_ca: Option<PathBuf>,
}

/// A TLS file that cannot be used, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct TlsError {
    pub file: PathBuf,
    pub message: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}

impl std::error::Error for TlsError {}

fn error(file: &Path, message: impl Into<String>) -> TlsError {
    TlsError { file: file.to_path_buf(), message: message.into() }
}

fn read(file: &Path) -> Result<Vec<u8>, TlsError> {
    gpol_compiler::files::read(file, MAX_FILE_BYTES).map_err(|e| error(file, e.to_string()))
}

/// A value built from files' contents, built again when they change: the contents it
/// was built from, and the value.
struct Watched<T> {
    current: RwLock<(Vec<Vec<u8>>, T)>,
}

impl<T: Clone> Watched<T> {
    fn new(contents: Vec<Vec<u8>>, value: T) -> Watched<T> {
        Watched { current: RwLock::new((contents, value)) }
    }

    fn get(&self) -> T {
        self.current.read().unwrap_or_else(PoisonError::into_inner).1.clone()
    }

    /// Builds the value again from `contents` if they changed (`Ok(true)`); a build that
    /// fails leaves the value in force.
    fn update(
        &self,
        contents: Vec<Vec<u8>>,
        build: impl FnOnce(&[Vec<u8>]) -> Result<T, TlsError>,
    ) -> Result<bool, TlsError> {
        if self.current.read().unwrap_or_else(PoisonError::into_inner).0 == contents {
            return Ok(false);
        }
        let value = build(&contents)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = (contents, value);
        Ok(true)
    }
}

/// TLS as served now: the acceptor new connections use.
pub struct Tls {
    files: TlsFiles,
    acceptor: Watched<TlsAcceptor>,
}

impl Tls {
    /// Reads the files and builds the configuration.
    pub fn load(files: TlsFiles) -> Result<Tls, TlsError> {
        let contents = contents(&files)?;
        let acceptor = acceptor(&files, &contents)?;
        Ok(Tls { acceptor: Watched::new(contents, acceptor), files })
    }

    /// The acceptor for a new connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.get()
    }

    /// Reads the files again: changed ones that make a valid configuration replace it for
    /// new connections (`Ok(true)`); unchanged, `Ok(false)`; otherwise the error, and the
    /// configuration in force stays.
    pub fn reload(&self) -> Result<bool, TlsError> {
        self.acceptor.update(contents(&self.files)?, |c| acceptor(&self.files, c))
    }
}

/// The bytes of the certificate, the key and the client CA (if any), in that order.
fn contents(files: &TlsFiles) -> Result<Vec<Vec<u8>>, TlsError> {
    let mut all = vec![read(&files.cert)?, read(&files.key)?];
    if let Some(ca) = &files.client_ca {
        all.push(read(ca)?);
    }
    Ok(all)
}

fn acceptor(files: &TlsFiles, contents: &[Vec<u8>]) -> Result<TlsAcceptor, TlsError> {
    let (cert, key) = (&contents[0], &contents[1]);
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<_, _>>()
        .map_err(|e| error(&files.cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(error(&files.cert, "holds no certificate (PEM `BEGIN CERTIFICATE`)"));
    }
    let key =
        PrivateKeyDer::from_pem_slice(key).map_err(|e| error(&files.key, format!("not a PEM private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| error(&files.cert, e.to_string()))?;
    let builder = match (&files.client_ca, contents.get(2)) {
        (Some(path), Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca) {
                let c = c.map_err(|e| error(path, format!("not a PEM certificate: {e}")))?;
                roots.add(c).map_err(|e| error(path, format!("not a CA certificate: {e}")))?;
            }
            if roots.is_empty() {
                return Err(error(path, "holds no certificate (PEM `BEGIN CERTIFICATE`)"));
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| error(path, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| error(&files.key, format!("does not go with the certificate: {e}")))?;
    // kube-scheduler speaks HTTP/1.1 to extenders.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A bearer token every verb request must carry (`Authorization: Bearer …`), read from a
/// file (its first line, spaces trimmed) and read again when it changes.
pub struct Token {
    path: PathBuf,
    token: Watched<Vec<u8>>,
}

impl Token {
    pub fn load(path: PathBuf) -> Result<Token, TlsError> {
        let bytes = read(&path)?;
        let token = token_of(&path, &bytes)?;
        Ok(Token { token: Watched::new(vec![bytes], token), path })
    }

    /// Reads the file again; a changed, valid token replaces the old one (`Ok(true)`).
    pub fn reload(&self) -> Result<bool, TlsError> {
        self.token.update(vec![read(&self.path)?], |c| token_of(&self.path, &c[0]))
    }

    /// Whether an `Authorization` header carries the token. The comparison takes the
    /// same time wherever the first difference is, so timing does not reveal a prefix.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(given) = authorization.and_then(|a| a.strip_prefix(b"Bearer ")) else { return false };
        let want = self.token.get();
        given.len() == want.len() && given.iter().zip(&want).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
    }
}

fn token_of(path: &Path, bytes: &[u8]) -> Result<Vec<u8>, TlsError> {
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default().trim_ascii();
    if line.is_empty() {
        return Err(error(path, "holds no token (its first line is empty)"));
    }
    if !line.iter().all(|b| b.is_ascii_graphic()) {
        return Err(error(path, "the token holds spaces or characters that are not printable ASCII"));
    }
    Ok(line.to_vec())
}
