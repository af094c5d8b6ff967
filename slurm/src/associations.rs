//! The live association tree against the policy's: `sacctmgr show associations` read
//! ([`SHOW`], one `|`-separated line per association), and the `sacctmgr` changes that
//! make each cluster's accounts what [`crate::accounts`] derives from the policy — an
//! account added where it is missing; its parent, `Fairshare` and `GrpTRES` set where
//! they differ. Only the TRES the policy's quotas can name (`cpu`, `mem`, `gres/gpu`,
//! `gres/gpu:TYPE`) are compared: other limits an administrator set are left alone, and
//! so are accounts the policy does not name. The policy's priority classes are compared
//! with Slurm's QOS the same way (`sacctmgr show qos`, [`SHOW_QOS`]): added, or their
//! priority set.

use crate::accounts::{Account, Qos};
use std::collections::BTreeMap;

/// The command whose output [`read`] takes.
pub const SHOW: [&str; 6] =
    ["sacctmgr", "-n", "-P", "show", "associations", "format=Cluster,Account,ParentName,User,Share,GrpTRES"];

/// The command whose output [`read_qos`] takes.
pub const SHOW_QOS: [&str; 6] = ["sacctmgr", "-n", "-P", "show", "qos", "format=Name,Priority"];

/// Lines of `sacctmgr` output read at most (docs/limits.md).
pub const MAX_ASSOCIATIONS: usize = 1_000_000;

/// What is wrong with `sacctmgr`'s output, naming the line (1-based) and field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssociationsError {
    TooManyLines,
    /// Not the six fields of [`SHOW`].
    Fields {
        line: usize,
        count: usize,
    },
    /// A `GrpTRES` that cannot be read as counts.
    GrpTres {
        line: usize,
        tres: String,
        problem: TresError,
    },
    /// Not the `NAME|PRIORITY` of [`SHOW_QOS`].
    NotQos {
        line: usize,
    },
    Priority {
        line: usize,
        text: String,
    },
}

/// What is wrong with one item of a TRES list (`cpu=64`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TresError {
    NotNameCount(String),
    UnknownUnit(String),
    NotACount(String),
}

impl std::fmt::Display for AssociationsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AssociationsError::TooManyLines => write!(f, "more than {MAX_ASSOCIATIONS} lines"),
            AssociationsError::Fields { line, count } => {
                write!(f, "line {line}: {count} fields, not the 6 of `{}`", SHOW[5])
            }
            AssociationsError::GrpTres { line, tres, problem } => write!(f, "line {line}: GrpTRES `{tres}`: {problem}"),
            AssociationsError::NotQos { line } => write!(f, "line {line}: not NAME|PRIORITY (`{}`)", SHOW_QOS[5]),
            AssociationsError::Priority { line, text } => write!(f, "line {line}: Priority `{text}` is not a count"),
        }
    }
}

impl std::fmt::Display for TresError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TresError::NotNameCount(item) => write!(f, "`{item}` is not NAME=COUNT"),
            TresError::UnknownUnit(item) => write!(f, "unknown unit in `{item}`"),
            TresError::NotACount(item) => write!(f, "`{item}`: not a count"),
        }
    }
}

impl std::error::Error for AssociationsError {}

/// One association of an account (not of a user under it).
#[derive(Clone, Debug, PartialEq)]
pub struct Association {
    pub cluster: String,
    pub account: String,
    pub parent: String,
    /// `Fairshare`: a number of shares, or `parent`.
    pub shares: String,
    /// `GrpTRES`, memory in MiB.
    pub limits: BTreeMap<String, u64>,
}

/// The account associations of `sacctmgr`'s output (user associations skipped), or what
/// is wrong with it, naming the line and field.
pub fn read(text: &str) -> Result<Vec<Association>, AssociationsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        if i >= MAX_ASSOCIATIONS {
            return Err(AssociationsError::TooManyLines);
        }
        let fields: Vec<&str> = line.split('|').collect();
        let [cluster, account, parent, user, shares, tres] = fields[..] else {
            return Err(AssociationsError::Fields { line: i + 1, count: fields.len() });
        };
        if !user.is_empty() {
            continue;
        }
        let limits = limits(tres).map_err(|problem| AssociationsError::GrpTres {
            line: i + 1,
            tres: tres.to_string(),
            problem,
        })?;
        let text = |s: &str| s.trim().to_string();
        out.push(Association {
            cluster: text(cluster),
            account: text(account),
            parent: text(parent),
            shares: text(shares),
            limits,
        });
    }
    Ok(out)
}

/// Slurm's QOS and their priorities, from `sacctmgr`'s output.
pub fn read_qos(text: &str) -> Result<Vec<(String, u64)>, AssociationsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        if i >= MAX_ASSOCIATIONS {
            return Err(AssociationsError::TooManyLines);
        }
        let Some((name, priority)) = line.split_once('|') else {
            return Err(AssociationsError::NotQos { line: i + 1 });
        };
        let priority = (priority.trim().parse())
            .map_err(|_| AssociationsError::Priority { line: i + 1, text: priority.to_string() })?;
        out.push((name.trim().to_string(), priority));
    }
    Ok(out)
}

/// `cpu=64,gres/gpu=16,mem=256G` as counts; memory, which sacctmgr writes with a unit
/// (`M`, `G`, `T`, `P`; none is MiB), in MiB.
fn limits(tres: &str) -> Result<BTreeMap<String, u64>, TresError> {
    let mut out = BTreeMap::new();
    for item in tres.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item.split_once('=').ok_or_else(|| TresError::NotNameCount(item.to_string()))?;
        let (digits, scale) = match value.char_indices().last() {
            Some((at, unit)) if key == "mem" && unit.is_ascii_alphabetic() => {
                let power =
                    ("MGTP".find(unit.to_ascii_uppercase())).ok_or_else(|| TresError::UnknownUnit(item.to_string()))?;
                (&value[..at], 1024f64.powi(power as i32))
            }
            _ => (value, 1.0),
        };
        let n: f64 = digits.parse().map_err(|_| TresError::NotACount(item.to_string()))?;
        if !(n.is_finite() && n >= 0.0) {
            return Err(TresError::NotACount(item.to_string()));
        }
        out.insert(key.to_string(), (n * scale).round() as u64);
    }
    Ok(out)
}

/// The TRES a policy's quota can name: the ones compared.
fn ours(key: &str) -> bool {
    matches!(key, "cpu" | "mem" | "gres/gpu") || key.starts_with("gres/gpu:")
}

/// One change to a cluster's association tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Add the account (parents come first).
    Add { cluster: String, account: Account },
    /// Set what differs: each setting as `sacctmgr` takes it, and what it was.
    Modify { cluster: String, account: String, set: Vec<Setting> },
    /// Add a QOS for a priority class.
    AddQos(Qos),
    /// Set a QOS's priority to its class's value.
    SetQos { qos: Qos, was: u64 },
}

/// One setting of an account, and what Slurm had.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// `Parent`, `Fairshare` or `GrpTRES`.
    pub name: &'static str,
    pub value: String,
    pub was: String,
}

impl Change {
    /// The `sacctmgr` command that makes it.
    pub fn command(&self) -> Vec<String> {
        match self {
            Change::Add { cluster, account } => account.add_command(Some(cluster)),
            Change::Modify { cluster, account, set } => {
                let mut c: Vec<String> = ["sacctmgr", "-i", "modify", "account", "where"].map(String::from).into();
                c.push(format!("name={account}"));
                c.push(format!("cluster={cluster}"));
                c.push("set".into());
                c.extend(set.iter().map(|s| format!("{}={}", s.name, s.value)));
                c
            }
            Change::AddQos(q) => q.add_command(),
            Change::SetQos { qos, .. } => ["sacctmgr", "-i", "modify", "qos", "where"]
                .into_iter()
                .map(String::from)
                .chain([format!("name={}", qos.name), "set".into(), format!("Priority={}", qos.priority)])
                .collect(),
        }
    }

    /// The change in words.
    pub fn describe(&self) -> String {
        match self {
            Change::Add { cluster, account } => format!(
                "add account {} under {} in cluster {cluster}: Fairshare={}{}",
                account.name,
                account.parent,
                account.shares,
                account.grp_tres().map(|t| format!(", {t}")).unwrap_or_default()
            ),
            Change::Modify { cluster, account, set } => {
                let what: Vec<String> = set.iter().map(|s| format!("{} {} → {}", s.name, s.was, s.value)).collect();
                format!("change account {account} in cluster {cluster}: {}", what.join(", "))
            }
            Change::AddQos(q) => format!("add QOS {} with priority {} (priority class {})", q.name, q.priority, q.name),
            Change::SetQos { qos, was } => {
                format!("change QOS {}: priority {was} → {} (priority class {})", qos.name, qos.priority, qos.name)
            }
        }
    }
}

/// What makes every cluster's tree hold the wanted accounts: additions first (parents
/// before children, as `wanted` lists them), then modifications. A cluster is one that has
/// a `root` association.
pub fn diff(wanted: &[Account], live: &[Association]) -> Vec<Change> {
    let mut clusters: Vec<&str> = Vec::new();
    for a in live.iter().filter(|a| a.account == "root") {
        if !clusters.contains(&a.cluster.as_str()) {
            clusters.push(&a.cluster);
        }
    }
    let (mut adds, mut modifies) = (Vec::new(), Vec::new());
    for cluster in clusters {
        for want in wanted {
            let Some(have) = live.iter().find(|a| a.cluster == cluster && a.account == want.name) else {
                adds.push(Change::Add { cluster: cluster.to_string(), account: want.clone() });
                continue;
            };
            let mut set = Vec::new();
            if have.parent != want.parent {
                set.push(Setting { name: "Parent", value: want.parent.clone(), was: have.parent.clone() });
            }
            if have.shares != want.shares.to_string() {
                set.push(Setting { name: "Fairshare", value: want.shares.to_string(), was: have.shares.clone() });
            }
            // The policy's limits, and -1 (none) for a limit of ours it no longer sets.
            let wanted_limits: BTreeMap<&str, u64> = want.limits.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            let mut tres: Vec<String> = (want.limits.iter())
                .filter(|(k, v)| have.limits.get(k) != Some(v))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            tres.extend(
                (have.limits.keys())
                    .filter(|k| ours(k) && !wanted_limits.contains_key(k.as_str()))
                    .map(|k| format!("{k}=-1")),
            );
            if !tres.is_empty() {
                let was: Vec<String> =
                    (have.limits.iter()).filter(|(k, _)| ours(k)).map(|(k, v)| format!("{k}={v}")).collect();
                set.push(Setting {
                    name: "GrpTRES",
                    value: tres.join(","),
                    was: if was.is_empty() { "none".into() } else { was.join(",") },
                });
            }
            if !set.is_empty() {
                modifies.push(Change::Modify { cluster: cluster.to_string(), account: want.name.clone(), set });
            }
        }
    }
    adds.extend(modifies);
    adds
}

/// What makes Slurm's QOS carry the policy's priority classes: each added, or its priority
/// set. Other QOS are left alone.
pub fn diff_qos(wanted: &[Qos], live: &[(String, u64)]) -> Vec<Change> {
    let mut out = Vec::new();
    for q in wanted {
        match live.iter().find(|(name, _)| *name == q.name) {
            None => out.push(Change::AddQos(q.clone())),
            Some(&(_, was)) if was != q.priority => out.push(Change::SetQos { qos: q.clone(), was }),
            Some(_) => {}
        }
    }
    out
}

/// Every change that makes Slurm's accounts (and, given `sacctmgr show qos`'s output, its
/// QOS) the policy's: QOS first (an account's QOS list may name them), then the accounts
/// as [`diff`] orders them. `associations` and `qos` are the outputs of [`SHOW`] and
/// [`SHOW_QOS`].
/// The changes that bring the live `associations` (and QOS, when given) to the policy's,
/// with the quota windows open at `minute` of the week (local time) in force.
pub fn changes(
    policy: &gpol_compiler::hir::Policy,
    associations: &str,
    qos: Option<&str>,
    minute: Option<u16>,
) -> Result<Vec<Change>, AssociationsError> {
    let live = read(associations)?;
    let mut out = match qos {
        Some(text) => diff_qos(&crate::accounts::qos(policy).0, &read_qos(text)?),
        None => Vec::new(),
    };
    out.extend(diff(&crate::accounts::accounts_at(policy, minute).0, &live));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from Slurm 22.05's sacctmgr (slurm/tests/slurm/cluster.sh with accounting).
    const SHOWN: &str = "gpol|root|||1|\ngpol|root||root|1|\ngpol|org|root||1|\n\
                         gpol|a|org||2|cpu=64,gres/gpu=16,mem=256G\ngpol|b|org||parent|\n";

    fn account(name: &str, parent: &str, shares: u64, limits: &[(&str, u64)]) -> Account {
        let limits = limits.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        Account { name: name.into(), parent: parent.into(), shares, limits }
    }

    #[test]
    fn reads_account_associations_with_memory_in_mib() {
        let got = read(SHOWN).expect("reads");
        assert_eq!(got.iter().map(|a| a.account.as_str()).collect::<Vec<_>>(), ["root", "org", "a", "b"]);
        let a = &got[2];
        assert_eq!((a.parent.as_str(), a.shares.as_str()), ("org", "2"));
        assert_eq!(a.limits, BTreeMap::from([("cpu".into(), 64), ("gres/gpu".into(), 16), ("mem".into(), 262_144)]));
        assert_eq!(got[3].shares, "parent");
    }

    #[test]
    fn bad_lines_are_named() {
        assert_eq!(
            read("gpol|a|org\n").expect_err("short").to_string(),
            "line 1: 3 fields, not the 6 of `format=Cluster,Account,ParentName,User,Share,GrpTRES`"
        );
        let e = read("gpol|root|||1|\ngpol|a|org||1|mem=3X\n").expect_err("unit").to_string();
        assert!(e.starts_with("line 2: GrpTRES `mem=3X`: unknown unit"), "{e}");
        assert!(read("gpol|a|org||1|cpu=lots\n").is_err());
    }

    #[test]
    fn the_same_tree_needs_no_change() {
        let live = read(SHOWN).expect("reads");
        let wanted = [
            account("org", "root", 1, &[]),
            account("a", "org", 2, &[("gres/gpu", 16), ("cpu", 64), ("mem", 262_144)]),
        ];
        assert_eq!(diff(&wanted, &live), []);
    }

    #[test]
    fn the_limits_in_force_follow_quota_windows() {
        let text = "policy t\nqueue org {\n  queue a { weight 2; limit 16 gpu, 64 cpu, 256GiB; limit 32 gpu on weekends }\n  queue b { weight 1 }\n}\n";
        let policy = gpol_compiler::load::Checked::from_text("t.gpol", text)
            .into_policy()
            .unwrap_or_else(|_| panic!("checks"))
            .policy;
        let live = "gpol|root|||1|\ngpol|org|root||1|\ngpol|a|org||2|cpu=64,gres/gpu=16,mem=256G\ngpol|b|org||1|\n";
        // Monday 10:00: as the tree is; Saturday 10:00: the weekend's limit.
        assert_eq!(changes(&policy, live, None, Some(600)).expect("reads"), []);
        let weekend = changes(&policy, live, None, Some(5 * 1440 + 600)).expect("reads");
        let words: Vec<String> = weekend.iter().map(Change::describe).collect();
        assert_eq!(words, ["change account a in cluster gpol: GrpTRES cpu=64,gres/gpu=16,mem=262144 → gres/gpu=32"]);
    }

    #[test]
    fn missing_accounts_are_added_and_differences_set() {
        let live = read(SHOWN).expect("reads");
        let wanted = [
            account("org", "root", 1, &[]),
            account("a", "org", 3, &[("gres/gpu", 8), ("mem", 262_144)]),
            account("b", "org", 1, &[]),
            account("c", "b", 1, &[("gres/gpu:h100", 4)]),
        ];
        let changes = diff(&wanted, &live);
        let words: Vec<String> = changes.iter().map(Change::describe).collect();
        assert_eq!(
            words,
            [
                "add account c under b in cluster gpol: Fairshare=1, GrpTRES=gres/gpu:h100=4",
                "change account a in cluster gpol: Fairshare 2 → 3, GrpTRES cpu=64,gres/gpu=16,mem=262144 → gres/gpu=8,cpu=-1",
                "change account b in cluster gpol: Fairshare parent → 1",
            ]
        );
        assert_eq!(
            changes[1].command().join(" "),
            "sacctmgr -i modify account where name=a cluster=gpol set Fairshare=3 GrpTRES=gres/gpu=8,cpu=-1"
        );
        assert_eq!(
            changes[0].command().join(" "),
            "sacctmgr -i add account c Cluster=gpol Parent=b Fairshare=1 Description=gpol queue c GrpTRES=gres/gpu:h100=4"
        );
    }

    #[test]
    fn limits_the_policy_cannot_name_are_left_alone() {
        let live = read("gpol|root|||1|\ngpol|a|root||1|node=4,gres/gpu=8\n").expect("reads");
        assert_eq!(
            diff(&[account("a", "root", 1, &[])], &live)[0].describe(),
            "change account a in cluster gpol: GrpTRES gres/gpu=8 → gres/gpu=-1"
        );
    }

    #[test]
    fn priority_classes_become_qos_with_their_priority() {
        let live = read_qos("normal|0\nurgent|50\nscavenger|0\n").expect("reads");
        let wanted = [
            Qos { name: "normal".into(), priority: 0 },
            Qos { name: "urgent".into(), priority: 100 },
            Qos { name: "batch".into(), priority: 10 },
        ];
        let changes = diff_qos(&wanted, &live);
        let words: Vec<String> = changes.iter().map(Change::describe).collect();
        assert_eq!(
            words,
            [
                "change QOS urgent: priority 50 → 100 (priority class urgent)",
                "add QOS batch with priority 10 (priority class batch)"
            ]
        );
        assert_eq!(changes[0].command().join(" "), "sacctmgr -i modify qos where name=urgent set Priority=100");
        assert_eq!(changes[1].command().join(" "), "sacctmgr -i add qos batch Priority=10");
        assert!(read_qos("urgent|high\n").expect_err("not a count").to_string().contains("line 1: Priority `high`"));
    }

    #[test]
    fn every_cluster_is_mended() {
        let live = read("east|root|||1|\nwest|root|||1|\nwest|a|root||1|\n").expect("reads");
        let changes = diff(&[account("a", "root", 1, &[])], &live);
        assert_eq!(changes.len(), 1);
        assert!(matches!(&changes[0], Change::Add { cluster, .. } if cluster == "east"));
    }
}
