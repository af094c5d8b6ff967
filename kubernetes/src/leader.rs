//! Leader election between replicas of `gpolc serve` (`--leader-elect`), on a
//! coordination.k8s.io Lease held through kube-lease-manager.
//!
//! Operators run two replicas for availability, but only one may bind: two binding at
//! once would each reserve cards and quota the other does not know of. The replica that
//! holds the Lease is the leader: it alone is ready (`/readyz`) and binds. The others
//! answer filter, prioritize and preempt as it does (they only read) and refuse binds
//! before anything is reserved or written.
//!
//! A failover must never bind twice; three rules see to it.
//! - A replica leads only while it knows it holds the Lease: the lease manager says it
//!   does, and the Lease as last read (every third of the grace period) was renewed by it
//!   less than its duration ago, on this replica's clock. A leader that cannot renew (the
//!   API server unreachable for it) stops binding when its lease runs out — the moment
//!   from which another replica may take it, by that replica's clock.
//! - Each write of a bind (the cards, the Binding) is checked just before it is sent:
//!   leadership lost while a bind is under way gives its place back and writes nothing
//!   more, and a bind does not start a write later than `settle` after it began. So every
//!   write of a leader is sent before its lease runs out.
//! - A newly elected leader waits `settle` — the longest a bind may take, the request
//!   time limit (`--timeout`) — before its first bind. The previous leader's last writes
//!   were sent before its lease ran out, so before this replica took the Lease: when the
//!   wait is over they have been answered (or their places given back) and their pods'
//!   changes have reached this replica's watch, and its reservations count them. (Clock
//!   skew between the replicas' nodes eats into the wait; NTP keeps it to milliseconds.)

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use prometheus_client::metrics::gauge::Gauge;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// Where a pod finds its own namespace (its service account's token mount).
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The longest an identity may be: the lease manager's field manager is
/// `kube-lease-manager-<identity>`, and the API server takes field managers of 128
/// characters at most.
const MAX_IDENTITY: usize = 100;

/// How long resigning waits for the lease manager to give the lease up.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Lease settings or an identity that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadSettings {
    Unnamed,
    /// The grace period is 0 or not shorter than the duration (seconds).
    Grace {
        grace: u64,
        duration: u64,
    },
    /// Longer than a Lease's `leaseDurationSeconds` (an `i32`) holds.
    TooLong(u64),
    /// An identity of this many bytes.
    Identity(usize),
}

impl fmt::Display for BadSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadSettings::Unnamed => f.write_str("the lease needs a name and a namespace"),
            BadSettings::Grace { grace, duration } => write!(
                f,
                "the grace period ({grace} s) must be at least 1 s and shorter than the lease duration ({duration} s)"
            ),
            BadSettings::TooLong(duration) => {
                write!(f, "a lease duration of {duration} s is longer than a Lease holds")
            }
            BadSettings::Identity(len) => {
                write!(f, "the identity must have 1 to {MAX_IDENTITY} characters, not {len}")
            }
        }
    }
}

impl std::error::Error for BadSettings {}

/// Why this replica may not bind, or write for a bind, now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotLeading {
    /// Not the leader: the replica's identity, and why not, in words.
    Follower { identity: String, why: &'static str },
    /// Just elected: binds begin in this many milliseconds.
    Settling { identity: String, in_ms: u128 },
    /// The bind took longer than it may (`--timeout`).
    TooSlow(Duration),
}

impl fmt::Display for NotLeading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotLeading::Follower { identity, why } => write!(f, "this replica ({identity}) is not the leader: {why}"),
            NotLeading::Settling { identity, in_ms } => write!(
                f,
                "this replica ({identity}) has just become the leader and binds in {in_ms} ms, once the previous \
                 leader's binds have settled"
            ),
            NotLeading::TooSlow(settle) => write!(f, "the bind took longer than {settle:?} (--timeout): given up"),
        }
    }
}

impl std::error::Error for NotLeading {}

/// Why an election cannot start.
#[derive(Debug)]
pub enum ElectionError {
    Settings(BadSettings),
    /// The lease manager failed on the named lease (`lease ns/name`).
    Manager {
        lease: String,
        error: Box<kube_lease_manager::LeaseManagerError>,
    },
}

impl fmt::Display for ElectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElectionError::Settings(e) => write!(f, "{e}"),
            ElectionError::Manager { lease, error } => write!(f, "{lease}: {error}"),
        }
    }
}

impl std::error::Error for ElectionError {}

/// The Lease competed for, and how it is held.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The Lease's name (`--lease-name`).
    pub lease: String,
    pub namespace: String,
    /// Seconds a lease holds after its last renewal (the Lease counts whole seconds).
    pub duration: u64,
    /// Seconds before its end the holder renews it: the time a renewal has to get through.
    pub grace: u64,
}

impl Settings {
    /// Why these settings cannot be used, if they cannot (the lease manager panics on
    /// some, and loops on others).
    pub fn check(&self) -> Result<(), BadSettings> {
        if self.lease.is_empty() || self.namespace.is_empty() {
            return Err(BadSettings::Unnamed);
        }
        if self.grace == 0 || self.grace >= self.duration {
            return Err(BadSettings::Grace { grace: self.grace, duration: self.duration });
        }
        if i32::try_from(self.duration).is_err() {
            return Err(BadSettings::TooLong(self.duration));
        }
        Ok(())
    }

    /// How often the Lease is read back: three times per grace period, so that a
    /// renewal (sent a grace period before the end) is seen before the lease runs out.
    fn read_every(&self) -> Duration {
        (Duration::from_secs(self.grace) / 3).clamp(Duration::from_millis(100), Duration::from_secs(2))
    }
}

/// The namespace this pod runs in (its service account's), else `default`.
pub fn own_namespace() -> String {
    std::fs::read_to_string(NAMESPACE_FILE)
        .ok()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

/// This replica's name in the Lease: the pod's name (`HOSTNAME`), and a random suffix so
/// that a pod restarted under the same name is another candidate than the one before.
pub fn default_identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "gpolc".to_string());
    // The standard library's hasher keys are random per process.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    hasher.write_u32(std::process::id());
    format!("{host}-{:06x}", hasher.finish() & 0xff_ffff)
}

/// Whether an identity can name a replica in the Lease.
pub fn check_identity(identity: &str) -> Result<(), BadSettings> {
    if identity.is_empty() || identity.len() > MAX_IDENTITY {
        return Err(BadSettings::Identity(identity.len()));
    }
    Ok(())
}

/// Whether this replica leads, and may bind: read by the server, kept by [`Election`].
pub struct Leadership {
    identity: String,
    /// How long a new leader waits before its first bind, and the longest a bind may
    /// take to send its writes.
    settle: Duration,
    term: Mutex<Term>,
    /// `gpol_extender_leader`: 1 while leading.
    gauge: Gauge,
}

/// What is known of the lease.
#[derive(Default)]
struct Term {
    /// What the lease manager last said: this replica holds the lock.
    elected: bool,
    /// The lease as last read, while this replica holds it.
    held: Option<Held>,
    /// The holder the lease named when last read.
    holder: Option<String>,
    /// Resigned, or stopped: it never leads again.
    resigned: bool,
    /// Whether it led when last looked at, and whether it had begun binding (for the
    /// logs and the gauge).
    leading: bool,
    binding: bool,
}

/// One term of leadership, as read from the Lease.
struct Held {
    /// `spec.acquireTime` as the lease manager wrote it when it took the lease: the same
    /// time read again is the same term (another replica taking the Lease in between
    /// would have written its own, and taking it back a new one).
    acquired: String,
    /// When the lease runs out unless renewed, on this replica's clock.
    until: Instant,
    /// When this term's first bind may be.
    binds_from: Instant,
}

impl Term {
    fn leads(&self, now: Instant) -> bool {
        !self.resigned && self.elected && self.held.as_ref().is_some_and(|h| now < h.until)
    }

    /// Why it does not lead, in words.
    fn why_not(&self, now: Instant) -> &'static str {
        if self.resigned {
            "it is stopping"
        } else if !self.elected {
            "it does not hold the lease"
        } else if self.held.as_ref().is_some_and(|h| now >= h.until) {
            "its lease ran out before a renewal was seen"
        } else {
            "the lease does not name it"
        }
    }
}

impl Leadership {
    /// A replica named `identity` in the Lease; elected, it binds from `settle` after
    /// its election on (the request time limit, `--timeout`).
    pub fn new(identity: impl Into<String>, settle: Duration) -> Leadership {
        Leadership { identity: identity.into(), settle, term: Mutex::default(), gauge: Gauge::default() }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The gauge that shows it (1 while leading), for the metrics to serve.
    pub fn gauge(&self) -> Gauge {
        self.gauge.clone()
    }

    /// The term, whatever a panic while it was held left (each change is one assignment).
    fn term(&self) -> MutexGuard<'_, Term> {
        self.term.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this replica leads now (it may not bind yet: see [`Leadership::may_bind`]).
    pub fn is_leader(&self) -> bool {
        let now = Instant::now();
        let mut term = self.term();
        self.look(&mut term, now);
        term.leads(now)
    }

    /// Whether a bind may begin now; else why not, in words.
    pub fn may_bind(&self) -> Result<(), NotLeading> {
        let now = Instant::now();
        let mut term = self.term();
        self.look(&mut term, now);
        if !term.leads(now) {
            return Err(NotLeading::Follower { identity: self.identity.clone(), why: term.why_not(now) });
        }
        match &term.held {
            Some(h) if now < h.binds_from => Err(NotLeading::Settling {
                identity: self.identity.clone(),
                in_ms: h.binds_from.duration_since(now).as_millis(),
            }),
            _ => Ok(()),
        }
    }

    /// Whether a bind begun at `started` may send its next write: it still leads, and
    /// the bind is within the longest a bind may take.
    pub fn may_write(&self, started: Instant) -> Result<(), NotLeading> {
        self.may_bind()?;
        if started.elapsed() >= self.settle {
            return Err(NotLeading::TooSlow(self.settle));
        }
        Ok(())
    }

    fn elect(&self, elected: bool) {
        let mut term = self.term();
        term.elected = elected;
        self.look(&mut term, Instant::now());
    }

    /// The Lease as just read (`None`: there is none).
    fn read(&self, lease: Option<&Lease>) {
        let now = Instant::now();
        let mut term = self.term();
        let spec = lease.and_then(|l| l.spec.as_ref());
        let holder = spec.and_then(|s| s.holder_identity.clone());
        if holder != term.holder {
            let named = holder.as_deref().unwrap_or("nobody");
            tracing::info!(identity = %self.identity, holder = named, "the lease is held by {named}");
            term.holder = holder;
        }
        let mine = spec.filter(|s| s.holder_identity.as_deref() == Some(self.identity.as_str()));
        let held = mine.and_then(|s| {
            let renewed = s.renew_time.as_ref()?.0;
            let seconds = s.lease_duration_seconds?;
            let acquired = s.acquire_time.as_ref().map(|t| t.0.to_string()).unwrap_or_default();
            // The lease manager wrote the renewal time on this clock: the lease ends
            // `seconds` after it, as every replica reckons it.
            let ends = renewed.as_millisecond().saturating_add(i64::from(seconds).saturating_mul(1000));
            let left = ends.saturating_sub(Timestamp::now().as_millisecond());
            let until = now + Duration::from_millis(u64::try_from(left).unwrap_or(0));
            let binds_from = match &term.held {
                Some(h) if h.acquired == acquired => h.binds_from,
                _ => now + self.settle,
            };
            Some(Held { acquired, until, binds_from })
        });
        term.held = held;
        self.look(&mut term, now);
    }

    /// Stops leading for good (shutting down).
    fn resign(&self) {
        let mut term = self.term();
        term.resigned = true;
        self.look(&mut term, Instant::now());
    }

    /// Notes a change of leadership (in the logs and the gauge): lost the moment it is
    /// noticed, and binding once the wait after an election is over.
    fn look(&self, term: &mut Term, now: Instant) {
        let leads = term.leads(now);
        if leads != term.leading {
            term.leading = leads;
            self.gauge.set(i64::from(leads));
            if leads {
                tracing::info!(identity = %self.identity, settle = ?self.settle,
                    "elected leader: binding once the previous leader's binds have settled");
            } else {
                tracing::warn!(identity = %self.identity, why = term.why_not(now), "no longer the leader: binding stopped");
            }
        }
        let binding = leads && term.held.as_ref().is_some_and(|h| now >= h.binds_from);
        if binding && !term.binding {
            tracing::info!(identity = %self.identity, "leader: binding");
        }
        term.binding = binding;
    }
}

/// The election under way: the lease manager competing for the Lease and renewing it,
/// and a task reading the Lease back into the [`Leadership`]. Dropped without
/// [`Election::resign`], both stop at once and the lease is left to run out, as after
/// a crash.
pub struct Election {
    leadership: Arc<Leadership>,
    manager: Option<JoinHandle<kube_lease_manager::Result<LeaseManager>>>,
    follower: Option<JoinHandle<()>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Election {
    /// Competes for the Lease (created if missing) as `leadership`'s identity.
    pub async fn start(
        client: Client,
        settings: &Settings,
        leadership: Arc<Leadership>,
    ) -> Result<Election, ElectionError> {
        settings.check().map_err(ElectionError::Settings)?;
        check_identity(leadership.identity()).map_err(ElectionError::Settings)?;
        let where_ = format!("lease {}/{}", settings.namespace, settings.lease);
        let manager = LeaseManagerBuilder::new(client.clone(), &settings.lease)
            .with_namespace(&settings.namespace)
            .with_identity(leadership.identity())
            // Named after the identity: kube-lease-manager 0.12 names its field manager
            // after the random identity it starts with, not the one given.
            .with_field_manager(format!("kube-lease-manager-{}", leadership.identity()))
            .with_duration(settings.duration)
            .with_grace(settings.grace)
            .build()
            .await
            .map_err(|error| ElectionError::Manager { lease: where_.clone(), error: Box::new(error) })?;
        let (changes, manager) = manager.watch().await;
        let leases: Api<Lease> = Api::namespaced(client, &settings.namespace);
        let (stop, stopped) = oneshot::channel();
        let follow = Follow { changes, leases, name: settings.lease.clone(), every: settings.read_every() };
        let follower = tokio::spawn(follow.run(Arc::clone(&leadership), stopped));
        tracing::info!(lease = %where_, identity = %leadership.identity(), duration_s = settings.duration,
            grace_s = settings.grace, "leader election: competing for the lease");
        Ok(Election { leadership, manager: Some(manager), follower: Some(follower), stop: Some(stop) })
    }

    pub fn leadership(&self) -> &Arc<Leadership> {
        &self.leadership
    }

    /// Stops binding at once, then gives the lease up, so that another replica takes it
    /// without waiting for it to run out (a graceful shutdown). Binds in flight send no
    /// further write.
    pub async fn resign(mut self) {
        self.leadership.resign();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // The follower ending drops the lease manager's channel: it releases the lease.
        if let Some(follower) = self.follower.take() {
            let _ = follower.await;
        }
        let Some(manager) = self.manager.take() else { return };
        match tokio::time::timeout(RELEASE_WAIT, manager).await {
            Ok(Ok(Ok(_))) => tracing::info!(identity = %self.leadership.identity(), "lease released"),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the lease could not be released: it runs out by itself"),
            Ok(Err(e)) => tracing::warn!(error = %e, "the lease manager failed: the lease runs out by itself"),
            Err(_) => tracing::warn!("the lease was not released in time: it runs out by itself"),
        }
    }
}

impl Drop for Election {
    fn drop(&mut self) {
        self.leadership.resign();
        // The manager first: the follower's end would otherwise have it release the lease.
        if let Some(manager) = self.manager.take() {
            manager.abort();
        }
        if let Some(follower) = self.follower.take() {
            follower.abort();
        }
    }
}

/// Reads the lease manager's changes, and the Lease itself, into the leadership.
struct Follow {
    changes: watch::Receiver<bool>,
    leases: Api<Lease>,
    name: String,
    every: Duration,
}

impl Follow {
    async fn run(mut self, leadership: Arc<Leadership>, mut stop: oneshot::Receiver<()>) {
        let mut manager_runs = true;
        loop {
            tokio::select! {
                _ = &mut stop => return,
                changed = self.changes.changed(), if manager_runs => match changed {
                    Ok(()) => {
                        let elected = *self.changes.borrow_and_update();
                        leadership.elect(elected);
                    }
                    Err(_) => {
                        tracing::error!("the lease manager stopped: this replica no longer competes for the lease");
                        manager_runs = false;
                        leadership.elect(false);
                    }
                },
                () = tokio::time::sleep(self.every) => {}
            }
            match self.leases.get_opt(&self.name).await {
                Ok(lease) => leadership.read(lease.as_ref()),
                // The lease as last read runs out by itself: a leader that cannot read
                // its renewals stops binding when it would have to have been renewed.
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "cannot read the lease: retrying");
                    leadership.is_leader();
                }
            }
        }
    }
}
