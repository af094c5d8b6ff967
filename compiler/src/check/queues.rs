//! The quota tree: structure, amounts, and the custom attributes queues carry.

use super::Checker;
use super::expr::Scope;
use crate::diag::{Code, Diagnostic, snippet};
use crate::hir::{self, Quota, QuotaKindKey, Resource, Value};
use crate::schema::Context;
use crate::source::Span;
use crate::syntax::{self as ast, Item, QueueStmt, QuotaKind};
use crate::types::Ty;
use crate::units::Dim;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Every queue declaration in the file, depth first, with its parent's index.
fn walk(parsed: &ast::File) -> Vec<(&ast::QueueDecl, Option<usize>)> {
    fn go<'a>(q: &'a ast::QueueDecl, parent: Option<usize>, out: &mut Vec<(&'a ast::QueueDecl, Option<usize>)>) {
        let me = out.len();
        out.push((q, parent));
        for s in &q.stmts {
            if let QueueStmt::Queue(child) = s {
                go(child, Some(me), out);
            }
        }
    }
    let mut out = Vec::new();
    for item in &parsed.items {
        if let Item::Queue(q) = item {
            go(q, None, &mut out);
        }
    }
    out
}

impl Checker<'_> {
    /// Collects queue names and attribute types before any rule is checked, so rules can
    /// refer to both.
    pub(super) fn collect_queue_facts(&mut self, m: usize, parsed: &ast::File) {
        let decls = walk(parsed);
        if decls.is_empty() {
            self.queue_names.push("default".into());
        }
        for (q, _) in decls {
            self.queue_names.push(q.name.name.clone());
            for s in &q.stmts {
                let QueueStmt::Attr { name, value, .. } = s else {
                    continue;
                };
                let mut scope = Scope::new(m, Context::Const);
                let e = self.expr(&mut scope, value);
                if e.ty.is_error() {
                    continue;
                }
                let Some(v) = self.fold_const(&e, "an attribute value") else {
                    continue;
                };
                let next = u16::try_from(self.attrs.len()).unwrap_or(u16::MAX);
                let (idx, ty, first) =
                    self.attrs.entry(name.name.clone()).or_insert((next, e.ty.clone(), name.span)).clone();
                if ty != e.ty {
                    self.err(
                        Diagnostic::new(
                            Code::BadAttr,
                            value.span,
                            format!("attribute `{}` has different types on different queues", name.name),
                        )
                        .label(format!("this is {}", e.ty))
                        .with_secondary(first, format!("first defined as {ty}"))
                        .help("give the attribute the same type everywhere"),
                    );
                    continue;
                }
                self.attr_values_declared.push((q.name.name.clone(), idx, v, name.span));
            }
        }
    }

    pub(super) fn check_queues(&mut self, m: usize, parsed: &ast::File, p: &mut hir::Policy) {
        let decls = walk(parsed);
        // Each queue's children in declaration order, built once: counting siblings
        // per queue would be quadratic in a wide tree.
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); decls.len()];
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for (i, (q, parent)) in decls.iter().enumerate() {
            if let Some(first) = seen.get(q.name.name.as_str()) {
                self.err(
                    super::duplicate("queue", &q.name, *first)
                        .help("queue names are global: every queue in the tree needs its own name"),
                );
            }
            seen.insert(&q.name.name, q.name.span);
            if let Some(parent) = parent {
                children[*parent].push(i);
            }
        }
        let roots = decls.iter().filter(|(_, p)| p.is_none()).count();
        for (i, (q, parent)) in decls.iter().enumerate() {
            let mut queue = hir::Queue {
                name: q.name.name.clone(),
                parent: *parent,
                children: children[i].clone(),
                quotas: BTreeMap::new(),
                unset_guarantee: BTreeSet::new(),
                fairshare_parent: false,
                weight: 1.0,
                usage_half_life: None,
                queueing: None,
                attrs: BTreeMap::new(),
                span: q.span,
            };
            let siblings = match parent {
                Some(pi) => children[*pi].len() - 1,
                None => roots - 1,
            };
            for s in &q.stmts {
                match s {
                    QueueStmt::Queue(_) => {}
                    QueueStmt::Quota { kind, values, span } => {
                        if matches!(kind, QuotaKind::BorrowLimit | QuotaKind::LendLimit)
                            && (parent.is_none() || siblings == 0)
                        {
                            let why = if parent.is_none() {
                                "the root queue has no cohort"
                            } else {
                                "an only child has no sibling"
                            };
                            self.err(
                                Diagnostic::new(Code::NoCohort, *span, format!("`{}` has no effect on queue `{}`", kind.keyword(), q.name.name))
                                    .label(why)
                                    .help("borrowing happens between queues that share a parent; move the limit to such a queue"),
                            );
                        }
                        let quota = self.quota(m, values);
                        let slot = queue.quotas.entry(QuotaKindKey(*kind)).or_default();
                        for (r, v) in quota {
                            slot.insert(r, v);
                        }
                    }
                    QueueStmt::Weight(e, _) => {
                        if let Some(w) = self.const_number(m, e, &Ty::NUMBER, "a queue weight") {
                            if w < 0.0 {
                                self.err(
                                    negative(e.span, "a weight", &w.to_string())
                                        .help("a weight of 0 gives the queue no share of the surplus"),
                                );
                            } else {
                                queue.weight = w;
                            }
                        }
                    }
                    QueueStmt::HalfLife(e, _) => {
                        if let Some(h) = self.const_number(m, e, &Ty::Num(Dim::TIME), "`usage_half_life`") {
                            if h <= 0.0 {
                                self.err(
                                    Diagnostic::new(Code::NegativeQuantity, e.span, "a half-life must be positive")
                                        .label("not a positive duration")
                                        .help("omit `usage_half_life` to keep usage undecayed"),
                                );
                            } else {
                                queue.usage_half_life = Some(h);
                            }
                        }
                    }
                    QueueStmt::Attr { .. } => {}
                    QueueStmt::Queueing(mode, _) => {
                        let e = ast::Expr { kind: ast::ExprKind::Name(mode.clone()), span: mode.span };
                        queue.queueing = self.queueing_mode(&e);
                    }
                    QueueStmt::Fairshare(mode, _) => {
                        if mode.name == "parent" {
                            queue.fairshare_parent = true;
                        } else {
                            self.err(
                                Diagnostic::new(Code::BadSetting, mode.span, "`fairshare` takes `parent`")
                                    .label("not a fair-share mode")
                                    .help("`fairshare parent` makes the queue transparent to Slurm's Fair Tree: its users rank as if they sat in its parent; a queue's shares are its `weight`"),
                            );
                        }
                    }
                }
            }
            for (qname, idx, v, _) in &self.attr_values_declared {
                if *qname == queue.name {
                    queue.attrs.insert(*idx, v.clone());
                }
            }
            p.queues.push(queue);
        }
        self.check_guarantees_fit(&decls, p);
        self.check_limits(&decls, p);
        if p.queues.is_empty() {
            // A policy without a tree has one leaf queue, `default`, that takes every job.
            p.queues.push(hir::Queue {
                name: "default".into(),
                parent: None,
                children: Vec::new(),
                quotas: BTreeMap::new(),
                unset_guarantee: BTreeSet::new(),
                fairshare_parent: false,
                weight: 1.0,
                usage_half_life: None,
                queueing: None,
                attrs: BTreeMap::new(),
                span: Span::default(),
            });
        }
    }

    /// Children's guarantees must fit in the parent's; an unset parent guarantee becomes
    /// the sum of its children's (decision D7). Children are done before parents.
    fn check_guarantees_fit(&mut self, decls: &[(&ast::QueueDecl, Option<usize>)], p: &mut hir::Policy) {
        for i in (0..p.queues.len()).rev() {
            let children = p.queues[i].children.clone();
            if children.is_empty() {
                continue;
            }
            let mut sums: Quota = BTreeMap::new();
            for &c in &children {
                if let Some(g) = p.queues[c].quota(QuotaKind::Guarantee) {
                    for (r, v) in g {
                        *sums.entry(r.clone()).or_insert(0.0) += v;
                    }
                }
            }
            let queue = &mut p.queues[i];
            let own = queue.quotas.entry(QuotaKindKey(QuotaKind::Guarantee)).or_default();
            let mut over = Vec::new();
            for (r, sum) in &sums {
                match own.get(r) {
                    Some(g) if sum > g => over.push((r.clone(), *g, *sum)),
                    Some(_) => {}
                    None => {
                        own.insert(r.clone(), *sum);
                        queue.unset_guarantee.insert(r.clone());
                    }
                }
            }
            for (r, g, sum) in over {
                let q = decls[i].0;
                let at = quota_span(q, QuotaKind::Guarantee).unwrap_or(q.name.span);
                let mut d = Diagnostic::new(
                    Code::GuaranteeExceedsParent,
                    at,
                    format!(
                        "the children of `{}` are guaranteed {} but it has only {}",
                        q.name.name,
                        show(&r, sum),
                        show(&r, g)
                    ),
                )
                .label(format!("guarantee {}", show(&r, g)))
                .help("raise this guarantee or lower the children's");
                for &c in &children {
                    if let Some(v) = p.queues[c].quota(QuotaKind::Guarantee).and_then(|g| g.get(&r)) {
                        let cs = quota_span(decls[c].0, QuotaKind::Guarantee).unwrap_or(decls[c].0.name.span);
                        d = d.with_secondary(cs, format!("`{}` is guaranteed {}", decls[c].0.name.name, show(&r, *v)));
                    }
                }
                self.err(d);
            }
        }
    }

    /// After defaults are filled in: every limit is at least the guarantee, and a
    /// per-model amount never exceeds the same queue's amount for GPUs of any model.
    fn check_limits(&mut self, decls: &[(&ast::QueueDecl, Option<usize>)], p: &hir::Policy) {
        for (i, queue) in p.queues.iter().enumerate() {
            let q = decls[i].0;
            let guarantee_at = quota_span(q, QuotaKind::Guarantee);
            if let (Some(g), Some(l)) = (queue.quota(QuotaKind::Guarantee), queue.quota(QuotaKind::Limit)) {
                for (r, gv) in g {
                    let Some(lv) = l.get(r) else { continue };
                    if lv >= gv {
                        continue;
                    }
                    let at = quota_span(q, QuotaKind::Limit).unwrap_or(q.name.span);
                    let mut d = Diagnostic::new(
                        Code::LimitBelowGuarantee,
                        at,
                        format!("queue `{}`: {r} limit is below its guarantee", q.name.name),
                    )
                    .label(format!("limit {}", show(r, *lv)))
                    .help("a limit must be at least the guarantee");
                    d = match guarantee_at {
                        Some(gs) => d.with_secondary(gs, format!("guarantee {}", show(r, *gv))),
                        None => d.with_secondary(
                            q.name.span,
                            format!("guarantee {} (the sum of its children's)", show(r, *gv)),
                        ),
                    };
                    self.err(d);
                }
            }
            for kind in QuotaKind::ALL {
                // Only amounts written on this queue: a defaulted parent sums its
                // children's per resource, and a child may be guaranteed one model only.
                if quota_span(q, kind).is_none() {
                    continue;
                }
                let Some(quota) = queue.quota(kind) else { continue };
                let Some(any) = quota.get(&Resource::Gpu(None)) else { continue };
                for (r, v) in quota {
                    if matches!(r, Resource::Gpu(Some(_))) && v > any {
                        let at = quota_span(q, kind).unwrap_or(q.name.span);
                        self.err(
                            Diagnostic::new(Code::BadQuota, at, format!("queue `{}`: {} {r} is more than its {} gpu", q.name.name, kind.keyword(), show(&Resource::Gpu(None), *any).trim_end_matches(" gpu")))
                                .label(format!("{} of one model, {} of any", show(r, *v), show(&Resource::Gpu(None), *any)))
                                .help("an amount for one GPU model is part of the amount for any model, so it cannot be larger"),
                        );
                    }
                }
            }
        }
    }

    /// Reads the amounts of one quota statement: `64 gpu, 256 cpu, 1TiB, 32 gpu(h100)`.
    fn quota(&mut self, m: usize, values: &[ast::Expr]) -> Quota {
        let mut out: Quota = BTreeMap::new();
        let mut spans: HashMap<Resource, Span> = HashMap::new();
        for v in values {
            let (resource, amount) = match &v.kind {
                ast::ExprKind::Quantity { number, unit, flavour: Some(model) } => {
                    if unit.dim() != Dim::GPU {
                        self.err(
                            Diagnostic::new(Code::BadFlavour, model.span, "only GPU quotas can name a model")
                                .label(format!("`{}` is not a gpu amount", unit.symbol()))
                                .help("write `N gpu(MODEL)`"),
                        );
                        continue;
                    }
                    (Resource::Gpu(Some(model.name.clone())), unit.to_base(number.value))
                }
                _ => {
                    let mut scope = Scope::new(m, Context::Const);
                    let e = self.expr(&mut scope, v);
                    if e.ty.is_error() {
                        continue;
                    }
                    let resource = match e.ty.dim() {
                        Some(d) if d == Dim::GPU => Resource::Gpu(None),
                        Some(d) if d == Dim::CPU => Resource::Cpu,
                        Some(d) if d == Dim::BYTES => Resource::Mem,
                        _ => {
                            self.err(
                                Diagnostic::new(
                                    Code::BadQuota,
                                    v.span,
                                    format!("a quota amount must be gpu, cpu or memory, found {}", e.ty),
                                )
                                .label("not a resource amount")
                                .help("write a unit: `8 gpu`, `64 cpu`, `512GiB`"),
                            );
                            continue;
                        }
                    };
                    let Some(n) = self.fold_const(&e, "a quota amount").and_then(|x| x.as_num()) else {
                        continue;
                    };
                    (resource, n)
                }
            };
            if amount < 0.0 {
                self.err(negative(v.span, "a quota", &show(&resource, amount)));
                continue;
            }
            if let Some(first) = spans.get(&resource) {
                self.err(
                    Diagnostic::new(Code::BadQuota, v.span, format!("{resource} appears twice in one quota"))
                        .label("second amount")
                        .with_secondary(*first, "first amount")
                        .help("give each resource once per statement"),
                );
                continue;
            }
            spans.insert(resource.clone(), v.span);
            out.insert(resource, amount);
        }
        out
    }

    /// Every attribute a rule reads must have a value on every leaf queue, by itself or
    /// inherited; fills `attr_values` with the resolved values of every queue.
    pub(super) fn check_attr_coverage(&mut self, p: &mut hir::Policy) {
        let mut attrs: Vec<(String, u16, Ty)> =
            self.attrs.iter().map(|(n, (i, t, _))| (n.clone(), *i, t.clone())).collect();
        attrs.sort_by_key(|a| a.1);
        p.attrs = attrs.iter().map(|(n, _, t)| hir::Attr { name: n.clone(), ty: t.clone() }).collect();
        let resolved: Vec<Vec<Option<Value>>> = (0..p.queues.len())
            .map(|q| {
                attrs
                    .iter()
                    .map(|(_, idx, _)| {
                        let mut cur = Some(q);
                        while let Some(c) = cur {
                            if let Some(v) = p.queues[c].attrs.get(idx) {
                                return Some(v.clone());
                            }
                            cur = p.queues[c].parent;
                        }
                        None
                    })
                    .collect()
            })
            .collect();
        let mut reads: Vec<(String, Span)> = self.attrs_read.iter().map(|(n, s)| (n.clone(), *s)).collect();
        reads.sort_by_key(|(_, s)| s.start);
        for (name, at) in reads {
            let Some(&(idx, _, _)) = self.attrs.get(&name) else {
                continue;
            };
            let missing: Vec<&str> = p
                .queues
                .iter()
                .enumerate()
                .filter(|(qi, q)| q.children.is_empty() && resolved[*qi][usize::from(idx)].is_none())
                .map(|(_, q)| q.name.as_str())
                .collect();
            if !missing.is_empty() {
                let root = p.queues.iter().find(|q| q.parent.is_none()).map_or("the root", |q| q.name.as_str());
                self.err(
                    Diagnostic::new(
                        Code::BadAttr,
                        at,
                        format!("attribute `{name}` is undefined for queue `{}`", snippet(missing[0])),
                    )
                    .label(format!(
                        "read here; {} leaf queue{} lack{} it",
                        missing.len(),
                        if missing.len() == 1 { "" } else { "s" },
                        if missing.len() == 1 { "s" } else { "" }
                    ))
                    .help(format!("define a default on `{root}`: `attr {name} = …`")),
                );
            }
        }
        p.attr_values = resolved;
    }
}

fn quota_span(q: &ast::QueueDecl, kind: QuotaKind) -> Option<Span> {
    q.stmts.iter().find_map(|s| match s {
        QueueStmt::Quota { kind: k, span, .. } if *k == kind => Some(*span),
        _ => None,
    })
}

fn negative(span: Span, what: &str, v: &str) -> Diagnostic {
    Diagnostic::new(Code::NegativeQuantity, span, format!("{what} cannot be negative"))
        .label(format!("this is {v}"))
        .help("use 0 for none")
}

fn show(r: &Resource, v: f64) -> String {
    match r {
        Resource::Gpu(_) => format!("{v} {r}"),
        Resource::Cpu => format!("{v} cpu"),
        Resource::Mem => {
            let gib = v / (1024.0 * 1024.0 * 1024.0);
            if gib >= 1.0 { format!("{gib}GiB") } else { format!("{v}B") }
        }
    }
}
