//! Expressions: name resolution, types and units.

use super::Checker;
use crate::diag::{Code, Diagnostic, snippet};
use crate::fuzzy;
use crate::hir::{self, Builtin, ExprKind as H, LocalId, Value};
use crate::kinds::CompKind;
use crate::schema::{Context, EnumKind, Record, Root};
use crate::source::Span;
use crate::syntax::{self as ast, BinaryOp, ExprKind as A, TypeKind, UnaryOp, UnitOp};
use crate::types::Ty;
use crate::units::Dim;

/// Local bindings visible while checking one body.
pub(crate) struct Scope {
    pub module: usize,
    pub context: Context,
    locals: Vec<Local>,
    next_id: LocalId,
    /// Names a test expectation binds (queues, jobs, nodes), checked before constants.
    pub test_names: Vec<(String, LocalId, Ty)>,
}

struct Local {
    name: String,
    id: LocalId,
    ty: Ty,
    span: Span,
    used: bool,
    /// `let` bindings are reported when unused; parameters and loop variables are not.
    warn_unused: bool,
}

impl Scope {
    pub(crate) fn new(module: usize, context: Context) -> Scope {
        Scope { module, context, locals: Vec::new(), next_id: 0, test_names: Vec::new() }
    }

    pub(crate) fn fresh_id(&mut self) -> LocalId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

fn expr(kind: H, ty: Ty, span: Span) -> hir::Expr {
    hir::Expr { kind, ty, span }
}

fn error(span: Span) -> hir::Expr {
    expr(H::Error, Ty::Error, span)
}

fn is_bare_number(e: &ast::Expr) -> bool {
    match &e.kind {
        A::Number(_) => true,
        A::Unary(UnaryOp::Neg, x) => is_bare_number(x),
        _ => false,
    }
}

impl Checker<'_> {
    /// Binds a name in the scope, warning when it shadows another.
    pub(super) fn bind(&mut self, scope: &mut Scope, name: &ast::Ident, ty: Ty, warn_unused: bool) -> LocalId {
        if !name.name.starts_with('_') {
            let shadowed = if let Some(l) = scope.locals.iter().rev().find(|l| l.name == name.name) {
                Some(("a binding", Some(l.span)))
            } else if scope.context.roots().iter().any(|r| r.name() == name.name) {
                Some(("the record", None))
            } else if self.modules[scope.module].consts.contains_key(&name.name) {
                Some(("the constant", self.modules[scope.module].consts.get(&name.name).map(|c| c.decl.name.span)))
            } else {
                None
            };
            if let Some((what, at)) = shadowed {
                let mut d = Diagnostic::new(
                    Code::Shadowing,
                    name.span,
                    format!("`{}` shadows {what} of the same name", name.name),
                )
                .label("this binding hides the outer one")
                .help("pick a different name");
                if let Some(at) = at {
                    d = d.with_secondary(at, "outer one");
                }
                self.err(d);
            }
        }
        let id = scope.fresh_id();
        scope.locals.push(Local { name: name.name.clone(), id, ty, span: name.span, used: false, warn_unused });
        id
    }

    /// Pops bindings down to `keep`, warning about unused `let`s.
    pub(super) fn pop_scope(&mut self, scope: &mut Scope, keep: usize) {
        while scope.locals.len() > keep {
            let Some(l) = scope.locals.pop() else { break };
            if l.warn_unused && !l.used && !l.name.starts_with('_') {
                self.err(
                    Diagnostic::new(Code::UnusedLet, l.span, format!("`{}` is never used", l.name))
                        .label("bound here")
                        .help("remove the `let`, or prefix the name with `_`"),
                );
            }
        }
    }

    pub(super) fn resolve_type(&mut self, t: &ast::TypeExpr) -> Ty {
        match &t.kind {
            TypeKind::List(inner) => Ty::List(Box::new(self.resolve_type(inner))),
            TypeKind::Optional(inner) => Ty::Optional(Box::new(self.resolve_type(inner))),
            TypeKind::Named(first, rest) => {
                if rest.is_empty() {
                    match first.name.as_str() {
                        "bool" => return Ty::Bool,
                        "string" => return Ty::Str,
                        "sharing" => return Ty::Enum(EnumKind::Sharing),
                        "mig_profile" => return Ty::Enum(EnumKind::MigProfile),
                        n => {
                            if let Some(r) = Record::from_name(n) {
                                return Ty::Record(r);
                            }
                        }
                    }
                }
                let mut dim = match self.unit_name(first) {
                    Some(d) => d,
                    None => return Ty::Error,
                };
                for (op, name) in rest {
                    let Some(d) = self.unit_name(name) else {
                        return Ty::Error;
                    };
                    dim = match op {
                        UnitOp::Mul => dim.times(d),
                        UnitOp::Div => dim.per(d),
                    };
                }
                Ty::Num(dim)
            }
        }
    }

    fn unit_name(&mut self, name: &ast::Ident) -> Option<Dim> {
        let d = Dim::from_name(&name.name);
        if d.is_none() {
            const TYPES: &[&str] = &[
                "number",
                "count",
                "fraction",
                "gpu",
                "cpu",
                "bytes",
                "duration",
                "bool",
                "string",
                "sharing",
                "mig_profile",
                "job",
                "node",
                "card",
                "queue",
                "domain",
                "cluster",
                "shape",
                "resources",
                "list",
            ];
            let sugg = fuzzy::suggest(&name.name, TYPES.iter().copied());
            self.err(
                Diagnostic::new(Code::UnknownType, name.span, format!("unknown type `{}`", snippet(&name.name)))
                    .label("not a type")
                    .help(fuzzy::help(sugg, || {
                        "types are number, gpu, cpu, bytes, duration, bool, string, the records and list[T]".into()
                    })),
            );
        }
        d
    }

    /// Reports a type mismatch unless `e` fits `want`; returns whether it fits.
    pub(super) fn expect_type(&mut self, e: &hir::Expr, want: &Ty, place: &str) -> bool {
        if e.ty.fits(want) || list_fits(&e.ty, want) {
            return true;
        }
        let d = match (&e.ty, want) {
            (Ty::Num(got), Ty::Num(w)) => {
                Diagnostic::new(Code::UnitMismatch, e.span, format!("expected {w}, found {got}"))
                    .label(format!("this is {}", in_unit(*got)))
                    .help(format!("{place} is in {w}"))
            }
            (Ty::Optional(inner), w) if **inner == *w => optional_misuse(e.span, inner),
            (got, w) => Diagnostic::new(Code::TypeMismatch, e.span, format!("expected {w}, found {got}"))
                .label(format!("this is {got}"))
                .help(format!("{place} is {w}")),
        };
        self.err(d);
        false
    }

    pub(super) fn expect_bool(&mut self, e: &hir::Expr, place: &str) -> bool {
        if matches!(e.ty, Ty::Bool | Ty::Error) {
            return true;
        }
        let d = match &e.ty {
            Ty::Optional(inner) if **inner == Ty::Bool => optional_misuse(e.span, inner),
            _ => Diagnostic::new(Code::NotBool, e.span, format!("{place} must be a boolean"))
                .label(format!("this is {}", e.ty))
                .help("write a condition, e.g. `x > 0` or `has(x)`"),
        };
        self.err(d);
        false
    }

    pub(super) fn expr(&mut self, scope: &mut Scope, e: &ast::Expr) -> hir::Expr {
        let span = e.span;
        match &e.kind {
            A::Number(n) => expr(H::Num(n.value), Ty::NUMBER, span),
            A::Quantity { number, unit, flavour } => {
                if let Some(f) = flavour {
                    self.err(
                        Diagnostic::new(Code::BadFlavour, f.span, "a GPU model only scopes quotas")
                            .label("not allowed in an expression")
                            .help("compare models with `node.gpu_model == \"h100\"` instead"),
                    );
                }
                expr(H::Num(unit.to_base(number.value)), Ty::Num(unit.dim()), span)
            }
            A::Str(s) => expr(H::Str(s.clone()), Ty::Str, span),
            A::Bool(b) => expr(H::Bool(*b), Ty::Bool, span),
            A::MigProfile(p) => match EnumKind::MigProfile.variant(p) {
                Some(i) => expr(H::Enum(EnumKind::MigProfile, i), Ty::Enum(EnumKind::MigProfile), span),
                None => {
                    let sugg = fuzzy::suggest(p, EnumKind::MigProfile.variants().iter().copied());
                    self.err(
                        Diagnostic::new(Code::BadLiteral, span, format!("unknown MIG profile `{p}`"))
                            .label("not a MIG profile")
                            .help(fuzzy::help(sugg, || {
                                format!("profiles are {}", EnumKind::MigProfile.variants().join(", "))
                            })),
                    );
                    error(span)
                }
            },
            A::List(items) => self.list(scope, items, span),
            A::Name(n) => self.name(scope, n),
            A::Field(base, field) => self.field(scope, base, field, span),
            A::Index(base, ix) => self.index(scope, base, ix, span),
            A::Call { callee, args } => self.call(scope, callee, args, span),
            A::Unary(op, x) => {
                let x = self.expr(scope, x);
                match op {
                    UnaryOp::Not => {
                        self.expect_bool(&x, "the operand of `not`");
                        expr(H::Unary(*op, Box::new(x)), Ty::Bool, span)
                    }
                    UnaryOp::Neg => {
                        let ty = match &x.ty {
                            Ty::Num(_) | Ty::Error => x.ty.clone(),
                            other => {
                                self.err(
                                    Diagnostic::new(Code::TypeMismatch, x.span, format!("cannot negate {other}"))
                                        .label("not a number")
                                        .help("`-` applies to numbers"),
                                );
                                Ty::Error
                            }
                        };
                        expr(H::Unary(*op, Box::new(x)), ty, span)
                    }
                }
            }
            A::Binary(op, a, b) => self.binary(scope, *op, a, b, span),
            A::If { cond, then, els } => {
                let c = self.expr(scope, cond);
                self.expect_bool(&c, "an `if` condition");
                let t = self.expr(scope, then);
                let f = self.expr(scope, els);
                let ty = self.unify(&t, &f, "the branches of an `if`");
                expr(H::If(Box::new(c), Box::new(t), Box::new(f)), ty, span)
            }
            A::Block { lets, body } => {
                let keep = scope.locals.len();
                let mut bound = Vec::new();
                for l in lets {
                    let mut v = self.expr(scope, &l.value);
                    if let Some(t) = &l.ty {
                        let want = self.resolve_type(t);
                        if self.expect_type(&v, &want, "the binding's declared type") {
                            v.ty = want;
                        }
                    }
                    let id = self.bind(scope, &l.name, v.ty.clone(), true);
                    bound.push((id, v));
                }
                let mut out = self.expr(scope, body);
                self.pop_scope(scope, keep);
                for (id, v) in bound.into_iter().rev() {
                    let ty = out.ty.clone();
                    out = expr(H::Let(id, Box::new(v), Box::new(out)), ty, span);
                }
                out
            }
            A::Comprehension { kind, var, iter, body } => self.comprehension(scope, *kind, var, iter, body, span),
        }
    }

    fn list(&mut self, scope: &mut Scope, items: &[ast::Expr], span: Span) -> hir::Expr {
        let checked: Vec<hir::Expr> = items.iter().map(|i| self.expr(scope, i)).collect();
        let mut elem = Ty::Error;
        for c in &checked {
            if elem.is_error() {
                elem = c.ty.clone();
            } else if !self.expect_type(c, &elem, "every element of a list") {
                break;
            }
        }
        expr(H::List(checked), Ty::List(Box::new(elem)), span)
    }

    fn name(&mut self, scope: &mut Scope, n: &ast::Ident) -> hir::Expr {
        let span = n.span;
        if let Some(l) = scope.locals.iter_mut().rev().find(|l| l.name == n.name) {
            l.used = true;
            return expr(H::Local(l.id), l.ty.clone(), span);
        }
        // Records win over the queues, jobs and nodes a test names.
        if let Some(r) = scope.context.roots().iter().find(|r| r.name() == n.name) {
            return expr(H::Root(*r), Ty::Record(r.record()), span);
        }
        if let Some((_, id, ty)) = scope.test_names.iter().find(|(name, _, _)| *name == n.name) {
            return expr(H::Local(*id), ty.clone(), span);
        }
        let m = scope.module;
        if self.modules[m].consts.contains_key(&n.name) {
            if let Some(c) = self.modules[m].consts.get_mut(&n.name) {
                c.used = true;
            }
            return match self.const_value(m, &n.name) {
                Some((v, ty)) => value_expr(v, ty, span),
                None => error(span),
            };
        }
        if let Some(i) = EnumKind::Sharing.variant(&n.name) {
            return expr(H::Enum(EnumKind::Sharing, i), Ty::Enum(EnumKind::Sharing), span);
        }
        if let Some(root) = Root::ALL.iter().find(|r| r.name() == n.name)
            && scope.context == Context::Const
        {
            self.err(
                Diagnostic::new(
                    Code::NotConstant,
                    span,
                    format!("`{}` is not known when the policy is compiled", root.name()),
                )
                .label("a record, read while scheduling")
                .help("constants, quotas, weights, tiers and test properties take literals, constants and arithmetic"),
            );
            return error(span);
        }
        if let Some(root) = Root::ALL.iter().find(|r| r.name() == n.name) {
            let available: Vec<String> = scope.context.roots().iter().map(|r| format!("`{}`", r.name())).collect();
            self.err(
                Diagnostic::new(
                    Code::OutOfScope,
                    span,
                    format!("`{}` is not available in {}", root.name(), scope.context.describe()),
                )
                .label("not in scope here")
                .help(if available.is_empty() {
                    "a function sees only its parameters: pass the record as one".to_string()
                } else {
                    format!("{} sees {}", scope.context.describe(), available.join(", "))
                }),
            );
            return error(span);
        }
        let mut candidates: Vec<String> = scope.locals.iter().map(|l| l.name.clone()).collect();
        candidates.extend(scope.test_names.iter().map(|(n, _, _)| n.clone()));
        candidates.extend(scope.context.roots().iter().map(|r| r.name().to_string()));
        candidates.extend(self.modules[m].consts.keys().cloned());
        candidates.extend(EnumKind::Sharing.variants().iter().map(|s| s.to_string()));
        let sugg = fuzzy::suggest(&n.name, candidates.iter().map(String::as_str));
        let help = match sugg {
            Some(s) => format!("did you mean `{s}`?"),
            None if self.modules[m].fns.contains_key(&n.name) => {
                format!("`{}` is a function: call it with `(…)`", n.name)
            }
            None => "names come from `let`, parameters, constants and the records in scope".to_string(),
        };
        self.err(
            Diagnostic::new(Code::UnknownName, span, format!("unknown name `{}`", snippet(&n.name)))
                .label("not defined")
                .help(help),
        );
        error(span)
    }

    fn field(&mut self, scope: &mut Scope, base: &ast::Expr, field: &ast::Ident, span: Span) -> hir::Expr {
        // `queue.attr.NAME` reads a custom attribute.
        if let A::Field(inner, attr) = &base.kind
            && attr.name == "attr"
        {
            let q = self.expr(scope, inner);
            if q.ty == Ty::Record(Record::Queue) {
                return self.attr(q, field, span);
            }
        }
        let b = self.expr(scope, base);
        match &b.ty {
            Ty::Error => error(span),
            Ty::Record(r) => {
                if let Some((idx, f)) = r.field(&field.name) {
                    let ty = Ty::from_field(f.ty, f.optional);
                    let r = *r;
                    return expr(H::Field(Box::new(b), r, idx), ty, span);
                }
                if *r == Record::Node
                    && let Some(l) = self.levels.iter().position(|l| *l == field.name)
                {
                    let l = u8::try_from(l).unwrap_or(u8::MAX);
                    return expr(H::Level(Box::new(b), l), Ty::Record(Record::Domain), span);
                }
                let mut names: Vec<&str> = r.fields().iter().map(|f| f.name).collect();
                if *r == Record::Node {
                    names.extend(self.levels.iter().map(String::as_str));
                }
                if *r == Record::Queue {
                    names.push("attr");
                }
                let help = match fuzzy::suggest(&field.name, names.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None if *r == Record::Queue && field.name == "attr" => {
                        "read an attribute with `queue.attr.NAME`".into()
                    }
                    None => format!("docs/schema.md lists the fields of `{}`", r.name()),
                };
                self.err(
                    Diagnostic::new(
                        Code::UnknownField,
                        field.span,
                        format!("`{}` has no field `{}`", r.name(), snippet(&field.name)),
                    )
                    .label("unknown field")
                    .with_secondary(b.span, format!("this is a {}", r.name()))
                    .help(help),
                );
                error(span)
            }
            Ty::Optional(inner) => {
                let inner = (**inner).clone();
                self.err(optional_misuse(b.span, &inner));
                error(span)
            }
            other => {
                self.err(
                    Diagnostic::new(Code::UnknownField, field.span, format!("{other} has no fields"))
                        .label("no field here")
                        .with_secondary(b.span, format!("this is {other}"))
                        .help("only records (job, node, queue, …) have fields"),
                );
                error(span)
            }
        }
    }

    fn attr(&mut self, q: hir::Expr, name: &ast::Ident, span: Span) -> hir::Expr {
        match self.attrs.get(&name.name) {
            Some((idx, ty, _)) => {
                let (idx, ty) = (*idx, ty.clone());
                self.attrs_read.entry(name.name.clone()).or_insert(name.span);
                expr(H::Attr(Box::new(q), idx), ty, span)
            }
            None => {
                let sugg = fuzzy::suggest(&name.name, self.attrs.keys().map(String::as_str));
                self.err(
                    Diagnostic::new(
                        Code::BadAttr,
                        name.span,
                        format!("no queue defines the attribute `{}`", snippet(&name.name)),
                    )
                    .label("undefined attribute")
                    .help(fuzzy::help(sugg, || format!("define it on the root queue: `attr {} = …`", name.name))),
                );
                error(span)
            }
        }
    }

    fn index(&mut self, scope: &mut Scope, base: &ast::Expr, ix: &ast::Expr, span: Span) -> hir::Expr {
        let b = self.expr(scope, base);
        let i = self.expr(scope, ix);
        match &b.ty {
            Ty::Error => error(span),
            Ty::Map(k, v) => {
                let (k, v) = ((**k).clone(), (**v).clone());
                if !self.expect_type(&i, &k, "the key") {
                    return error(span);
                }
                // Label keys become fixed slots in the records (decision D8), so each must
                // be known when the policy is compiled; MIG profiles may be computed.
                if k == Ty::Str {
                    match self.fold_const(&i, "a label key") {
                        Some(Value::Str(key)) => {
                            return expr(H::Index(Box::new(b), Box::new(expr(H::Str(key), Ty::Str, i.span))), v, span);
                        }
                        _ => {
                            return error(span);
                        }
                    }
                }
                expr(H::Index(Box::new(b), Box::new(i)), v, span)
            }
            other => {
                self.err(
                    Diagnostic::new(Code::TypeMismatch, span, format!("cannot index {other}"))
                        .label("not a table")
                        .with_secondary(b.span, format!("this is {other}"))
                        .help(
                            "only labels (`node.labels[\"k\"]`) and MIG counts (`node.free_mig[1g.10gb]`) are indexed",
                        ),
                );
                error(span)
            }
        }
    }

    fn call(&mut self, scope: &mut Scope, callee: &ast::Path, args: &[ast::Expr], span: Span) -> hir::Expr {
        let checked: Vec<hir::Expr> = args.iter().map(|a| self.expr(scope, a)).collect();
        let m = scope.module;
        if let [single] = callee.segments.as_slice() {
            if let Some(b) = Builtin::from_name(&single.name) {
                return self.builtin(b, checked, callee.span, span);
            }
            if let Some(&id) = self.modules[m].fns.get(&single.name) {
                return self.call_fn(id, checked, callee, span);
            }
        } else if let Some((last, prefix)) = callee.segments.split_last() {
            let module_path = prefix.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(".");
            if let Some(&target) = self.modules[m].imports.get(&module_path) {
                for u in self.modules[m].uses.iter_mut() {
                    if u.1 == target {
                        u.2 = true;
                    }
                }
                if let Some(&id) = self.modules[target].fns.get(&last.name) {
                    return self.call_fn(id, checked, callee, span);
                }
                let names: Vec<&str> = self.modules[target].fns.keys().map(String::as_str).collect();
                let sugg = fuzzy::suggest(&last.name, names.iter().copied());
                let mut listed: Vec<&str> = names.clone();
                listed.sort_unstable();
                self.err(
                    Diagnostic::new(
                        Code::UnknownFunction,
                        last.span,
                        format!("module `{module_path}` has no function `{}`", snippet(&last.name)),
                    )
                    .label("unknown function")
                    .help(fuzzy::help(sugg, || format!("`{module_path}` has {}", listed.join(", ")))),
                );
                return error(span);
            }
            let full = self.modules.iter().find(|md| md.path == module_path).map(|md| md.path.clone());
            if full.is_some() || crate::stdlib::source(&module_path).is_some() {
                self.err(
                    Diagnostic::new(
                        Code::UnknownModule,
                        callee.span,
                        format!("module `{module_path}` is not imported"),
                    )
                    .label("used without `use`")
                    .help(format!("add `use {module_path}` at the top of the file")),
                );
                return error(span);
            }
            let is_value = scope.locals.iter().any(|l| l.name == prefix[0].name)
                || scope.context.roots().iter().any(|r| r.name() == prefix[0].name);
            if is_value {
                self.err(
                    Diagnostic::new(
                        Code::UnknownFunction,
                        callee.span,
                        format!("`{}` is a field, not a function", callee.dotted()),
                    )
                    .label("cannot be called")
                    .help("records have no methods; pass the record to a function instead"),
                );
                return error(span);
            }
            let sugg = fuzzy::suggest(&module_path, crate::stdlib::MODULES.iter().copied());
            self.err(
                Diagnostic::new(
                    Code::UnknownModule,
                    callee.span,
                    format!("no module named `{}`", snippet(&module_path)),
                )
                .label("unknown module")
                .help(fuzzy::help(sugg, || format!("the standard library has {}", crate::stdlib::MODULES.join(", ")))),
            );
            return error(span);
        }
        let name = callee.dotted();
        let mut names: Vec<&str> = Builtin::ALL.iter().map(|b| b.name()).collect();
        names.extend(self.modules[m].fns.keys().map(String::as_str));
        let sugg = fuzzy::suggest(&name, names.iter().copied()).map(str::to_string);
        self.err(
            Diagnostic::new(Code::UnknownFunction, callee.span, format!("unknown function `{}`", snippet(&name)))
                .label("not defined")
                .help(fuzzy::help(sugg.as_deref(), || {
                    format!("built-ins are {}", Builtin::ALL.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "))
                })),
        );
        error(span)
    }

    fn call_fn(&mut self, id: usize, args: Vec<hir::Expr>, callee: &ast::Path, span: Span) -> hir::Expr {
        self.functions[id].used = true;
        let decl_span = self.functions[id].decl.name.span;
        if self.functions[id].sig.is_none() && !self.functions[id].checking {
            // Called from a constant or attribute before its turn: check it now.
            self.check_function(id);
        }
        let Some(sig) = self.functions[id].sig.clone() else {
            self.err(
                Diagnostic::new(Code::Recursion, span, format!("`{}` depends on its own result", callee.dotted()))
                    .label("this call is reached while checking the function itself")
                    .with_secondary(decl_span, "the function")
                    .help("a function may not use a constant that calls the function"),
            );
            return error(span);
        };
        if args.len() != sig.params.len() {
            let params: Vec<String> = self.functions[id]
                .decl
                .params
                .iter()
                .map(|p| format!("{}: {}", p.name.name, self.type_text(&p.ty)))
                .collect();
            self.err(
                Diagnostic::new(
                    Code::ArgCount,
                    span,
                    format!(
                        "`{}` takes {} argument{}, found {}",
                        callee.dotted(),
                        sig.params.len(),
                        plural(sig.params.len()),
                        args.len()
                    ),
                )
                .label("wrong number of arguments")
                .with_secondary(decl_span, "defined here")
                .help(format!("`{}` takes ({})", callee.dotted(), params.join(", "))),
            );
            return error(span);
        }
        let mut ok = true;
        for (a, want) in args.iter().zip(&sig.params) {
            ok &= self.expect_type(a, want, "this parameter");
        }
        if !ok || self.functions[id].recursive {
            return error(span);
        }
        expr(H::Call(id, args), sig.ret, span)
    }

    fn type_text(&self, t: &ast::TypeExpr) -> String {
        crate::fmt::type_text(t)
    }

    fn builtin(&mut self, b: Builtin, args: Vec<hir::Expr>, callee_span: Span, span: Span) -> hir::Expr {
        let arity = match b {
            Builtin::Min | Builtin::Max | Builtin::Pow | Builtin::Hash01 | Builtin::Mod => 2,
            Builtin::Clamp => 3,
            _ => 1,
        };
        if args.len() != arity {
            let hint = if matches!(b, Builtin::Min | Builtin::Max) && args.len() == 1 {
                format!("over a list write `{}(x in xs: x)`", b.name())
            } else {
                format!("`{}`", b.signature())
            };
            self.err(
                Diagnostic::new(
                    Code::ArgCount,
                    span,
                    format!("`{}` takes {arity} argument{}, found {}", b.name(), plural(arity), args.len()),
                )
                .label("wrong number of arguments")
                .with_secondary(callee_span, b.signature())
                .help(hint),
            );
            return error(span);
        }
        if args.iter().any(|a| a.ty.is_error()) {
            return error(span);
        }
        let ty = match b {
            Builtin::Min
            | Builtin::Max
            | Builtin::Abs
            | Builtin::Clamp
            | Builtin::Floor
            | Builtin::Ceil
            | Builtin::Round
            | Builtin::Trunc
            | Builtin::Mod => {
                let first = args[0].ty.clone();
                if first.dim().is_none() {
                    self.err(not_a_number(&args[0], b));
                    return error(span);
                }
                for a in &args[1..] {
                    if !self.expect_type(a, &first, &format!("the first argument of `{}`", b.name())) {
                        return error(span);
                    }
                }
                first
            }
            Builtin::Sqrt | Builtin::Exp2 | Builtin::Log | Builtin::Pow => {
                for a in &args {
                    if a.ty.dim() != Some(Dim::NONE) {
                        let d = match &a.ty {
                            Ty::Num(d) => Diagnostic::new(
                                Code::UnitMismatch,
                                a.span,
                                format!("`{}` needs a plain number, found {d}", b.name()),
                            )
                            .label(format!("this is {}", in_unit(*d)))
                            .help("divide by a unit amount first, e.g. `x / 1GiB`"),
                            _ => not_a_number(a, b),
                        };
                        self.err(d);
                        return error(span);
                    }
                }
                Ty::NUMBER
            }
            Builtin::Hash01 => {
                for a in &args {
                    if !matches!(a.ty, Ty::Num(_) | Ty::Str | Ty::Bool | Ty::Enum(_)) {
                        self.err(
                            Diagnostic::new(Code::TypeMismatch, a.span, format!("cannot hash {}", a.ty))
                                .label("hash01 takes numbers, strings, booleans or enum values")
                                .help("hash a field such as `job.id` or `node.name`"),
                        );
                        return error(span);
                    }
                }
                Ty::NUMBER
            }
            Builtin::Has => {
                let a = &args[0];
                let indexed_labels =
                    matches!(&a.kind, H::Index(m, _) if matches!(&m.ty, Ty::Map(k, _) if **k == Ty::Str));
                if !matches!(a.ty, Ty::Optional(_)) && !indexed_labels {
                    self.err(
                        Diagnostic::new(Code::OptionalMisuse, a.span, format!("`has` needs an optional value, found {}", a.ty))
                            .label("this is always present")
                            .help("`has` tests optional fields (`has(job.mig_profile)`) and labels (`has(node.labels[\"k\"])`)"),
                    );
                    return error(span);
                }
                Ty::Bool
            }
            Builtin::Len => {
                if !matches!(args[0].ty, Ty::List(_)) {
                    self.err(
                        Diagnostic::new(
                            Code::NotAList,
                            args[0].span,
                            format!("`len` needs a list, found {}", args[0].ty),
                        )
                        .label("not a list")
                        .help("lists are fields such as `node.cards_list`, or literals `[a, b]`"),
                    );
                    return error(span);
                }
                Ty::NUMBER
            }
        };
        expr(H::Builtin(b, args), ty, span)
    }

    /// A binary operation; one whose operands do not fit the operator becomes an error
    /// node, so nothing folds it into a misleading constant.
    fn binary(&mut self, scope: &mut Scope, op: BinaryOp, a: &ast::Expr, b: &ast::Expr, span: Span) -> hir::Expr {
        let before = self.errors;
        let e = self.binary_operands(scope, op, a, b, span);
        if self.errors > before { error(span) } else { e }
    }

    fn binary_operands(
        &mut self,
        scope: &mut Scope,
        op: BinaryOp,
        a: &ast::Expr,
        b: &ast::Expr,
        span: Span,
    ) -> hir::Expr {
        use BinaryOp as B;
        let x = self.expr(scope, a);
        let y = self.expr(scope, b);
        let out = |ty: Ty, x: hir::Expr, y: hir::Expr| expr(H::Binary(op, Box::new(x), Box::new(y)), ty, span);
        if x.ty.is_error() || y.ty.is_error() {
            let ty = match op {
                B::Implies | B::Or | B::And | B::Eq | B::Ne | B::Lt | B::Le | B::Gt | B::Ge | B::In | B::NotIn => {
                    Ty::Bool
                }
                _ => Ty::Error,
            };
            return out(ty, x, y);
        }
        match op {
            B::Implies | B::Or | B::And => {
                let place = format!("an operand of `{}`", op.symbol());
                self.expect_bool(&x, &place);
                self.expect_bool(&y, &place);
                out(Ty::Bool, x, y)
            }
            B::Eq | B::Ne => {
                match (&x.ty, &y.ty) {
                    (Ty::Optional(inner), _) | (_, Ty::Optional(inner)) => {
                        let inner = (**inner).clone();
                        let at = if matches!(x.ty, Ty::Optional(_)) { x.span } else { y.span };
                        self.err(optional_misuse(at, &inner));
                    }
                    (Ty::Num(_), Ty::Num(_)) => {
                        self.same_unit(&x, &y, a, b, op);
                    }
                    (Ty::List(_), Ty::List(_)) => self.err(
                        Diagnostic::new(
                            Code::TypeMismatch,
                            span,
                            format!("lists cannot be compared with `{}`", op.symbol()),
                        )
                        .label("two lists")
                        .help("test membership with `x in list`, or compare counts with `len(list)`"),
                    ),
                    (Ty::Record(r), Ty::Record(s))
                        if r == s && matches!(r, Record::Queue | Record::Job | Record::Node | Record::Domain) => {}
                    (p, q) if p == q && matches!(p, Ty::Bool | Ty::Str | Ty::Enum(_)) => {
                        if *p == Ty::Str {
                            self.check_queue_name(&x, &y);
                        }
                    }
                    (p, q) => self.err(
                        Diagnostic::new(Code::TypeMismatch, span, format!("cannot compare {p} with {q}"))
                            .label("different types")
                            .with_secondary(x.span, format!("this is {p}"))
                            .with_secondary(y.span, format!("this is {q}"))
                            .help("both sides of `==` and `!=` must have the same type"),
                    ),
                }
                out(Ty::Bool, x, y)
            }
            B::Lt | B::Le | B::Gt | B::Ge => {
                match (&x.ty, &y.ty) {
                    (Ty::Num(_), Ty::Num(_)) => {
                        self.same_unit(&x, &y, a, b, op);
                    }
                    (Ty::Str, _) | (_, Ty::Str) => self.err(string_op(span, op)),
                    (Ty::Optional(inner), _) | (_, Ty::Optional(inner)) => {
                        let inner = (**inner).clone();
                        let at = if matches!(x.ty, Ty::Optional(_)) { x.span } else { y.span };
                        self.err(optional_misuse(at, &inner));
                    }
                    (p, q) => self.err(
                        Diagnostic::new(Code::TypeMismatch, span, format!("cannot order {p} and {q}"))
                            .label(format!("`{}` compares numbers", op.symbol()))
                            .with_secondary(x.span, format!("this is {p}"))
                            .with_secondary(y.span, format!("this is {q}"))
                            .help("only numbers of the same unit have an order"),
                    ),
                }
                out(Ty::Bool, x, y)
            }
            B::In | B::NotIn => {
                match &y.ty {
                    Ty::List(elem) => {
                        let elem = (**elem).clone();
                        if !elem.is_error() {
                            self.expect_type(&x, &elem, "an element of this list");
                        }
                        if x.ty == Ty::Str
                            && let H::List(items) = &y.kind
                        {
                            for i in items {
                                self.check_queue_name(&x, i);
                            }
                        }
                    }
                    other => self.err(
                        Diagnostic::new(
                            Code::NotAList,
                            y.span,
                            format!("`{}` needs a list on the right, found {other}", op.symbol()),
                        )
                        .label("not a list")
                        .help("write a list literal such as `[\"a100\", \"h100\"]`"),
                    ),
                }
                out(Ty::Bool, x, y)
            }
            B::Default => {
                let ty = match &x.ty {
                    Ty::Optional(inner) => {
                        let inner = (**inner).clone();
                        self.expect_type(&y, &inner, "the default");
                        inner
                    }
                    other => {
                        self.err(
                            Diagnostic::new(
                                Code::OptionalMisuse,
                                x.span,
                                format!("`??` needs an optional value on the left, found {other}"),
                            )
                            .label("this is always present")
                            .help("remove the `??` and its default"),
                        );
                        y.ty.clone()
                    }
                };
                out(ty, x, y)
            }
            B::Add | B::Sub | B::Mul | B::Div => {
                let (dx, dy) = match (&x.ty, &y.ty) {
                    (Ty::Num(p), Ty::Num(q)) => (*p, *q),
                    (Ty::Str, _) | (_, Ty::Str) => {
                        self.err(string_op(span, op));
                        return out(Ty::Error, x, y);
                    }
                    (p, q) => {
                        let bad = if matches!(p, Ty::Num(_)) { &y } else { &x };
                        let d = match &bad.ty {
                            Ty::Optional(inner) => optional_misuse(bad.span, inner),
                            t => Diagnostic::new(
                                Code::TypeMismatch,
                                bad.span,
                                format!("`{}` needs numbers, found {t}", op.symbol()),
                            )
                            .label(format!("this is {t}"))
                            .help(format!("arithmetic works on numbers; this is {p} {} {q}", op.symbol())),
                        };
                        self.err(d);
                        return out(Ty::Error, x, y);
                    }
                };
                let ty = match op {
                    B::Mul => Ty::Num(dx.times(dy)),
                    B::Div => Ty::Num(dx.per(dy)),
                    _ => {
                        if !self.same_unit(&x, &y, a, b, op) {
                            return out(Ty::Error, x, y);
                        }
                        Ty::Num(dx)
                    }
                };
                out(ty, x, y)
            }
        }
    }

    /// Reports E0009 unless both numbers have the same unit.
    fn same_unit(&mut self, x: &hir::Expr, y: &hir::Expr, a: &ast::Expr, b: &ast::Expr, op: BinaryOp) -> bool {
        let (Some(p), Some(q)) = (x.ty.dim(), y.ty.dim()) else {
            return true;
        };
        if p == q {
            return true;
        }
        let verb = if op.is_comparison() {
            "compare"
        } else if op == BinaryOp::Add {
            "add"
        } else {
            "subtract"
        };
        let help = if is_bare_number(b) && q.is_none() {
            format!("write the unit on the number, e.g. `{}{}`", crate::fmt::expr_text(b), example_unit(p))
        } else if is_bare_number(a) && p.is_none() {
            format!("write the unit on the number, e.g. `{}{}`", crate::fmt::expr_text(a), example_unit(q))
        } else {
            format!("both sides of `{}` must have the same unit", op.symbol())
        };
        self.err(
            Diagnostic::new(Code::UnitMismatch, x.span.to(y.span), format!("cannot {verb} {p} and {q}"))
                .label("units differ")
                .with_secondary(x.span, format!("this is {}", in_unit(p)))
                .with_secondary(y.span, format!("this is {}", in_unit(q)))
                .help(help),
        );
        false
    }

    /// `job.queue.name == "reserch"`: a string compared with a queue name must name a queue.
    fn check_queue_name(&mut self, x: &hir::Expr, y: &hir::Expr) {
        let is_queue_name = |e: &hir::Expr| matches!(&e.kind, H::Field(_, Record::Queue, i) if Record::Queue.fields().get(usize::from(*i)).is_some_and(|f| f.name == "name"));
        let literal = if is_queue_name(x) {
            y
        } else if is_queue_name(y) {
            x
        } else {
            return;
        };
        let H::Str(s) = &literal.kind else { return };
        if self.queue_names.is_empty() || self.queue_names.iter().any(|q| q == s) {
            return;
        }
        let sugg = fuzzy::suggest(s, self.queue_names.iter().map(String::as_str));
        self.err(
            Diagnostic::new(Code::UnknownQueue, literal.span, format!("no queue is named \"{}\"", snippet(s)))
                .label("unknown queue")
                .help(match sugg {
                    Some(q) => format!("did you mean \"{q}\"?"),
                    None => format!("the queues are {}", self.queue_names.join(", ")),
                }),
        );
    }

    fn unify(&mut self, t: &hir::Expr, f: &hir::Expr, place: &str) -> Ty {
        if t.ty.is_error() || t.ty == f.ty {
            return f.ty.clone();
        }
        if f.ty.is_error() || list_fits(&f.ty, &t.ty) {
            return t.ty.clone();
        }
        if list_fits(&t.ty, &f.ty) {
            return f.ty.clone();
        }
        let d = match (&t.ty, &f.ty) {
            (Ty::Num(p), Ty::Num(q)) => {
                Diagnostic::new(Code::UnitMismatch, t.span.to(f.span), format!("{place} have different units"))
                    .label("units differ")
                    .with_secondary(t.span, format!("this is {}", in_unit(*p)))
                    .with_secondary(f.span, format!("this is {}", in_unit(*q)))
                    .help("give both branches the same unit")
            }
            (p, q) => Diagnostic::new(Code::TypeMismatch, t.span.to(f.span), format!("{place} have different types"))
                .label("types differ")
                .with_secondary(t.span, format!("this is {p}"))
                .with_secondary(f.span, format!("this is {q}"))
                .help("both branches must have the same type"),
        };
        self.err(d);
        Ty::Error
    }

    fn comprehension(
        &mut self,
        scope: &mut Scope,
        kind: CompKind,
        var: &ast::Ident,
        iter: &ast::Expr,
        body: &ast::Expr,
        span: Span,
    ) -> hir::Expr {
        let it = self.expr(scope, iter);
        let elem = match &it.ty {
            Ty::List(e) => (**e).clone(),
            Ty::Error => Ty::Error,
            other => {
                self.err(
                    Diagnostic::new(
                        Code::NotAList,
                        it.span,
                        format!("`{}` iterates over a list, found {other}", kind.keyword()),
                    )
                    .label("not a list")
                    .help("iterate over a list field such as `node.cards_list` or `cluster.task_shapes`"),
                );
                Ty::Error
            }
        };
        let keep = scope.locals.len();
        let id = self.bind(scope, var, elem, false);
        let b = self.expr(scope, body);
        self.pop_scope(scope, keep);
        let ty = match kind {
            CompKind::Any | CompKind::All | CompKind::Count => {
                self.expect_bool(&b, &format!("the condition of `{}`", kind.keyword()));
                if kind == CompKind::Count { Ty::NUMBER } else { Ty::Bool }
            }
            CompKind::Sum | CompKind::Min | CompKind::Max => match &b.ty {
                Ty::Num(_) | Ty::Error => b.ty.clone(),
                other => {
                    self.err(
                        Diagnostic::new(
                            Code::TypeMismatch,
                            b.span,
                            format!("`{}` needs a number for each element, found {other}", kind.keyword()),
                        )
                        .label("not a number")
                        .help(format!(
                            "for a condition use `count(...)` or `any(...)` instead of `{}`",
                            kind.keyword()
                        )),
                    );
                    Ty::Error
                }
            },
        };
        expr(H::Comprehension(kind, id, Box::new(it), Box::new(b)), ty, span)
    }
}

/// A compile-time value as an expression (constants are inlined where they are read).
pub(super) fn value_expr(v: Value, ty: Ty, span: Span) -> hir::Expr {
    let kind = match v {
        Value::Num(n) => H::Num(n),
        Value::Bool(b) => H::Bool(b),
        Value::Str(s) => H::Str(s),
        Value::Enum(k, i) => H::Enum(k, i),
        Value::List(items) => {
            let elem = match &ty {
                Ty::List(e) => (**e).clone(),
                _ => Ty::Error,
            };
            H::List(items.into_iter().map(|i| value_expr(i, elem.clone(), span)).collect())
        }
    };
    expr(kind, ty, span)
}

/// An empty list literal fits any list type.
fn list_fits(got: &Ty, want: &Ty) -> bool {
    matches!((got, want), (Ty::List(g), Ty::List(_)) if g.is_error())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A unit to suggest on a bare number, spelt as the formatter writes it.
fn example_unit(d: Dim) -> &'static str {
    if d == Dim::GPU {
        " gpu"
    } else if d == Dim::CPU {
        " cpu"
    } else if d == Dim::BYTES {
        "GiB"
    } else if d == Dim::TIME {
        "m"
    } else {
        " …"
    }
}

pub(super) fn optional_misuse(span: Span, inner: &Ty) -> Diagnostic {
    Diagnostic::new(Code::OptionalMisuse, span, format!("this {inner} may be absent"))
        .label(format!("optional {inner}"))
        .help("give a default with `??` (`x ?? default`) or test it with `has(x)`")
}

fn string_op(span: Span, op: BinaryOp) -> Diagnostic {
    Diagnostic::new(Code::StringOp, span, format!("strings cannot be used with `{}`", op.symbol()))
        .label("strings support only `==`, `!=`, `in` and `not in`")
        .help("compare a numeric field instead, or test membership in a list of strings")
}

fn not_a_number(a: &hir::Expr, b: Builtin) -> Diagnostic {
    Diagnostic::new(Code::TypeMismatch, a.span, format!("`{}` needs numbers, found {}", b.name(), a.ty))
        .label(format!("this is {}", a.ty))
        .help(format!("`{}`", b.signature()))
}

/// "a plain number" or "in gpu": how labels describe a number's unit.
pub(super) fn in_unit(d: Dim) -> String {
    if d.is_none() { "a plain number".to_string() } else { format!("in {d}") }
}
