//! Name resolution, type checking with units, and the semantic checks of a policy.
//! Input: parsed files. Output: a [`hir::Policy`] (when there are no errors) and
//! diagnostics. Sub-modules: `expr` (expressions), `queues` (the quota tree),
//! `scenarios` (the scenarios of `test` blocks).
//!
//! Public for this crate's tests and benches, which check policies without lowering them
//! (the types and units, hostile input, the engines' benchmarks); other crates load
//! policies through [`crate::load`].

mod expr;
mod queues;
mod scenarios;

use crate::budget::over_budget;
use crate::diag::{Code, Diagnostic, snippet};
use crate::fold::{self, Folded};
use crate::fuzzy;
use crate::hir::{self, Value};
use crate::kinds::{Direction, GangKind, VictimKind};
use crate::limits::MAX_CONST_EVAL_STEPS;
use crate::parse;
use crate::schema::{Context, DEFAULT_LEVELS};
use crate::source::{FileId, SourceFile, SourceMap, Span};
use crate::stdlib;
use crate::syntax::{self as ast, Item};
use crate::types::Ty;
use expr::Scope;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

/// The result of checking one file.
#[derive(Debug)]
pub struct Checked {
    /// The checked policy; `None` when there were errors (or the file is a library), so
    /// that nothing downstream of a syntax or type error is lowered or costed.
    pub policy: Option<hir::Policy>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks the file `file` of `sources`; library modules it imports are added to `sources`.
pub fn check(sources: &mut SourceMap, file: FileId) -> Checked {
    let text = sources.get(file).text.clone();
    let (parsed, syntax_errors) = parse::parse_recovering(file, &text);
    let has_syntax_errors = !syntax_errors.is_empty();
    let bidi = bidi_controls(file, &text);
    let mut c = Checker {
        sources,
        errors: syntax_errors.len(),
        diags: Vec::new(),
        modules: Vec::new(),
        functions: Vec::new(),
        finished: HashMap::new(),
        levels: Vec::new(),
        attrs: HashMap::new(),
        attrs_read: HashMap::new(),
        queue_names: Vec::new(),
        attr_values_declared: Vec::new(),
    };
    let policy = c.check_root(file, &parsed);
    if has_syntax_errors {
        c.diags.retain(|d| !depends_on_other_declarations(d.code));
        c.diags.extend(syntax_errors);
    }
    c.diags.extend(bidi);
    crate::diag::sort(&mut c.diags);
    let has_errors = c.diags.iter().any(Diagnostic::is_error);
    Checked { policy: if has_errors { None } else { policy }, diagnostics: c.diags }
}

/// A loaded module: the policy (path `""`) or a library.
struct Module {
    path: String,
    consts: HashMap<String, ConstEntry>,
    fns: HashMap<String, usize>,
    /// Imported modules by the names they can be called through: full path and alias.
    imports: HashMap<String, usize>,
    uses: Vec<(ast::UseDecl, usize, bool)>,
}

struct ConstEntry {
    decl: ast::ConstDecl,
    state: ConstState,
    used: bool,
}

enum ConstState {
    Unchecked,
    InProgress,
    Done(Option<(Value, Ty)>),
}

/// A function slot in the global table, in the order functions were declared.
struct FnSlot {
    module: usize,
    decl: ast::FnDecl,
    sig: Option<FnSig>,
    /// Set while the body is being checked, to catch cycles through constants.
    checking: bool,
    /// Part of a reported recursion: calls type-check against the declared signature
    /// but yield an error value, so nothing downstream folds or cascades.
    recursive: bool,
    used: bool,
}

#[derive(Clone)]
struct FnSig {
    params: Vec<Ty>,
    ret: Ty,
}

pub(crate) struct Checker<'s> {
    sources: &'s mut SourceMap,
    diags: Vec<Diagnostic>,
    modules: Vec<Module>,
    functions: Vec<FnSlot>,
    /// Errors reported so far (warnings not counted).
    errors: usize,
    /// Checked function bodies by id, filled in call-graph order.
    finished: HashMap<usize, hir::Function>,
    levels: Vec<String>,
    /// Attributes declared anywhere in the queue tree, by name: (index, type, span).
    attrs: HashMap<String, (u16, Ty, Span)>,
    /// Attributes read by rules: name → first read.
    attrs_read: HashMap<String, Span>,
    /// Every queue name of the tree, for checking string comparisons with `queue.name`.
    queue_names: Vec<String>,
    /// `attr` statements: (queue, attribute index, value, span).
    attr_values_declared: Vec<(String, u16, Value, Span)>,
}

impl Checker<'_> {
    fn err(&mut self, d: Diagnostic) {
        if d.is_error() {
            self.errors += 1;
        }
        self.diags.push(d);
    }

    fn check_root(&mut self, file: FileId, parsed: &ast::File) -> Option<hir::Policy> {
        let name = match &parsed.header {
            Some(ast::Header::Policy(n)) => n.name.clone(),
            Some(ast::Header::Module(p)) => {
                // A library checked on its own: its functions and constants only.
                let m = self.load_module(p.dotted(), parsed);
                self.prepare_functions(m);
                self.check_module_bodies(m);
                self.lint_unused(m, true);
                return None;
            }
            None => {
                let at = parsed.items.first().map_or(Span::new(file, 0, 0), |i| i.span());
                self.err(
                    Diagnostic::new(
                        Code::MissingHeader,
                        Span::new(file, at.start as usize, at.start as usize),
                        "missing `policy` header",
                    )
                    .label("a policy starts with its name here")
                    .help("add `policy NAME` as the first line"),
                );
                "unnamed".to_string()
            }
        };
        self.levels = self.topology(parsed);
        let m = self.load_module(String::new(), parsed);
        self.prepare_functions(m);
        self.collect_queue_facts(m, parsed);
        self.check_module_bodies(m);
        let mut p = hir::Policy {
            name,
            functions: Vec::new(),
            queues: Vec::new(),
            attr_values: Vec::new(),
            attrs: Vec::new(),
            priority_classes: Vec::new(),
            levels: self.levels.clone(),
            settings: hir::Settings {
                queueing: hir::Queueing::BestEffort,
                reserve_after: None,
                billing: hir::Billing::default(),
                timezone: None,
            },
            rules: Vec::new(),
            queue_order: Vec::new(),
            job_order: Vec::new(),
            victim_order: Vec::new(),
            gang: Vec::new(),
            victims: Vec::new(),
            tests: Vec::new(),
        };
        self.check_queues(m, parsed, &mut p);
        self.check_items(m, parsed, &mut p);
        self.check_attr_coverage(&mut p);
        self.check_tests(m, parsed, &mut p);
        self.lint_unused(m, false);
        p.functions = self.finish_functions();
        Some(p)
    }

    fn topology(&mut self, parsed: &ast::File) -> Vec<String> {
        let mut decls = parsed.items.iter().filter_map(|i| match i {
            Item::Topology(t) => Some(t),
            _ => None,
        });
        let Some(first) = decls.next() else {
            return DEFAULT_LEVELS.iter().map(|s| s.to_string()).collect();
        };
        for again in decls {
            self.err(
                Diagnostic::new(Code::Duplicate, again.span, "topology declared twice")
                    .label("second declaration")
                    .with_secondary(first.span, "first declared here")
                    .help("list every level in one `topology` declaration"),
            );
        }
        let mut levels: Vec<String> = Vec::new();
        for l in &first.levels {
            if levels.contains(&l.name) {
                self.err(
                    Diagnostic::new(
                        Code::Duplicate,
                        l.span,
                        format!("topology level `{}` listed twice", snippet(&l.name)),
                    )
                    .label("repeated")
                    .help("list each level once, smallest first"),
                );
            } else if levels.len() >= 8 {
                self.err(
                    Diagnostic::new(Code::UnknownLevel, l.span, "too many topology levels")
                        .label("at most 8 levels")
                        .help("gpol supports eight topology levels; merge the finest ones"),
                );
            } else {
                levels.push(l.name.clone());
            }
        }
        levels
    }

    // ------------------------------------------------------------ modules

    /// Registers a module's constants, functions and imports (bodies are checked later).
    fn load_module(&mut self, path: String, parsed: &ast::File) -> usize {
        let idx = self.modules.len();
        self.modules.push(Module {
            path,
            consts: HashMap::new(),
            fns: HashMap::new(),
            imports: HashMap::new(),
            uses: Vec::new(),
        });
        let mut const_spans: HashMap<String, Span> = HashMap::new();
        let mut fn_spans: HashMap<String, Span> = HashMap::new();
        for item in &parsed.items {
            match item {
                Item::Const(c) => {
                    if let Some(first) = const_spans.get(&c.name.name) {
                        self.err(duplicate("constant", &c.name, *first));
                        continue;
                    }
                    const_spans.insert(c.name.name.clone(), c.name.span);
                    self.modules[idx].consts.insert(
                        c.name.name.clone(),
                        ConstEntry { decl: c.clone(), state: ConstState::Unchecked, used: false },
                    );
                }
                Item::Fn(f) => {
                    if let Some(first) = fn_spans.get(&f.name.name) {
                        self.err(duplicate("function", &f.name, *first));
                        continue;
                    }
                    fn_spans.insert(f.name.name.clone(), f.name.span);
                    let id = self.functions.len();
                    self.functions.push(FnSlot {
                        module: idx,
                        decl: f.clone(),
                        sig: None,
                        checking: false,
                        recursive: false,
                        used: false,
                    });
                    self.modules[idx].fns.insert(f.name.name.clone(), id);
                }
                Item::Use(u) => self.load_use(idx, u),
                other if !self.modules[idx].path.is_empty() => {
                    let span = other.span();
                    self.err(
                        Diagnostic::new(
                            Code::NotInModule,
                            keyword_span(self.sources, span),
                            "only `use`, `const` and `fn` belong in a library module",
                        )
                        .label("not allowed here")
                        .help("move it into a policy file that imports this module"),
                    );
                }
                _ => {}
            }
        }
        idx
    }

    fn load_use(&mut self, importer: usize, u: &ast::UseDecl) {
        let path = u.path.dotted();
        let target = match self.modules.iter().position(|m| m.path == path) {
            Some(i) => i,
            None => {
                let Some(text) = stdlib::source(&path) else {
                    let sugg = fuzzy::suggest(&path, stdlib::MODULES.iter().copied());
                    self.err(
                        Diagnostic::new(
                            Code::UnknownModule,
                            u.path.span,
                            format!("no module named `{}`", snippet(&path)),
                        )
                        .label("not found")
                        .help(fuzzy::help(sugg, || format!("the standard library has {}", stdlib::MODULES.join(", ")))),
                    );
                    return;
                };
                let file = self.sources.add(SourceFile::new(stdlib::file_name(&path), text));
                let parsed = match parse::parse(file, text) {
                    Ok(p) => p,
                    Err(d) => {
                        self.err(d);
                        return;
                    }
                };
                let m = self.load_module(path.clone(), &parsed);
                self.prepare_functions(m);
                self.check_module_bodies(m);
                m
            }
        };
        let alias = u
            .alias
            .as_ref()
            .map_or_else(|| u.path.segments.last().map(|s| s.name.clone()).unwrap_or_default(), |a| a.name.clone());
        let module = &mut self.modules[importer];
        module.imports.insert(path, target);
        module.imports.insert(alias, target);
        module.uses.push((u.clone(), target, false));
    }

    /// Checks the constants and functions of a module: functions in call-graph order
    /// (callees first), after refusing recursion.
    /// Checks the constants and functions of a module. Functions are checked callees
    /// first; a constant or attribute that calls a function checks it on demand.
    fn check_module_bodies(&mut self, m: usize) {
        let mut names: Vec<String> = self.modules[m].consts.keys().cloned().collect();
        names.sort();
        for n in names {
            self.const_value(m, &n);
        }
        let mut ids: Vec<usize> = self.modules[m].fns.values().copied().collect();
        ids.sort_unstable();
        let (graph, _) = self.call_graph(m, &ids);
        // Callees before callers; with recursion (already reported) declaration order.
        let order: Vec<usize> = match petgraph::algo::toposort(&graph, None) {
            Ok(o) => o.into_iter().rev().map(|n| graph[n]).collect(),
            Err(_) => ids,
        };
        for id in order {
            if self.functions[id].sig.is_none() {
                self.check_function(id);
            }
        }
    }

    fn call_graph(&self, m: usize, ids: &[usize]) -> (DiGraph<usize, ()>, HashMap<usize, NodeIndex>) {
        let mut graph: DiGraph<usize, ()> = DiGraph::new();
        let nodes: HashMap<usize, NodeIndex> = ids.iter().map(|&id| (id, graph.add_node(id))).collect();
        for &id in ids {
            let mut callees = Vec::new();
            calls_in(&self.functions[id].decl.body, &mut callees);
            for path in callees {
                if let [single] = path.segments.as_slice()
                    && let Some(&callee) = self.modules[m].fns.get(&single.name)
                {
                    graph.add_edge(nodes[&id], nodes[&callee], ());
                }
            }
        }
        (graph, nodes)
    }

    /// Refuses recursion (strongly connected components of the call graph) and gives
    /// recursive functions their declared signatures, before any body is checked.
    fn prepare_functions(&mut self, m: usize) {
        let mut ids: Vec<usize> = self.modules[m].fns.values().copied().collect();
        ids.sort_unstable();
        let (graph, _) = self.call_graph(m, &ids);
        for scc in petgraph::algo::tarjan_scc(&graph) {
            let is_cycle = scc.len() > 1 || scc.iter().any(|&n| graph.contains_edge(n, n));
            if !is_cycle {
                continue;
            }
            let mut members: Vec<usize> = scc.iter().map(|&n| graph[n]).collect();
            members.sort_unstable();
            let first = &self.functions[members[0]].decl;
            let cycle: Vec<String> =
                members.iter().map(|&i| format!("`{}`", self.functions[i].decl.name.name)).collect();
            let mut d = Diagnostic::new(
                Code::Recursion,
                first.name.span,
                format!("function `{}` is recursive", first.name.name),
            )
            .label(if members.len() == 1 {
                "calls itself".to_string()
            } else {
                format!("part of the cycle {}", cycle.join(" → "))
            })
            .help("gpol rules must terminate: rewrite the recursion as a comprehension over a list");
            for &i in &members[1..] {
                d = d.with_secondary(self.functions[i].decl.name.span, "also in the cycle");
            }
            self.err(d);
            for id in members {
                let sig = self.declared_sig(id).unwrap_or(FnSig { params: Vec::new(), ret: Ty::Error });
                let slot = &mut self.functions[id];
                slot.sig = Some(sig);
                // The members call each other; whether anything else does is moot.
                slot.used = true;
                slot.recursive = true;
            }
        }
    }

    /// Parameter and return types as declared (an unannotated return is inferred later).
    fn declared_sig(&mut self, id: usize) -> Option<FnSig> {
        let decl = self.functions[id].decl.clone();
        let params = decl.params.iter().map(|p| self.resolve_type(&p.ty)).collect();
        let ret = decl.ret.as_ref().map_or(Ty::Error, |t| self.resolve_type(t));
        Some(FnSig { params, ret })
    }

    fn check_function(&mut self, id: usize) {
        self.functions[id].checking = true;
        let decl = self.functions[id].decl.clone();
        let m = self.functions[id].module;
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for p in &decl.params {
            if let Some(first) = seen.get(p.name.name.as_str()) {
                self.err(duplicate("parameter", &p.name, *first));
            }
            seen.insert(&p.name.name, p.name.span);
        }
        let mut scope = Scope::new(m, Context::Function);
        let mut params = Vec::new();
        for p in &decl.params {
            let ty = self.resolve_type(&p.ty);
            let local = self.bind(&mut scope, &p.name, ty.clone(), false);
            params.push((local, ty));
        }
        let body = self.expr(&mut scope, &decl.body);
        self.pop_scope(&mut scope, 0);
        let ret = match &decl.ret {
            Some(t) => {
                let want = self.resolve_type(t);
                self.expect_type(&body, &want, "the function's declared return type");
                want
            }
            None => body.ty.clone(),
        };
        let sig = FnSig { params: params.iter().map(|(_, t)| t.clone()).collect(), ret: ret.clone() };
        self.functions[id].sig = Some(sig);
        self.functions[id].checking = false;
        let path = &self.modules[m].path;
        let name = if path.is_empty() { decl.name.name.clone() } else { format!("{path}.{}", decl.name.name) };
        self.finished.insert(id, hir::Function { name, params, ret, body, span: decl.span });
    }

    /// The checked functions, indexed by their ids (a function with errors keeps a stub
    /// body; the policy is discarded in that case anyway).
    fn finish_functions(&mut self) -> Vec<hir::Function> {
        (0..self.functions.len())
            .map(|id| {
                self.finished.remove(&id).unwrap_or_else(|| hir::Function {
                    name: self.functions[id].decl.name.name.clone(),
                    params: Vec::new(),
                    ret: Ty::Error,
                    body: hir::Expr { kind: hir::ExprKind::Error, ty: Ty::Error, span: self.functions[id].decl.span },
                    span: self.functions[id].decl.span,
                })
            })
            .collect()
    }

    /// The folded value of a constant, checking it on first use.
    fn const_value(&mut self, m: usize, name: &str) -> Option<(Value, Ty)> {
        let entry = self.modules[m].consts.get_mut(name)?;
        match &entry.state {
            ConstState::Done(v) => return v.clone(),
            ConstState::InProgress => {
                let span = entry.decl.name.span;
                entry.state = ConstState::Done(None);
                self.err(
                    Diagnostic::new(Code::Recursion, span, format!("constant `{name}` refers to itself"))
                        .label("its value depends on itself")
                        .help("give the constant a value that does not use it"),
                );
                return None;
            }
            ConstState::Unchecked => entry.state = ConstState::InProgress,
        }
        let decl = entry.decl.clone();
        let mut scope = Scope::new(m, Context::Const);
        let e = self.expr(&mut scope, &decl.value);
        // A constant whose value does not fit its declared type is reported once, here;
        // its uses then see an error, not a second mismatch.
        let fits = match &decl.ty {
            Some(t) => {
                let want = self.resolve_type(t);
                self.expect_type(&e, &want, "the constant's declared type")
            }
            None => true,
        };
        let result = if e.ty.is_error() || !fits { None } else { self.fold_const(&e, "a constant's value") };
        let result = result.map(|v| (v, e.ty.clone()));
        if let Some(entry) = self.modules[m].consts.get_mut(name) {
            entry.state = ConstState::Done(result.clone());
        }
        result
    }

    /// Folds an expression that must be constant, reporting E0025 when it is not.
    fn fold_const(&mut self, e: &hir::Expr, what: &str) -> Option<Value> {
        match self.fold(e) {
            Some(Folded::Constant(v)) => return Some(v),
            Some(_) => {}
            None if e.ty.is_error() || e.has_error() => {}
            None => self.err(
                Diagnostic::new(Code::NotConstant, e.span, format!("{what} must be known when the policy is compiled"))
                    .label("this is only known while scheduling")
                    .help("use literals, constants and arithmetic here"),
            ),
        }
        None
    }

    /// Folds `e` with the functions checked so far. Running out of the evaluation budget
    /// is reported here (E0041) and returned as `Some(OverBudget)`; an expression that is
    /// not constant is `None`.
    fn fold(&mut self, e: &hir::Expr) -> Option<Folded> {
        match fold::fold(&self.finished, e) {
            Folded::NotConstant => None,
            Folded::OverBudget(chain) => {
                let names: Vec<&str> =
                    chain.iter().filter_map(|f| self.finished.get(f)).map(|f| f.name.as_str()).collect();
                let d = over_budget(e.span, "evaluating this at compile time", &names, MAX_CONST_EVAL_STEPS);
                self.err(d);
                Some(Folded::OverBudget(chain))
            }
            folded => Some(folded),
        }
    }

    /// Checks a constant-valued expression of a given dimension (quota amounts, weights…).
    fn const_number(&mut self, m: usize, e: &ast::Expr, want: &Ty, what: &str) -> Option<f64> {
        let mut scope = Scope::new(m, Context::Const);
        let h = self.expr(&mut scope, e);
        if !self.expect_type(&h, want, what) {
            return None;
        }
        self.fold_const(&h, what)?.as_num()
    }

    fn items(parsed: &ast::File) -> impl Iterator<Item = &Item> {
        parsed.items.iter()
    }

    fn check_items(&mut self, m: usize, parsed: &ast::File, p: &mut hir::Policy) {
        let mut rule_names: HashMap<String, Span> = HashMap::new();
        let mut claim = |c: &mut Self, name: &ast::Ident| {
            if let Some(first) = rule_names.get(&name.name) {
                c.err(duplicate("rule", name, *first));
                false
            } else {
                rule_names.insert(name.name.clone(), name.span);
                true
            }
        };
        let mut pc_names: HashMap<String, Span> = HashMap::new();
        let mut orders: [Option<Span>; 3] = [None, None, None];
        let mut gang_span: Option<Span> = None;
        let mut settings_span: Option<Span> = None;
        for item in Self::items(parsed) {
            match item {
                Item::Rule(r) => {
                    claim(self, &r.name);
                    if let Some(rule) = self.check_rule(m, r) {
                        p.rules.push(rule);
                    }
                }
                Item::Victim(v) => {
                    let name = v.name.clone().unwrap_or_else(|| ast::Ident {
                        name: v.kind.keyword().into(),
                        span: Span { end: v.span.start + v.kind.keyword().len() as u32, ..v.span },
                    });
                    if !claim(self, &name)
                        && v.name.is_none()
                        && let Some(d) = self.diags.last_mut()
                    {
                        d.help = Some(format!(
                            "give each {} rule a name: `{} NAME {{ … }}`",
                            v.kind.keyword(),
                            v.kind.keyword()
                        ));
                    }
                    p.victims.push(self.check_victim(m, v, name.name));
                }
                Item::PriorityClass(pc) => {
                    if let Some(first) = pc_names.get(&pc.name.name) {
                        self.err(duplicate("priority class", &pc.name, *first));
                        continue;
                    }
                    pc_names.insert(pc.name.name.clone(), pc.name.span);
                    if let Some(v) = self.const_number(m, &pc.value, &Ty::NUMBER, "a priority class value") {
                        p.priority_classes.push((pc.name.name.clone(), v));
                    }
                }
                Item::Order(o) => {
                    let slot = match o.target {
                        ast::OrderTarget::Queue => 0,
                        ast::OrderTarget::Job => 1,
                        ast::OrderTarget::Victim => 2,
                    };
                    let kw = o.target.keyword();
                    if let Some(first) = orders[slot] {
                        self.err(
                            Diagnostic::new(Code::Duplicate, o.span, format!("`{kw}` declared twice"))
                                .label("second declaration")
                                .with_secondary(first, "first declared here")
                                .help("list all keys in one declaration, most significant first"),
                        );
                        continue;
                    }
                    orders[slot] = Some(o.span);
                    let keys = self.check_order(m, o);
                    match o.target {
                        ast::OrderTarget::Queue => p.queue_order = keys,
                        ast::OrderTarget::Job => p.job_order = keys,
                        ast::OrderTarget::Victim => p.victim_order = keys,
                    }
                }
                Item::Gang(g) => {
                    if let Some(first) = gang_span {
                        self.err(
                            Diagnostic::new(Code::Duplicate, g.span, "`gang` declared twice")
                                .label("second declaration")
                                .with_secondary(first, "first declared here")
                                .help("put every clause in one `gang` block"),
                        );
                        continue;
                    }
                    gang_span = Some(g.span);
                    p.gang = self.check_gang(m, g);
                }
                Item::Settings(s) => {
                    if let Some(first) = settings_span {
                        self.err(
                            Diagnostic::new(Code::Duplicate, s.span, "`settings` declared twice")
                                .label("second declaration")
                                .with_secondary(first, "first declared here")
                                .help("put every setting in one `settings` block"),
                        );
                        continue;
                    }
                    settings_span = Some(s.span);
                    p.settings = self.check_settings(m, s);
                }
                _ => {}
            }
        }
        self.check_cost_units(&p.victims);
    }

    /// Victims are ranked and sets compared by their summed costs, so every cost is one
    /// unit: gpu·s in one rule and seconds in another would be compared raw (E0009).
    fn check_cost_units(&mut self, victims: &[hir::VictimRule]) {
        let mut costs = victims.iter().filter_map(|v| v.cost.as_ref().map(|c| (v, c)));
        let Some((first, first_cost)) = costs.find(|(_, c)| matches!(c.ty, Ty::Num(_))) else { return };
        for (v, c) in costs {
            if matches!(c.ty, Ty::Num(_)) && c.ty != first_cost.ty {
                self.err(
                    Diagnostic::new(
                        Code::UnitMismatch,
                        c.span,
                        format!(
                            "the cost of `{}` is {}, the cost of `{}` is {}",
                            v.name, c.ty, first.name, first_cost.ty
                        ),
                    )
                    .label(format!("this is {}", c.ty))
                    .with_secondary(first_cost.span, format!("this is {}", first_cost.ty))
                    .help("victims are ranked by their costs added up, so every preempt rule's cost needs one unit"),
                );
            }
        }
    }

    fn check_rule(&mut self, m: usize, r: &ast::Rule) -> Option<hir::Rule> {
        use crate::kinds::RuleKind as K;
        let context = match r.kind {
            K::Admit => Context::Admit,
            K::Filter => Context::Filter,
            K::Score => Context::Score,
            K::CardScore => Context::CardScore,
        };
        let mut scope = Scope::new(m, context);
        let body = self.expr(&mut scope, &r.body);
        self.pop_scope(&mut scope, 0);
        let mut tier = None;
        let mut weight = 1.0;
        match r.kind {
            K::Admit | K::Filter => {
                if !body.ty.is_error() && body.ty != Ty::Bool {
                    self.err(
                        Diagnostic::new(
                            Code::NotBool,
                            r.body.span,
                            format!("{} body must be a boolean", r.kind.keyword()),
                        )
                        .label(format!("this is {}", body.ty))
                        .help(format!(
                            "a {} rule says whether the job may proceed: write a condition",
                            r.kind.keyword()
                        )),
                    );
                } else if !body.ty.is_error()
                    && let Some(Folded::Constant(Value::Bool(b))) = self.fold(&body)
                {
                    let what = if b { "never rejects anything" } else { "rejects every job" };
                    self.err(
                        Diagnostic::new(
                            Code::ConstantRule,
                            r.name.span,
                            format!("{} `{}` is always {b}", r.kind.keyword(), r.name.name),
                        )
                        .label(what)
                        .with_secondary(r.body.span, format!("this folds to `{b}`"))
                        .help("a rule that does not depend on the job or node is almost certainly a mistake"),
                    );
                }
            }
            K::Score | K::CardScore => {
                match &body.ty {
                    Ty::Num(d) if d.is_none() => {}
                    Ty::Error => {}
                    Ty::Num(d) => self.err(
                        Diagnostic::new(Code::NotNumeric, r.body.span, "a score must be a plain number in [0, 1]")
                            .label(format!("this is {}", expr::in_unit(*d)))
                            .help(format!(
                                "divide by a {d} amount to get a fraction, e.g. `node.free_cards / node.cards`"
                            )),
                    ),
                    other => self.err(
                        Diagnostic::new(Code::NotNumeric, r.body.span, "a score must be a plain number in [0, 1]")
                            .label(format!("this is {other}"))
                            .help("for a yes/no preference write `if COND then 1 else 0`"),
                    ),
                }
                if let Some(t) = &r.tier {
                    let v = self.const_number(m, t, &Ty::NUMBER, "a tier");
                    match v {
                        Some(v) if (1.0..=4.0).contains(&v) && v.fract() == 0.0 => tier = Some(v as u8),
                        Some(v) => self.err(
                            Diagnostic::new(Code::TierOutOfRange, t.span, format!("tier {v} is out of range"))
                                .label("tiers are 1, 2, 3 or 4")
                                .help("tier 1 is compared first; scores without a tier form the weighted sum"),
                        ),
                        None => {}
                    }
                }
                if let Some(w) = &r.weight
                    && let Some(v) = self.const_number(m, w, &Ty::NUMBER, "a score weight")
                {
                    weight = v;
                    if v == 0.0 {
                        self.err(
                            Diagnostic::new(Code::ZeroWeight, w.span, format!("score `{}` has weight 0", r.name.name))
                                .label("this score never changes a decision")
                                .help("remove the score, or give it a positive weight"),
                        );
                    } else if v < 0.0 {
                        self.err(
                            Diagnostic::new(Code::NegativeQuantity, w.span, "score weights must not be negative")
                                .label(format!("weight {v}"))
                                .help("to prefer the opposite, score `1 - x` instead"),
                        );
                    }
                }
                if tier.is_some() && r.weight.is_some() {
                    self.err(
                        Diagnostic::new(
                            Code::BadSetting,
                            r.weight.as_ref().map_or(r.span, |w| w.span),
                            "a tiered score has no weight",
                        )
                        .label("tiers are compared lexicographically, so a weight would be ignored")
                        .help("remove either the `tier` or the `weight`"),
                    );
                }
            }
        }
        let is_static = r.kind == K::Admit && self.reads_only_static(&body);
        Some(hir::Rule {
            kind: r.kind,
            name: r.name.name.clone(),
            reason: r.reason.as_ref().map(|s| s.value.clone()),
            tier,
            weight,
            body,
            is_static,
            span: r.span,
        })
    }

    fn check_order(&mut self, m: usize, o: &ast::Order) -> Vec<hir::OrderKey> {
        let context = match o.target {
            ast::OrderTarget::Queue => Context::QueueOrder,
            ast::OrderTarget::Job => Context::JobOrder,
            ast::OrderTarget::Victim => Context::Victim,
        };
        let mut keys = Vec::new();
        for k in &o.keys {
            let mut scope = Scope::new(m, context);
            let e = self.expr(&mut scope, &k.expr);
            self.pop_scope(&mut scope, 0);
            match &e.ty {
                Ty::Num(_) | Ty::Bool | Ty::Error => {}
                other => self.err(
                    Diagnostic::new(Code::NotComparable, k.expr.span, format!("cannot order by {other}"))
                        .label("order keys must be numbers or booleans")
                        .help(match other {
                            Ty::Optional(_) => "give a default with `??`, e.g. `job.expected_duration ?? 1h`",
                            Ty::Str => "strings have no order in gpol; order by a number instead",
                            _ => "order by a numeric field of the record",
                        }),
                ),
            }
            keys.push(hir::OrderKey { expr: e, dir: k.dir.unwrap_or(Direction::Asc) });
        }
        keys
    }

    fn check_gang(&mut self, m: usize, g: &ast::Gang) -> Vec<hir::GangClause> {
        let mut out = Vec::new();
        for c in &g.clauses {
            let level = self.level_index(&c.level);
            let mut weight = 1.0;
            if let Some(w) = &c.weight {
                if c.kind == GangKind::Require {
                    self.err(
                        Diagnostic::new(Code::BadSetting, w.span, "`require` takes no weight")
                            .label("a requirement excludes placements; it does not score them")
                            .help("use `prefer same LEVEL weight W` for a preference"),
                    );
                } else if let Some(v) = self.const_number(m, w, &Ty::NUMBER, "a gang preference weight") {
                    if v < 0.0 {
                        self.err(
                            Diagnostic::new(Code::NegativeQuantity, w.span, "gang weights must not be negative")
                                .label(format!("weight {v}"))
                                .help("a preference adds weight × its value; use 0 to ignore it"),
                        );
                    }
                    weight = v;
                }
            }
            let when = c.when.as_ref().map(|w| {
                let mut scope = Scope::new(m, Context::Gang);
                let e = self.expr(&mut scope, w);
                self.pop_scope(&mut scope, 0);
                self.expect_bool(&e, "a `when` clause");
                e
            });
            if let Some(level) = level {
                out.push(hir::GangClause { kind: c.kind, level, weight, when, span: c.span });
            }
        }
        out
    }

    fn level_index(&mut self, level: &ast::Ident) -> Option<u8> {
        match self.levels.iter().position(|l| *l == level.name) {
            Some(i) => u8::try_from(i).ok(),
            None => {
                let sugg = fuzzy::suggest(&level.name, self.levels.iter().map(String::as_str));
                self.err(
                    Diagnostic::new(
                        Code::UnknownLevel,
                        level.span,
                        format!("unknown topology level `{}`", snippet(&level.name)),
                    )
                    .label("not a declared level")
                    .help(fuzzy::help(sugg, || {
                        format!("the levels are {}; declare others with `topology …`", self.levels.join(", "))
                    })),
                );
                None
            }
        }
    }

    fn check_victim(&mut self, m: usize, v: &ast::VictimRule, name: String) -> hir::VictimRule {
        let mut scope = Scope::new(m, Context::Victim);
        let when = self.expr(&mut scope, &v.when);
        self.pop_scope(&mut scope, 0);
        self.expect_bool(&when, "a `when` clause");
        let cost = v.cost.as_ref().map(|c| {
            let mut scope = Scope::new(m, Context::Victim);
            let e = self.expr(&mut scope, c);
            self.pop_scope(&mut scope, 0);
            if !matches!(e.ty, Ty::Num(_) | Ty::Error) {
                self.err(
                    Diagnostic::new(Code::NotNumeric, c.span, "a preemption cost must be a number")
                        .label(format!("this is {}", e.ty))
                        .help("the cost ranks victims, cheapest first: e.g. `victim.total_gpus * victim.since_checkpoint`"),
                );
            }
            e
        });
        if let (VictimKind::Reclaim | VictimKind::Borrow | VictimKind::Protect, Some(c)) = (v.kind, &v.cost) {
            let kw = v.kind.keyword();
            self.err(
                Diagnostic::new(Code::BadSetting, c.span, format!("`{kw}` takes no cost"))
                    .label(format!("{kw} victims are ranked by the preempt rules' cost"))
                    .help("move the cost to a `preempt` rule"),
            );
        }
        let reason = v.reason.as_ref().map(|r| r.value.clone());
        hir::VictimRule { kind: v.kind, name, reason, when, cost, span: v.span }
    }

    fn check_settings(&mut self, m: usize, s: &ast::Settings) -> hir::Settings {
        const KNOWN: &[&str] =
            &["queueing", "reserve_after", "billing_gpu", "billing_cpu", "billing_mem", "billing_max", "timezone"];
        let mut out = hir::Settings {
            queueing: hir::Queueing::BestEffort,
            reserve_after: None,
            billing: hir::Billing::default(),
            timezone: None,
        };
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for e in &s.entries {
            if let Some(first) = seen.get(e.name.name.as_str()) {
                self.err(duplicate("setting", &e.name, *first));
                continue;
            }
            seen.insert(&e.name.name, e.name.span);
            match e.name.name.as_str() {
                "queueing" => {
                    if let Some(q) = self.queueing_mode(&e.value) {
                        out.queueing = q;
                    }
                }
                "reserve_after" => {
                    out.reserve_after =
                        self.const_number(m, &e.value, &Ty::Num(crate::units::Dim::TIME), "`reserve_after`");
                }
                "billing_gpu" | "billing_cpu" | "billing_mem" => {
                    let what = format!("`{}` (usage per GPU, core or GiB held)", e.name.name);
                    let Some(w) = self.const_number(m, &e.value, &Ty::NUMBER, &what) else { continue };
                    if !(w >= 0.0 && w.is_finite()) {
                        self.err(
                            Diagnostic::new(
                                Code::NegativeQuantity,
                                e.value.span,
                                format!("{what} must be a finite number, not negative"),
                            )
                            .label(format!("this is {w}"))
                            .help("a billing weight counts how much a second of holding the resource adds to usage"),
                        );
                        continue;
                    }
                    match e.name.name.as_str() {
                        "billing_gpu" => out.billing.gpu = w,
                        "billing_cpu" => out.billing.cpu = w,
                        _ => out.billing.mem_gib = w,
                    }
                }
                "timezone" => match &e.value.kind {
                    ast::ExprKind::Str(name) => match crate::clock::zone(name) {
                        Ok(_) => out.timezone = Some(name.clone()),
                        Err(m) => self.err(
                            Diagnostic::new(Code::BadSetting, e.value.span, m.to_string())
                                .label("not a time zone")
                                .help("the cluster clock's zone: `cluster.time_of_day` and quota windows read it"),
                        ),
                    },
                    _ => self.err(
                        Diagnostic::new(Code::BadSetting, e.value.span, "`timezone` is a time zone's name in quotes")
                            .label("not a string")
                            .help("write `timezone \"Europe/Berlin\"` (an IANA name; UTC by default)"),
                    ),
                },
                "billing_max" => match &e.value.kind {
                    ast::ExprKind::Bool(b) => out.billing.max = *b,
                    _ => self.err(
                        Diagnostic::new(Code::BadSetting, e.value.span, "`billing_max` is `true` or `false`")
                            .label("not a boolean")
                            .help("true: usage counts the largest billed term (Slurm's MAX_TRES); false: their sum"),
                    ),
                },
                other => {
                    let sugg = fuzzy::suggest(other, KNOWN.iter().copied());
                    self.err(
                        Diagnostic::new(Code::BadSetting, e.name.span, format!("unknown setting `{}`", snippet(other)))
                            .label("not a setting")
                            .help(fuzzy::help(sugg, || format!("settings are {}", KNOWN.join(", ")))),
                    );
                }
            }
        }
        out
    }

    /// `strict` or `best_effort`, written as a bare name.
    fn queueing_mode(&mut self, e: &ast::Expr) -> Option<hir::Queueing> {
        let name = match &e.kind {
            ast::ExprKind::Name(n) => n.name.as_str(),
            _ => "",
        };
        match name {
            "strict" => Some(hir::Queueing::Strict),
            "best_effort" => Some(hir::Queueing::BestEffort),
            _ => {
                let sugg = fuzzy::suggest(name, ["strict", "best_effort"]);
                self.err(
                    Diagnostic::new(Code::BadSetting, e.span, "queueing is `strict` or `best_effort`")
                        .label("not a queueing mode")
                        .help(fuzzy::help(sugg, || {
                            "strict: the head job blocks its queue; best_effort: later jobs may pass it".into()
                        })),
                );
                None
            }
        }
    }

    /// Whether an expression reads only static job fields (so its verdict never changes).
    fn reads_only_static(&self, e: &hir::Expr) -> bool {
        use hir::ExprKind as K;
        let all = |es: &[hir::Expr]| es.iter().all(|x| self.reads_only_static(x));
        match &e.kind {
            K::Num(_) | K::Bool(_) | K::Str(_) | K::Enum(..) | K::Local(_) | K::Error => true,
            K::Root(r) => *r == crate::schema::Root::Job,
            K::Field(b, rec, i) => {
                let storage = rec.fields().get(usize::from(*i)).map(|f| f.storage);
                storage != Some(crate::schema::Storage::Cycle) && self.reads_only_static(b)
            }
            K::Level(..) | K::Attr(..) => false,
            K::Index(a, b) => self.reads_only_static(a) && self.reads_only_static(b),
            K::List(es) | K::Builtin(_, es) => all(es),
            K::Call(f, args) => all(args) && self.finished.get(f).is_none_or(|func| self.reads_only_static(&func.body)),
            K::Unary(_, a) => self.reads_only_static(a),
            K::Binary(_, a, b) | K::Let(_, a, b) | K::Comprehension(_, _, a, b) => {
                self.reads_only_static(a) && self.reads_only_static(b)
            }
            K::If(a, b, c) => self.reads_only_static(a) && self.reads_only_static(b) && self.reads_only_static(c),
        }
    }

    /// Warnings for constants, functions and imports that are never used.
    fn lint_unused(&mut self, m: usize, library: bool) {
        let mut found = Vec::new();
        if !library {
            for (name, c) in &self.modules[m].consts {
                if !c.used && !name.starts_with('_') {
                    found.push(
                        Diagnostic::new(
                            Code::UnusedConst,
                            c.decl.name.span,
                            format!("constant `{name}` is never used"),
                        )
                        .label("declared here")
                        .help("remove it, or prefix its name with `_`"),
                    );
                }
            }
            for f in &self.functions {
                if f.module == m && !f.used && !f.decl.name.name.starts_with('_') {
                    found.push(
                        Diagnostic::new(
                            Code::UnusedFn,
                            f.decl.name.span,
                            format!("function `{}` is never called", f.decl.name.name),
                        )
                        .label("declared here")
                        .help("remove it, or prefix its name with `_`"),
                    );
                }
            }
        }
        for (u, _, used) in &self.modules[m].uses {
            if !used {
                found.push(
                    Diagnostic::new(
                        Code::UnusedUse,
                        u.span,
                        format!("module `{}` is imported but never used", u.path.dotted()),
                    )
                    .label("unused import")
                    .help("remove the `use`"),
                );
            }
        }
        self.diags.extend(found);
    }
}

/// The first word of a span (an item's keyword).
fn keyword_span(sources: &SourceMap, span: Span) -> Span {
    let text = sources.get(span.file).slice(span);
    let len = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    Span { end: span.start + u32::try_from(len).unwrap_or(0), ..span }
}

fn duplicate(what: &str, name: &ast::Ident, first: Span) -> Diagnostic {
    Diagnostic::new(Code::Duplicate, name.span, format!("{what} `{}` is defined twice", snippet(&name.name)))
        .label("second definition")
        .with_secondary(first, "first defined here")
        .help(format!("give each {what} a unique name"))
}

/// Every call path in an expression (for the call graph).
fn calls_in<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Path>) {
    use ast::ExprKind as K;
    match &e.kind {
        K::Number(_) | K::Quantity { .. } | K::Str(_) | K::Bool(_) | K::MigProfile(_) | K::Name(_) => {}
        K::List(es) => es.iter().for_each(|x| calls_in(x, out)),
        K::Field(b, _) => calls_in(b, out),
        K::Index(a, b) | K::Binary(_, a, b) => {
            calls_in(a, out);
            calls_in(b, out);
        }
        K::Call { callee, args } => {
            out.push(callee);
            args.iter().for_each(|x| calls_in(x, out));
        }
        K::Unary(_, a) => calls_in(a, out),
        K::If { cond, then, els } => {
            calls_in(cond, out);
            calls_in(then, out);
            calls_in(els, out);
        }
        K::Block { lets, body } => {
            lets.iter().for_each(|l| calls_in(&l.value, out));
            calls_in(body, out);
        }
        K::Comprehension { iter, body, .. } => {
            calls_in(iter, out);
            calls_in(body, out);
        }
    }
}

/// Diagnostics that a declaration broken by a syntax error may cause in the ones that
/// parsed (a name it defined is unknown, a function it called is unused): held back
/// while there are syntax errors.
fn depends_on_other_declarations(code: Code) -> bool {
    use Code as C;
    matches!(
        code,
        C::UnknownName
            | C::UnknownFunction
            | C::UnknownModule
            | C::NoCohort
            | C::UnknownQueue
            | C::UnknownLevel
            | C::UnknownRule
            | C::MissingHeader
            | C::UnknownPriorityClass
            | C::UnusedConst
            | C::UnusedFn
            | C::UnusedUse
    )
}

/// W0008 for each bidirectional formatting character in the text ("Trojan Source").
fn bidi_controls(file: FileId, text: &str) -> Vec<Diagnostic> {
    text.char_indices()
        .filter(|(_, c)| crate::terminal::is_bidi_control(*c))
        .map(|(at, c)| {
            Diagnostic::new(
                Code::BidiControl,
                Span::new(file, at, at + c.len_utf8()),
                format!("bidirectional control character U+{:04X} in the source", u32::from(c)),
            )
            .label("can make the text read differently than it runs")
            .help("remove it: reviewers may see this line in a different order than gpolc reads it")
        })
        .collect()
}
