//! `accounts.sh`: the policy's queue tree as Slurm accounts, in `sacctmgr` commands.
//! Each queue is an account under its parent (the tree's roots under Slurm's `root`), its
//! fair-share weight becomes the account's `Fairshare` shares, and its limit (or its
//! guarantee plus borrow limit, when lower) the account's `GrpTRES`: the most its running
//! jobs may hold together. What Slurm's
//! associations cannot say — guarantees others may borrow, borrow and lend limits, limits
//! per user, half-lives — is listed in the header: the scheduling loop enforces it.

use gpol_compiler::hir::{Policy, Quota, QuotaKindKey, Quotas, Resource};
use gpol_compiler::ir::QuotaKind;

/// The commands, and what Slurm cannot express, queue by queue.
pub struct Accounts {
    pub script: String,
    pub unexpressed: Vec<String>,
}

/// A queue as the Slurm account the policy wants.
#[derive(Clone, Debug, PartialEq)]
pub struct Account {
    pub name: String,
    /// Its parent account (`root` for the tree's roots).
    pub parent: String,
    /// Its `Fairshare` shares.
    pub shares: u64,
    /// Its `GrpTRES`, in the policy's order: TRES name and whole count (memory in MiB).
    pub limits: Vec<(String, u64)>,
}

impl Account {
    /// `GrpTRES=gres/gpu=16,cpu=64`, or nothing without limits.
    pub fn grp_tres(&self) -> Option<String> {
        let items: Vec<String> = self.limits.iter().map(|(k, v)| format!("{k}={v}")).collect();
        (!items.is_empty()).then(|| format!("GrpTRES={}", items.join(",")))
    }

    /// The `sacctmgr` command that adds it (to `cluster`, or to every cluster).
    pub fn add_command(&self, cluster: Option<&str>) -> Vec<String> {
        let mut c: Vec<String> = ["sacctmgr", "-i", "add", "account", &self.name].map(String::from).into();
        c.extend(cluster.map(|c| format!("Cluster={c}")));
        c.push(format!("Parent={}", self.parent));
        c.push(format!("Fairshare={}", self.shares));
        c.push(format!("Description=gpol queue {}", self.name));
        c.extend(self.grp_tres());
        c
    }

    /// The `sacctmgr` command that sets an existing account's shares and limits as the
    /// policy wants them: what a second run of accounts.sh does. (The description is left
    /// as it is and the parent set apart, [`Account::reparent_command`]: sacctmgr answers a
    /// change that changes nothing of either with "Nothing modified" and exit status 1.)
    pub fn modify_command(&self) -> Vec<String> {
        let mut c: Vec<String> =
            ["sacctmgr", "-i", "modify", "account", "where", &format!("name={}", self.name), "set"]
                .map(String::from)
                .into();
        c.push(format!("Fairshare={}", self.shares));
        c.extend(self.grp_tres());
        c
    }

    /// The `sacctmgr` command that moves an existing account under its parent.
    pub fn reparent_command(&self) -> Vec<String> {
        let name = format!("name={}", self.name);
        let parent = format!("Parent={}", self.parent);
        ["sacctmgr", "-i", "modify", "account", "where", &name, "set", &parent].map(String::from).into()
    }
}

/// A priority class as the Slurm QOS that names it (the job model reads a job's QOS as
/// its class), with the class's value as the QOS's priority.
#[derive(Clone, Debug, PartialEq)]
pub struct Qos {
    pub name: String,
    pub priority: u64,
}

impl Qos {
    /// The `sacctmgr` command that adds it.
    pub fn add_command(&self) -> Vec<String> {
        ["sacctmgr", "-i", "add", "qos", &self.name, &format!("Priority={}", self.priority)].map(String::from).into()
    }

    /// The `sacctmgr` command that sets an existing QOS's priority (every Slurm has QOS
    /// `normal`).
    pub fn modify_command(&self) -> Vec<String> {
        let name = format!("name={}", self.name);
        let priority = format!("Priority={}", self.priority);
        ["sacctmgr", "-i", "modify", "qos", "where", &name, "set", &priority].map(String::from).into()
    }
}

/// The shell functions accounts.sh asks with: whether a QOS exists, whether an account has
/// its association (`ACCOUNT|` with no user) on the cluster, and that association's parent.
const EXISTS: &str = "qos_exists() { [ -n \"$(sacctmgr -nP show qos where name=\"$1\" format=name)\" ]; }\n\
account_exists() { sacctmgr -nP show assoc where account=\"$1\" format=account,user | grep -qx \"$1|\"; }\n\
parent_of() { sacctmgr -nP show assoc where account=\"$1\" format=account,user,parentname | sed -n \"s/^$1||//p\"; }\n";

/// A command as the shell reads it back.
fn line(words: &[String]) -> String {
    words.iter().map(|w| crate::command::shell_word(w)).collect::<Vec<_>>().join(" ")
}

/// The QOS added, or its priority set when it exists.
fn qos_line(q: &Qos) -> String {
    let name = crate::command::shell_word(&q.name);
    format!("if qos_exists {name}; then {}; else {}; fi\n", line(&q.modify_command()), line(&q.add_command()))
}

/// The account added, or its shares, limits and parent set when it exists.
fn account_line(a: &Account) -> String {
    let (name, parent) = (crate::command::shell_word(&a.name), crate::command::shell_word(&a.parent));
    format!(
        "if account_exists {name}; then {}; [ \"$(parent_of {name})\" = {parent} ] || {}; else {}; fi\n",
        line(&a.modify_command()),
        line(&a.reparent_command()),
        line(&a.add_command(None))
    )
}

/// The policy's priority classes as QOS, and the classes a QOS cannot carry (Slurm's QOS
/// priorities are whole numbers from 0 to 2^32 − 2).
pub fn qos(policy: &Policy) -> (Vec<Qos>, Vec<String>) {
    let (mut out, mut not) = (Vec::new(), Vec::new());
    for (name, value) in &policy.priority_classes {
        if value.fract() == 0.0 && (0.0..=f64::from(u32::MAX - 1)).contains(value) {
            out.push(Qos { name: name.clone(), priority: *value as u64 });
        } else {
            not.push(format!("priority class {name} = {value}: a QOS priority is a whole number from 0 to 4294967294"));
        }
    }
    (out, not)
}

/// A quota as Slurm TRES (`gres/gpu=16,cpu=64,mem=262144`; memory in MiB), and what of it
/// Slurm cannot count (a fraction of a GPU).
fn tres(quota: &Quota) -> (Vec<(String, u64)>, Vec<String>) {
    let (mut out, mut not) = (Vec::new(), Vec::new());
    for (resource, &amount) in quota {
        if !amount.is_finite() {
            continue;
        }
        let (key, value) = match resource {
            Resource::Gpu(None) => ("gres/gpu".to_string(), amount),
            Resource::Gpu(Some(model)) => (format!("gres/gpu:{model}"), amount),
            Resource::Cpu => ("cpu".to_string(), amount),
            Resource::Mem => ("mem".to_string(), amount / (1u64 << 20) as f64),
        };
        if value.fract() != 0.0 || !(0.0..=MAX_TRES).contains(&value) {
            not.push(format!("{resource} {amount} is not a whole count of {key}"));
            continue;
        }
        out.push((key, value as u64));
    }
    (out, not)
}

/// The largest TRES count written (Slurm keeps them in 64 bits; past 2^53 a double is no
/// longer whole).
const MAX_TRES: f64 = 9_007_199_254_740_992.0;
/// The most a queue's running jobs may hold, per resource, with `quotas` in force: its
/// limit, and its guarantee plus its borrow limit, whichever is lower.
fn cap(quotas: &Quotas) -> Quota {
    let quota = |kind| quotas.get(&QuotaKindKey(kind));
    let mut cap = quota(QuotaKind::Limit).cloned().unwrap_or_default();
    if let (Some(g), Some(b)) = (quota(QuotaKind::Guarantee), quota(QuotaKind::BorrowLimit)) {
        for (r, borrow) in b {
            if let Some(guarantee) = g.get(r) {
                let most = guarantee + borrow;
                cap.entry(r.clone()).and_modify(|x| *x = x.min(most)).or_insert(most);
            }
        }
    }
    cap
}

/// An amount as a policy writes it: `64 gpu`, `32 gpu(h100)`, `512 cpu`, `8TiB`.
fn amount(resource: &Resource, a: f64) -> String {
    match resource {
        Resource::Mem => {
            let units = [(1u64 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB")];
            match units.iter().find(|(u, _)| a >= *u as f64 && (a / *u as f64).fract() == 0.0) {
                Some((u, name)) => format!("{}{name}", a / *u as f64),
                None => format!("{a}B"),
            }
        }
        r => format!("{a} {r}"),
    }
}

/// Fair-share shares for each weight: the weights themselves when all are whole, else
/// a hundred per unit of weight (rounded, at least 1).
fn shares(policy: &Policy) -> Vec<u64> {
    let whole = policy.queues.iter().all(|q| q.weight.fract() == 0.0 && q.weight >= 1.0);
    let scale = if whole { 1.0 } else { 100.0 };
    policy.queues.iter().map(|q| (q.weight * scale).round().clamp(1.0, 1e9) as u64).collect()
}

/// The accounts the policy's queues become, parents first, and what of the tree Slurm's
/// associations cannot express: their limits as with no quota window open.
pub fn accounts(policy: &Policy) -> (Vec<Account>, Vec<String>) {
    accounts_at(policy, None)
}

/// [`accounts`] with the quota windows open at `minute` of the week (local time, 0:
/// Monday 00:00) in force: what the scheduling loop keeps the associations at.
pub fn accounts_at(policy: &Policy, minute: Option<u16>) -> (Vec<Account>, Vec<String>) {
    let (mut accounts, mut unexpressed) = (Vec::new(), Vec::new());
    if policy.has_implicit_queue() {
        unexpressed.push("the policy declares no queues: there are no accounts to add".into());
        return (accounts, unexpressed);
    }
    let shares = shares(policy);
    let in_force = policy.quotas_at(minute);
    for (q, queue) in policy.queues.iter().enumerate() {
        let parent = queue.parent.and_then(|p| policy.queues.get(p)).map_or("root", |p| p.name.as_str());
        let (limits, not) = tres(&in_force.get(q).map(cap).unwrap_or_default());
        unexpressed.extend(not.into_iter().map(|n| format!("queue {}: limit: {n}", queue.name)));
        accounts.push(Account { name: queue.name.clone(), parent: parent.to_string(), shares: shares[q], limits });
        if queue.name.chars().any(|c| c.is_ascii_uppercase()) {
            unexpressed.push(format!("queue {}: Slurm keeps account names in lower case", queue.name));
        }
        for (kind, what) in [
            (QuotaKind::Guarantee, "a guarantee others may borrow while it is unused"),
            (QuotaKind::BorrowLimit, "a borrow limit (only its cap, guarantee plus borrow limit, is in GrpTRES)"),
            (QuotaKind::LendLimit, "a lend limit"),
            (QuotaKind::UserLimit, "a limit per user"),
        ] {
            if let Some(q) = queue.quota(kind).filter(|q| !q.is_empty()) {
                let amounts: Vec<String> = q.iter().map(|(r, a)| amount(r, *a)).collect();
                unexpressed.push(format!("queue {}: {what} ({})", queue.name, amounts.join(", ")));
            }
        }
        for w in &queue.windows {
            unexpressed.push(format!(
                "queue {}: its {} {} (the association holds the amounts in force with no window open; \
                 `gpolc slurm run --accounts` changes it as windows open and close)",
                queue.name,
                w.kind.keyword(),
                w.window
            ));
        }
        if queue.usage_half_life.is_some() {
            unexpressed.push(format!(
                "queue {}: a usage half-life of its own (Slurm has one, PriorityDecayHalfLife, for all)",
                queue.name
            ));
        }
    }
    (accounts, unexpressed)
}

/// `accounts.sh` for a policy read from `file`.
pub fn emit(policy: &Policy, file: &str) -> Accounts {
    let file = crate::lua::comment(file);
    let (accounts, mut unexpressed) = accounts(policy);
    let (qos, not) = qos(policy);
    unexpressed.extend(not);
    let mut script = format!(
        "#!/bin/sh\n# The queue tree of policy {} as Slurm accounts, generated by `gpolc slurm emit` from\n# {file}. Do not edit: regenerate. `-i` answers every prompt; run with slurmdbd up.\n# `gpolc slurm plan --accounts` shows how the live tree differs, `apply --accounts` mends it.\n",
        policy.name
    );
    if unexpressed.is_empty() {
        script.push_str("# Slurm's associations express the whole tree.\n");
    } else {
        script.push_str("# Slurm's associations cannot express (`gpolc slurm run` enforces them):\n");
        for u in &unexpressed {
            script.push_str(&format!("#   {u}\n"));
        }
    }
    // Slurm counts a GRES in GrpTRES only when slurm.conf names it.
    let mut gres: Vec<&str> =
        (accounts.iter().flat_map(|a| &a.limits)).map(|(k, _)| k.as_str()).filter(|k| k.starts_with("gres/")).collect();
    gres.sort_unstable();
    gres.dedup();
    if !gres.is_empty() {
        script.push_str(&format!("# The limits count GRES: slurm.conf needs AccountingStorageTRES={} (sacctmgr refuses\n# a GRES that Slurm does not count).\n", gres.join(",")));
    }
    if !qos.is_empty() {
        script.push_str(
            "# The priority classes as QOS (a job's QOS names its class): grant them to the accounts\n# that may use them as the site does (sacctmgr modify account … set QOS+=…).\n",
        );
    }
    script.push_str(
        "# Each QOS and account is added when missing and set when present (sacctmgr refuses to\n# add what exists, and every Slurm has QOS `normal`): running this again changes nothing.\n",
    );
    script.push_str("set -e\n");
    script.push_str(EXISTS);
    for q in &qos {
        script.push_str(&qos_line(q));
    }
    for a in &accounts {
        script.push_str(&account_line(a));
    }
    Accounts { script, unexpressed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpol_compiler::load::Checked;

    fn policy(text: &str) -> Policy {
        Checked::from_text("t.gpol", text).into_policy().unwrap_or_else(|_| panic!("checks")).policy
    }

    #[test]
    fn queues_become_accounts_with_shares_and_limits() {
        let p = policy(
            "policy t\nqueue org {\n  queue a { weight 2; limit 16 gpu, 64 cpu, 256GiB; guarantee 8 gpu }\n  queue b { weight 1; limit 4 gpu(h100) }\n}\n",
        );
        let a = emit(&p, "t.gpol");
        assert!(a.script.contains("sacctmgr -i add account org Parent=root Fairshare=1"), "{}", a.script);
        assert!(
            a.script.contains("add account a Parent=org Fairshare=2 'Description=gpol queue a' GrpTRES="),
            "{}",
            a.script
        );
        assert!(a.script.contains("gres/gpu=16"), "{}", a.script);
        assert!(a.script.contains("mem=262144"), "{}", a.script);
        assert!(a.script.contains("GrpTRES=gres/gpu:h100=4"), "{}", a.script);
        assert!(
            a.unexpressed.iter().any(|u| u.contains("queue a: a guarantee") && u.contains("8 gpu")),
            "{:?}",
            a.unexpressed
        );
        // Set when it exists already: a second run changes nothing.
        assert!(
            a.script
                .contains("if account_exists a; then sacctmgr -i modify account where name=a set Fairshare=2 GrpTRES="),
            "{}",
            a.script
        );
        // Parents come before their children.
        let (org, child) =
            (a.script.find("account org ").unwrap_or(usize::MAX), a.script.find("account a ").unwrap_or(0));
        assert!(org < child);
    }

    #[test]
    fn a_borrow_limit_caps_the_account_at_guarantee_plus_borrowing() {
        let p = policy(
            "policy t\nqueue org {\n  queue a { guarantee 8 gpu, 1TiB; borrow_limit 4 gpu; limit 16 gpu }\n  queue b { guarantee 2 gpu }\n}\n",
        );
        let a = emit(&p, "t.gpol");
        assert!(
            a.script
                .contains("add account a Parent=org Fairshare=1 'Description=gpol queue a' GrpTRES=gres/gpu=12; fi\n"),
            "{}",
            a.script
        );
        assert!(a.unexpressed.iter().any(|u| u.contains("8 gpu, 1TiB")), "{:?}", a.unexpressed);
    }

    #[test]
    fn quota_windows_are_named_and_the_amounts_without_one_emitted() {
        let p = policy(
            "policy t\nqueue org {\n  queue a { guarantee 8 gpu; limit 8 gpu; limit 16 gpu on weekends }\n  queue b { guarantee 2 gpu }\n}\n",
        );
        let a = emit(&p, "t.gpol");
        assert!(
            a.script
                .contains("add account a Parent=org Fairshare=1 'Description=gpol queue a' GrpTRES=gres/gpu=8; fi\n"),
            "{}",
            a.script
        );
        assert!(
            a.unexpressed.iter().any(|u| u.starts_with(
                "queue a: its limit on weekends (the association holds the amounts in force with no window open; \
                 `gpolc slurm run --accounts` changes it"
            )),
            "{:?}",
            a.unexpressed
        );
        // The loop keeps the associations at the amounts in force: 16 on Saturday, 8 on Monday.
        let limit = |minute: u16| {
            let (accounts, _) = accounts_at(&p, Some(minute));
            accounts.into_iter().find(|a| a.name == "a").map(|a| a.limits)
        };
        assert_eq!(limit(5 * 1440 + 600), Some(vec![("gres/gpu".to_string(), 16)]));
        assert_eq!(limit(600), Some(vec![("gres/gpu".to_string(), 8)]));
    }

    #[test]
    fn fractional_weights_become_hundreds_of_shares() {
        let p = policy("policy t\nqueue org {\n  queue a { weight 0.5 }\n  queue b { weight 1.5 }\n}\n");
        let a = emit(&p, "t.gpol");
        assert!(a.script.contains("add account a Parent=org Fairshare=50 "), "{}", a.script);
        assert!(a.script.contains("add account b Parent=org Fairshare=150 "), "{}", a.script);
    }
}
