//! The served extender, apart from HTTP: the cluster it knows (under its lock), the
//! metrics, the policy file and its reload, readiness, the API server's client once
//! connected, leadership, and the decision log. [`crate::server`] answers HTTP on top of
//! it; [`crate::api`] keeps its cluster in step with the API server and binds through it.

use crate::cluster::Cluster;
use crate::leader::{Leadership, NotLeading};
use crate::metrics::Metrics;
use gpol_compiler::engine::EngineKind;
use gpol_compiler::load::Checked;
use gpol_runtime::account::Account;
use gpol_runtime::decision_log::{self, Record, Verb};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Instant;

/// What a reload did.
#[derive(Debug)]
pub enum Reload {
    Unchanged,
    Swapped,
    /// The new file does not check or cannot be read: its diagnostics.
    Refused(String),
}

/// The served extender: the cluster it knows, the policy file, the metrics.
pub struct Extender {
    cluster: Mutex<Cluster>,
    pub metrics: Metrics,
    path: PathBuf,
    engine: EngineKind,
    /// The policy file's contents as last compiled (or refused).
    source: Mutex<Vec<u8>>,
    started: Instant,
    /// Whether the cluster's state is known (set by whoever feeds it).
    ready: std::sync::atomic::AtomicBool,
    /// The API server, once connected: `bind` goes through it.
    api: std::sync::OnceLock<kube::Client>,
    /// With `--leader-elect`: whether this replica leads, and so may bind and be ready.
    leadership: Option<Arc<Leadership>>,
    /// With `--decision-log`: where every decision is appended.
    decision_log: Option<decision_log::Writer>,
}

/// Why a policy cannot be served.
#[derive(Debug)]
pub enum LoadError {
    Read(gpol_compiler::files::FileError),
    /// It does not check or compile: its diagnostics, rendered.
    Refused(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Read(e) => write!(f, "{e}"),
            LoadError::Refused(diagnostics) => f.write_str(diagnostics),
        }
    }
}

impl std::error::Error for LoadError {}

impl Extender {
    /// Loads the policy; its diagnostics when it does not check.
    pub fn load(path: PathBuf, engine: EngineKind) -> Result<Extender, LoadError> {
        let bytes =
            gpol_compiler::files::read(&path, gpol_compiler::limits::MAX_POLICY_BYTES).map_err(LoadError::Read)?;
        let policy = Checked::from_bytes(&path.display().to_string(), bytes.clone())
            .compile(engine)
            .map_err(|f| LoadError::Refused(f.to_string()))?;
        let metrics = Metrics::default();
        let mut cluster = Cluster::new(policy);
        cluster.set_policy_digest(decision_log::digest(&bytes));
        let unix_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        cluster.set_origin(i64::try_from(unix_now.as_millis()).unwrap_or(i64::MAX));
        Ok(Extender {
            cluster: Mutex::new(cluster),
            metrics,
            path,
            engine,
            source: Mutex::new(bytes),
            started: Instant::now(),
            ready: std::sync::atomic::AtomicBool::new(false),
            api: std::sync::OnceLock::new(),
            leadership: None,
            decision_log: None,
        })
    }

    /// Appends every decision (filter, prioritize, preempt, bind) to `log`.
    pub fn with_decision_log(mut self, log: decision_log::Writer) -> Extender {
        self.decision_log = Some(log);
        self
    }

    /// Whether decisions are logged: worth the work of an account.
    pub fn logs_decisions(&self) -> bool {
        self.decision_log.is_some()
    }

    /// Logs a decision made on `cluster` (under its lock, so records follow the order of
    /// decisions) from `inputs` (the request, the pod read). A log that cannot be written
    /// is said in the server's log; the decision stands.
    pub fn log_decision(&self, cluster: &Cluster, verb: Verb, job: &str, inputs: &[u8], account: Account) {
        let Some(log) = &self.decision_log else { return };
        let digest = decision_log::digest(inputs);
        let record = Record::now(SOURCE, cluster.policy_digest(), &digest, verb, job, account);
        if let Err(e) = log.write(&record) {
            tracing::error!(error = %e, "decision not logged");
        }
    }

    /// One replica of several (`--leader-elect`): it binds and is ready only while
    /// `leadership` says it leads, which the metrics show (`gpol_extender_leader`).
    pub fn with_leadership(mut self, leadership: Arc<Leadership>) -> Extender {
        self.metrics.register_leader(leadership.gauge());
        self.leadership = Some(leadership);
        self
    }

    pub fn leadership(&self) -> Option<&Leadership> {
        self.leadership.as_deref()
    }

    /// Whether a bind begun at `started` may send its next write (always, without
    /// leader election); else why not.
    pub fn may_write(&self, started: Instant) -> Result<(), NotLeading> {
        self.leadership.as_ref().map_or(Ok(()), |l| l.may_write(started))
    }

    /// The cluster, for whoever keeps it up to date. A panic while it was held cannot
    /// leave it half-changed in a way that matters more than a stale cache: carry on.
    pub fn cluster(&self) -> MutexGuard<'_, Cluster> {
        self.cluster.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Binds pods through this API server from now on (the first connection stays), and
    /// takes nodes from its watch only: request bodies no longer change what is known.
    pub fn connect(&self, client: kube::Client) {
        self.cluster().watch_nodes();
        let _ = self.api.set(client);
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Looks at the policy file: a changed one is checked and compiled aside and swapped
    /// in whole, or refused with its diagnostics while the old policy keeps serving.
    pub fn reload(&self) -> Reload {
        let bytes = match gpol_compiler::files::read(&self.path, gpol_compiler::limits::MAX_POLICY_BYTES) {
            Ok(b) => b,
            Err(e) => return self.refuse(e.to_string()),
        };
        {
            let mut last = self.source.lock().unwrap_or_else(PoisonError::into_inner);
            if *last == bytes {
                return Reload::Unchanged;
            }
            // Refused contents are not tried again until they change.
            *last = bytes.clone();
        }
        let digest = decision_log::digest(&bytes);
        match Checked::from_bytes(&self.path.display().to_string(), bytes).compile(self.engine) {
            Ok(policy) => {
                let mut cluster = self.cluster();
                cluster.set_policy(policy);
                cluster.set_policy_digest(digest);
                drop(cluster);
                self.metrics.reloaded(true);
                tracing::info!(policy = %self.path.display(), "policy reloaded");
                Reload::Swapped
            }
            Err(failed) => self.refuse(failed.to_string()),
        }
    }

    fn refuse(&self, diagnostics: String) -> Reload {
        self.metrics.reloaded(false);
        tracing::error!(policy = %self.path.display(), %diagnostics, "policy refused; the previous one keeps serving");
        Reload::Refused(diagnostics)
    }

    /// The cluster if no one holds it now (a poisoned lock as [`Extender::cluster`] takes
    /// it); `None` while another holds it.
    pub(crate) fn try_cluster(&self) -> Option<MutexGuard<'_, Cluster>> {
        match self.cluster.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The cluster's clock: milliseconds since the policy was loaded.
    pub(crate) fn clock_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The API server's client, once connected ([`Extender::connect`]).
    pub(crate) fn api(&self) -> Option<&kube::Client> {
        self.api.get()
    }
}

/// What the decision log says made its records.
const SOURCE: &str = "gpolc serve";
