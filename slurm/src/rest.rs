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
    pub fn new(address: &str, version: &str) -> Result<Rest, String> {
        if !version.starts_with('v') || !version[1..].chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(format!("`{version}` is not an OpenAPI version such as {DEFAULT_VERSION}"));
        }
        let (base, socket) = match address.strip_prefix("unix:") {
            Some(path) if !path.is_empty() => ("http://localhost".to_string(), Some(PathBuf::from(path))),
            Some(_) => return Err("`unix:` names no socket".into()),
            None if address.starts_with("http://") || address.starts_with("https://") => {
                (address.trim_end_matches('/').to_string(), None)
            }
            None => return Err(format!("`{address}` is neither unix:PATH nor an http:// or https:// URL")),
        };
        Ok(Rest { base, socket, version: version.to_string(), user: None, token: None })
    }

    /// The nodes, as `sinfo --json` prints them.
    pub fn nodes(&self, limit: u64) -> Result<String, String> {
        self.get(&format!("/slurm/{}/nodes", self.version), limit)
    }

    /// The jobs, as `squeue --json` prints them.
    pub fn jobs(&self, limit: u64) -> Result<String, String> {
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
    fn get(&self, path: &str, limit: u64) -> Result<String, String> {
        let url = self.url(path);
        let fail = |e: curl::Error| format!("{url}: {e}");
        let mut easy = curl::easy::Easy::new();
        easy.url(&format!("{}{path}", self.base)).map_err(fail)?;
        if let Some(socket) = &self.socket {
            easy.unix_socket_path(Some(socket)).map_err(fail)?;
        }
        easy.timeout(TIMEOUT).map_err(fail)?;
        let mut headers = curl::easy::List::new();
        headers.append("Accept: application/json").map_err(fail)?;
        if let Some(token) = &self.token {
            if let Some(user) = &self.user {
                headers.append(&format!("X-SLURM-USER-NAME: {user}")).map_err(fail)?;
            }
            headers.append(&format!("X-SLURM-USER-TOKEN: {token}")).map_err(fail)?;
        }
        easy.http_headers(headers).map_err(fail)?;
        let mut body = Vec::new();
        let mut too_long = false;
        let done = {
            let mut transfer = easy.transfer();
            transfer
                .write_function(|data| {
                    if body.len() as u64 + data.len() as u64 > limit {
                        too_long = true;
                        return Ok(0); // Fewer bytes than given: curl stops.
                    }
                    body.extend_from_slice(data);
                    Ok(data.len())
                })
                .map_err(fail)?;
            transfer.perform()
        };
        if too_long {
            return Err(format!("{url}: the answer is longer than {limit} bytes"));
        }
        done.map_err(fail)?;
        let status = easy.response_code().map_err(fail)?;
        let text = String::from_utf8(body).map_err(|_| format!("{url}: the answer is not UTF-8 text"))?;
        let said = crate::errors::of_text(&text);
        if status != 200 || !said.is_empty() {
            let why = if said.is_empty() { text.chars().take(200).collect() } else { said.join("; ") };
            return Err(format!("{url}: HTTP {status}: {why}"));
        }
        Ok(text)
    }
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
        assert!(Rest::new("slurm:6820", DEFAULT_VERSION).expect_err("no scheme").contains("neither unix:PATH"));
        assert!(Rest::new("unix:", DEFAULT_VERSION).is_err());
        assert!(Rest::new("unix:/s", "0.0.38/../x").expect_err("a version").contains("not an OpenAPI version"));
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

    #[test]
    fn nothing_listening_is_an_error_naming_where() {
        let dir = std::env::temp_dir().join(format!("gpol-rest-test-{}", std::process::id()));
        let r = Rest::new(&format!("unix:{}", dir.join("none.sock").display()), DEFAULT_VERSION).expect("a socket");
        let e = r.jobs(1 << 20).expect_err("nothing listens");
        assert!(e.starts_with("http://localhost/slurm/v0.0.38/jobs (over "), "{e}");
    }
}
