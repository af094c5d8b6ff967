//! The quota tree: structure, amounts, and the custom attributes queues carry.

use super::Checker;
use super::expr::Scope;
use crate::diag::{Code, Diagnostic, snippet};
use crate::hir::{self, Quota, QuotaKindKey, Resource, Value};
use crate::kinds::QuotaKind;
use crate::schema::Context;
use crate::source::Span;
use crate::syntax::{self as ast, Item, QueueStmt};
use crate::types::Ty;
use crate::units::Dim;
use crate::window::{self, Window};
use crate::{fuzzy, limits};
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
        let mut windows_seen = 0;
        for (i, (q, parent)) in decls.iter().enumerate() {
            let mut queue = hir::Queue {
                name: q.name.name.clone(),
                parent: *parent,
                children: children[i].clone(),
                quotas: BTreeMap::new(),
                windows: Vec::new(),
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
                    QueueStmt::Quota { kind, values, window, span } => {
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
                        match window {
                            None => {
                                let slot = queue.quotas.entry(QuotaKindKey(*kind)).or_default();
                                slot.extend(quota);
                            }
                            Some(w) => {
                                if let Some(window) = self.window(w, windows_seen) {
                                    windows_seen += 1;
                                    queue.windows.push(hir::QuotaWindow {
                                        kind: *kind,
                                        amounts: quota,
                                        window,
                                        span: *span,
                                    });
                                }
                            }
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
        self.check_amounts(&decls, p);
        if p.queues.is_empty() {
            // A policy without a tree has one leaf queue, `default`, that takes every job.
            p.queues.push(hir::Queue {
                name: "default".into(),
                parent: None,
                children: Vec::new(),
                quotas: BTreeMap::new(),
                windows: Vec::new(),
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

    /// Fills in derived amounts (an unset parent guarantee is its children's sum, decision
    /// D7), then checks the amounts in force in every phase of the week: children's
    /// guarantees fit in the parent's, limits are at least guarantees, a model's amount
    /// is within the amount for any model. A problem in only some phases names them.
    fn check_amounts(&mut self, decls: &[(&ast::QueueDecl, Option<usize>)], p: &mut hir::Policy) {
        let guarantee = QuotaKindKey(QuotaKind::Guarantee);
        for i in (0..p.queues.len()).rev() {
            let written: BTreeSet<Resource> =
                p.queues[i].quota(QuotaKind::Guarantee).map(|g| g.keys().cloned().collect()).unwrap_or_default();
            let mut given = BTreeSet::new();
            for &c in &p.queues[i].children {
                let child = &p.queues[c];
                given.extend(child.quota(QuotaKind::Guarantee).into_iter().flat_map(|g| g.keys().cloned()));
                given.extend(child.unset_guarantee.iter().cloned());
                given.extend(
                    child
                        .windows
                        .iter()
                        .filter(|w| w.kind == QuotaKind::Guarantee)
                        .flat_map(|w| w.amounts.keys().cloned()),
                );
            }
            p.queues[i].unset_guarantee = given.difference(&written).cloned().collect();
        }
        let base = p.quotas_at(None);
        for (q, quotas) in p.queues.iter_mut().zip(base) {
            q.quotas = quotas;
            if !q.children.is_empty() {
                q.quotas.entry(guarantee).or_default();
            }
        }
        let edges = p.quota_edges();
        let phases: Vec<Option<u16>> =
            if edges.is_empty() { vec![None] } else { edges.iter().map(|&e| Some(e)).collect() };
        // Each problem once: with the phases it appears in, unless it appears in all.
        let mut found: Vec<(Diagnostic, Vec<u16>)> = Vec::new();
        for &phase in &phases {
            let quotas = p.quotas_at(phase);
            let mut here = self.guarantees_fit(decls, p, &quotas, phase);
            here.extend(limits_hold(decls, p, &quotas, phase));
            for d in here {
                let same = |(f, _): &&mut (Diagnostic, Vec<u16>)| {
                    f.code == d.code && f.message == d.message && f.primary.span == d.primary.span
                };
                match found.iter_mut().find(same) {
                    Some((_, seen)) => seen.extend(phase),
                    None => found.push((d, phase.into_iter().collect())),
                }
            }
        }
        for (mut d, seen) in found {
            if seen.len() < phases.len() {
                let stretches = window::stretches(&edges, &seen);
                if let Some(&(start, end)) = stretches.first() {
                    let mut when = window::span_text(start, end);
                    if stretches.len() > 1 {
                        when.push_str(&format!(" (and {} more times a week)", stretches.len() - 1));
                    }
                    d.message = format!("{when}: {}", d.message);
                }
            }
            self.err(d);
        }
    }

    /// Children's guarantees fit in their parent's, with the amounts in force at `phase`.
    fn guarantees_fit(
        &self,
        decls: &[(&ast::QueueDecl, Option<usize>)],
        p: &hir::Policy,
        quotas: &[hir::Quotas],
        phase: Option<u16>,
    ) -> Vec<Diagnostic> {
        let guarantee = QuotaKindKey(QuotaKind::Guarantee);
        let mut out = Vec::new();
        for (i, queue) in p.queues.iter().enumerate() {
            let Some(own) = quotas[i].get(&guarantee) else { continue };
            let mut sums: Quota = BTreeMap::new();
            for &c in &queue.children {
                for (r, v) in quotas[c].get(&guarantee).into_iter().flatten() {
                    *sums.entry(r.clone()).or_insert(0.0) += v;
                }
            }
            for (r, sum) in &sums {
                let Some(&g) = own.get(r) else { continue };
                if *sum <= g {
                    continue;
                }
                let q = decls[i].0;
                let at = amount_span(q, queue, QuotaKind::Guarantee, r, phase).unwrap_or(q.name.span);
                let mut d = Diagnostic::new(
                    Code::GuaranteeExceedsParent,
                    at,
                    format!(
                        "the children of `{}` are guaranteed {} but it has only {}",
                        q.name.name,
                        show(r, *sum),
                        show(r, g)
                    ),
                )
                .label(format!("guarantee {}", show(r, g)))
                .help("raise this guarantee or lower the children's");
                for &c in &queue.children {
                    if let Some(v) = quotas[c].get(&guarantee).and_then(|g| g.get(r)) {
                        let cq = decls[c].0;
                        let cs = amount_span(cq, &p.queues[c], QuotaKind::Guarantee, r, phase).unwrap_or(cq.name.span);
                        d = d.with_secondary(cs, format!("`{}` is guaranteed {}", cq.name.name, show(r, *v)));
                    }
                }
                out.push(d);
            }
        }
        out
    }

    /// Reads a quota statement's window; `None` after reporting why it is none.
    fn window(&mut self, w: &ast::Window, before: usize) -> Option<Window> {
        if before >= limits::MAX_QUOTA_WINDOWS {
            self.err(
                Diagnostic::new(Code::BadWindow, w.span, "too many quota windows")
                    .label(format!("a policy may have at most {} windowed quota statements", limits::MAX_QUOTA_WINDOWS))
                    .help("merge windows of the same amounts: `on mon, tue`, `on weekdays`"),
            );
            return None;
        }
        let mut ok = true;
        let mut minutes = |c: &ast::ClockTime, end: bool| {
            let max_hour = if end { 24 } else { 23 };
            if c.hour > max_hour || c.minute > 59 || (c.hour == 24 && c.minute > 0) {
                let d = Diagnostic::new(Code::BadWindow, c.span, "not a time of day")
                    .label(format!("{}:{:02} is no time on a 24-hour clock", c.hour, c.minute))
                    .help(if end { "write 00:00 to 24:00" } else { "write 00:00 to 23:59" });
                ok = false;
                return (0, Some(d));
            }
            ((c.hour * 60 + c.minute) as u16, None)
        };
        let (from, to, mut errs) = match &w.hours {
            Some((from, to)) => {
                let (f, e1) = minutes(from, false);
                let (t, e2) = minutes(to, true);
                (f, t, [e1, e2].into_iter().flatten().collect::<Vec<_>>())
            }
            None => (0, window::MINUTES_PER_DAY, Vec::new()),
        };
        let mut days = if w.days.is_empty() { 0b111_1111 } else { 0 };
        for d in &w.days {
            match window::days_named(&d.name) {
                Some(bits) => days |= bits,
                None => {
                    ok = false;
                    let sugg = fuzzy::suggest(&d.name, window::day_names());
                    errs.push(
                        Diagnostic::new(Code::BadWindow, d.span, format!("`{}` is not a day", snippet(&d.name)))
                            .label("not a day of the week")
                            .help(fuzzy::help(sugg, || {
                                "days are mon, tue, wed, thu, fri, sat, sun, weekdays and weekends".into()
                            })),
                    );
                }
            }
        }
        for e in errs {
            self.err(e);
        }
        if !ok {
            return None;
        }
        match Window::new(days, from, to) {
            Ok(window) => Some(window),
            Err(_) => {
                self.err(
                    Diagnostic::new(Code::BadWindow, w.span, "the window starts and ends at the same time")
                        .label("this window is empty")
                        .help("omit `from … to …` for whole days: `on sat, sun`"),
                );
                None
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

/// Every limit is at least the guarantee, and a per-model amount never exceeds the same
/// queue's amount for GPUs of any model, with the amounts in force at `phase`.
fn limits_hold(
    decls: &[(&ast::QueueDecl, Option<usize>)],
    p: &hir::Policy,
    quotas: &[hir::Quotas],
    phase: Option<u16>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, queue) in p.queues.iter().enumerate() {
        let q = decls[i].0;
        let get = |kind: QuotaKind| quotas[i].get(&QuotaKindKey(kind));
        if let (Some(g), Some(l)) = (get(QuotaKind::Guarantee), get(QuotaKind::Limit)) {
            for (r, gv) in g {
                let Some(lv) = l.get(r) else { continue };
                if lv >= gv {
                    continue;
                }
                let at = amount_span(q, queue, QuotaKind::Limit, r, phase).unwrap_or(q.name.span);
                let d = Diagnostic::new(
                    Code::LimitBelowGuarantee,
                    at,
                    format!("queue `{}`: {r} limit is below its guarantee", q.name.name),
                )
                .label(format!("limit {}", show(r, *lv)))
                .help("a limit must be at least the guarantee");
                out.push(match amount_span(q, queue, QuotaKind::Guarantee, r, phase) {
                    Some(gs) => d.with_secondary(gs, format!("guarantee {}", show(r, *gv))),
                    None => {
                        d.with_secondary(q.name.span, format!("guarantee {} (the sum of its children's)", show(r, *gv)))
                    }
                });
            }
        }
        for kind in QuotaKind::ALL {
            let Some(quota) = get(kind) else { continue };
            let Some(any) = quota.get(&Resource::Gpu(None)) else { continue };
            for (r, v) in quota {
                // Only amounts written on this queue: a defaulted parent sums its
                // children's per resource, and a child may be guaranteed one model only.
                // A derived model amount answers to where the amount for any model was written.
                let at = amount_span(q, queue, kind, r, phase)
                    .or_else(|| amount_span(q, queue, kind, &Resource::Gpu(None), phase));
                let Some(at) = at else { continue };
                if matches!(r, Resource::Gpu(Some(_))) && v > any {
                    out.push(
                        Diagnostic::new(
                            Code::BadQuota,
                            at,
                            format!(
                                "queue `{}`: {} {r} is more than its {} gpu",
                                q.name.name,
                                kind.keyword(),
                                show(&Resource::Gpu(None), *any).trim_end_matches(" gpu")
                            ),
                        )
                        .label(format!("{} of one model, {} of any", show(r, *v), show(&Resource::Gpu(None), *any)))
                        .help(
                            "an amount for one GPU model is part of the amount for any model, so it cannot be larger",
                        ),
                    );
                }
            }
        }
    }
    out
}

/// Where the amount of `kind` and resource `r` in force at `phase` was written: the
/// last open window's statement that sets it, else the statement without a window (`None`
/// for an amount derived from the children's).
fn amount_span(
    q: &ast::QueueDecl,
    queue: &hir::Queue,
    kind: QuotaKind,
    r: &Resource,
    phase: Option<u16>,
) -> Option<Span> {
    let open = queue
        .windows
        .iter()
        .rev()
        .find(|w| w.kind == kind && w.amounts.contains_key(r) && phase.is_some_and(|m| w.window.contains(m)));
    if let Some(w) = open {
        return Some(w.span);
    }
    if kind == QuotaKind::Guarantee && queue.unset_guarantee.contains(r) {
        return None;
    }
    q.stmts.iter().find_map(|s| match s {
        QueueStmt::Quota { kind: k, span, window: None, .. } if *k == kind => Some(*span),
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
