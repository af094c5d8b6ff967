//! Rules matched across versions: by kind and name, then — for the rules left over — by
//! canonical form, so that a rule renamed without changing what it computes is reported
//! as a rename, and the reasons that name it compare equal.

use crate::canon::{self, Names};
use gpol_compiler::ir::{Program, Rule, VictimKind};

/// A rule that only changed its name.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Rename {
    /// `admit`, `filter`, `score`, `card_score`, `preempt`, `reclaim`, `borrow`, `protect`.
    pub kind: String,
    pub old: String,
    pub new: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Renames {
    pub list: Vec<Rename>,
}

/// A named rule of some kind, with what identifies its behaviour.
struct Named {
    kind: String,
    name: String,
    form: Option<String>,
}

fn named(names: &Names<'_>) -> Vec<Named> {
    let p: &Program = names.program;
    let mut out = Vec::new();
    let rule = |r: &Rule, extra: String| Named {
        kind: r.kind.keyword().to_string(),
        name: r.name.clone(),
        form: canon::form(&r.body.node, names).map(|f| format!("{extra}{f}")),
    };
    for r in p.admit.iter().chain(&p.filters) {
        out.push(rule(r, String::new()));
    }
    for r in p.scores.iter().chain(&p.card_scores) {
        out.push(rule(r, format!("tier {:?} weight {:?} ", r.tier, r.weight)));
    }
    for v in &p.victims {
        let kind = match v.kind {
            VictimKind::Preempt => "preempt",
            VictimKind::Reclaim => "reclaim",
            VictimKind::Borrow => "borrow",
            VictimKind::Protect => "protect",
        };
        let when = canon::form(&v.when.node, names);
        let cost = v.cost.as_ref().map(|c| canon::form(&c.node, names));
        out.push(Named { kind: kind.into(), name: v.name.clone(), form: when.map(|w| format!("{w} cost {cost:?}")) });
    }
    out
}

/// The policy's own functions (not its libraries') renamed: a function's body refers to
/// its parameters by position and spans compare equal, so a renamed function's checked
/// form is unchanged.
fn function_renames(old: &Names<'_>, new: &Names<'_>) -> Vec<Rename> {
    fn own<'p>(n: &Names<'p>) -> Vec<&'p gpol_compiler::hir::Function> {
        n.policy.functions.iter().filter(|f| !f.name.contains('.')).collect()
    }
    let (a, b) = (own(old), own(new));
    let gone: Vec<_> = a.iter().filter(|f| !b.iter().any(|g| g.name == f.name)).collect();
    let mut added: Vec<_> = b.iter().filter(|g| !a.iter().any(|f| f.name == g.name)).collect();
    let mut out = Vec::new();
    for f in gone {
        let same = |g: &&&gpol_compiler::hir::Function| {
            g.ret == f.ret && g.body == f.body && g.params.iter().map(|p| &p.1).eq(f.params.iter().map(|p| &p.1))
        };
        if let Some(at) = added.iter().position(same) {
            let g = added.remove(at);
            out.push(Rename { kind: "fn".into(), old: f.name.clone(), new: g.name.clone() });
        }
    }
    out
}

impl Renames {
    /// The renames between two versions.
    pub fn of(old_names: &Names<'_>, new_names: &Names<'_>) -> Renames {
        let (old, new) = (named(old_names), named(new_names));
        let has = |rules: &[Named], r: &Named| rules.iter().any(|x| x.kind == r.kind && x.name == r.name);
        let gone: Vec<&Named> = old.iter().filter(|r| !has(&new, r)).collect();
        let mut added: Vec<&Named> = new.iter().filter(|r| !has(&old, r)).collect();
        let mut list = Vec::new();
        for o in gone {
            let Some(form) = &o.form else { continue };
            if let Some(at) = added.iter().position(|n| n.kind == o.kind && n.form.as_ref() == Some(form)) {
                let n = added.remove(at);
                list.push(Rename { kind: o.kind.clone(), old: o.name.clone(), new: n.name.clone() });
            }
        }
        list.extend(function_renames(old_names, new_names));
        Renames { list }
    }

    /// The renames the other way round (new name to old).
    pub fn inverse(&self) -> Renames {
        let list = self.list.iter().map(|r| Rename { kind: r.kind.clone(), old: r.new.clone(), new: r.old.clone() });
        Renames { list: list.collect() }
    }

    /// The new name of an old rule that was renamed (functions are another namespace).
    pub fn old_to_new(&self, old: &str) -> Option<&str> {
        self.list.iter().find(|r| r.old == old && r.kind != "fn").map(|r| r.new.as_str())
    }
}
