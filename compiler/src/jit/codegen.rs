//! IR → Cranelift IR. One native function per entry point of [`crate::eval::Engine`],
//! every rule body inlined into it. Generic over the module so the JIT and object-file
//! output share it. The semantics follow the interpreter exactly (decision D1): IEEE
//! arithmetic in the same order, `min`/`max` as compare-and-select (not the hardware's
//! signed-zero rules), every table read bounds-checked, NaN made canonical where the
//! interpreter makes it canonical.

use super::BackendError;
use super::abi::*;
use crate::eval::NONE;
use crate::hir::Builtin;
use crate::ir::{Bin, Body, CompKind, Elem, Kind, Node, Program, Scalar, VTy};
use crate::schema::{CardRec, NodeRec, Record, Repr, Root, ShapeRec};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, FuncRef, InstBuilder, MemFlagsData, Signature, StackSlotData, StackSlotKind, Type,
    Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_module::{FuncId, Linkage, Module, ModuleError};
use std::collections::HashMap;
use std::mem::{offset_of, size_of};

/// Exported names of the entry points (also the symbols of `gpolc build` objects).
pub const ADMIT: &str = "gpol_admit";
pub const FILTER_SCORE: &str = "gpol_filter_score";
pub const CARD_SCORE: &str = "gpol_card_score";
pub const QUEUE_KEYS: &str = "gpol_queue_keys";
pub const JOB_KEYS: &str = "gpol_job_keys";
pub const GANG: &str = "gpol_gang_applies";
pub const VICTIM: &str = "gpol_victim";
pub const VICTIM_KEYS: &str = "gpol_victim_keys";

/// The helpers generated code imports.
pub const HELPERS: [&str; 3] = ["gpol_exp2", "gpol_log", "gpol_pow"];

/// The entry points of one compiled policy.
pub(crate) struct Entries {
    pub admit: FuncId,
    pub filter_score: FuncId,
    pub card_score: FuncId,
    pub queue_keys: FuncId,
    pub job_keys: FuncId,
    pub gang: FuncId,
    pub victim: FuncId,
    pub victim_keys: FuncId,
}

const PTR: Type = types::I64;

fn flags() -> MemFlagsData {
    // Every pointer generated code dereferences comes from a Rust reference or has been
    // bounds-checked against a length the runtime provided.
    MemFlagsData::trusted()
}

/// The 16-byte stores of a result's zeros: the result buffer (`&mut [NodeResult]`) is
/// aligned to 8 bytes, not 16, so these are not `aligned` (that flag would let Cranelift
/// assume 16 and trap or misbehave otherwise); they cannot trap, as `flags()` says.
fn pair_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Loads of record fields and of the context's tables. The records (`&JobRec`, the
/// `&[NodeRec]` slice, the context's `&` tables) are shared borrows for the whole call:
/// nothing writes them while generated code runs — it writes only the results, a
/// separate `&mut` buffer Rust guarantees does not alias them, and its own stack slots,
/// which these loads never read (list elements are read by `checked_load`, with
/// `flags()`). So the loads are `readonly`: Cranelift's alias analysis reuses a value
/// already loaded from the same address instead of loading it again. (Not `can_move`:
/// that would make them pure to the e-graph, which places pure values at their uses —
/// back inside the per-node loop the job's fields are hoisted out of, `hoist`.)
fn record_flags() -> MemFlagsData {
    flags().with_readonly()
}

/// Whether a value is the same for every node of a `filter_score` pass: it reads the job
/// and the cluster, never the node, a card or a name bound inside the rule.
fn pass_invariant(n: &Node) -> bool {
    match &n.kind {
        Kind::Root(r) => matches!(r, Root::Job | Root::Cluster),
        Kind::Local(_) | Kind::Input(_) | Kind::Let(..) | Kind::Loop { .. } => false,
        _ => n.children().into_iter().all(pass_invariant),
    }
}

/// Defines every entry point of `program` in `module` with the given linkage.
pub(crate) fn define_all<M: Module>(
    module: &mut M,
    program: &Program,
    linkage: Linkage,
) -> Result<Entries, BackendError> {
    define(module, program, linkage).map_err(BackendError::Define)
}

fn define<M: Module>(module: &mut M, program: &Program, linkage: Linkage) -> Result<Entries, Box<ModuleError>> {
    let mut ctx = module.make_context();
    let mut fctx = FunctionBuilderContext::new();
    let mut helpers = Vec::new();
    for (i, name) in HELPERS.iter().enumerate() {
        let mut sig = module.make_signature();
        sig.params.push(AbiParam::new(types::F64));
        if i == 2 {
            sig.params.push(AbiParam::new(types::F64));
        }
        sig.returns.push(AbiParam::new(types::F64));
        helpers.push(module.declare_function(name, Linkage::Import, &sig)?);
    }
    let sig = |module: &M, params: &[Type], ret: Option<Type>| {
        let mut s = module.make_signature();
        s.params.extend(params.iter().map(|t| AbiParam::new(*t)));
        s.returns.extend(ret.map(AbiParam::new));
        s
    };
    let i32t = types::I32;
    let specs: [(&str, Signature); 8] = [
        (ADMIT, sig(module, &[PTR, PTR], Some(i32t))),
        (FILTER_SCORE, sig(module, &[PTR, PTR, PTR, PTR, PTR], None)),
        (CARD_SCORE, sig(module, &[PTR, PTR, PTR, PTR, PTR], Some(types::F64))),
        (QUEUE_KEYS, sig(module, &[PTR, i32t, PTR], None)),
        (JOB_KEYS, sig(module, &[PTR, PTR, PTR], None)),
        (GANG, sig(module, &[PTR, PTR, i32t], Some(types::I8))),
        (VICTIM, sig(module, &[PTR, i32t, PTR, PTR, PTR], Some(types::I8))),
        (VICTIM_KEYS, sig(module, &[PTR, PTR, PTR, PTR], None)),
    ];
    let mut ids = Vec::new();
    for (name, s) in specs {
        let id = module.declare_function(name, linkage, &s)?;
        ctx.func.signature = s;
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let refs: Vec<FuncRef> = helpers.iter().map(|h| module.declare_func_in_func(*h, b.func)).collect();
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let params = b.block_params(entry).to_vec();
            let mut g = Gen::new(&mut b, program, params[0], [refs[0], refs[1], refs[2]]);
            match name {
                ADMIT => g.admit(&params),
                FILTER_SCORE => g.filter_score(&params),
                CARD_SCORE => g.card_score(&params),
                QUEUE_KEYS => g.queue_keys(&params),
                JOB_KEYS => g.job_keys(&params),
                GANG => g.gang(&params),
                VICTIM => g.victim(&params),
                _ => g.victim_keys(&params),
            }
            b.seal_all_blocks();
            b.finalize(module.isa().frontend_config());
        }
        module.define_function(id, &mut ctx)?;
        module.clear_context(&mut ctx);
        ids.push(id);
    }
    Ok(Entries {
        admit: ids[0],
        filter_score: ids[1],
        card_score: ids[2],
        queue_keys: ids[3],
        job_keys: ids[4],
        gang: ids[5],
        victim: ids[6],
        victim_keys: ids[7],
    })
}

/// A value in generated code: one SSA value, or two for lists (pointer, length) and
/// optionals (presence, value).
#[derive(Clone, Copy, Debug)]
enum CV {
    One(Value),
    Two(Value, Value),
}

impl CV {
    fn one(self) -> Value {
        match self {
            CV::One(v) | CV::Two(_, v) => v,
        }
    }

    fn pair(self) -> (Value, Value) {
        match self {
            CV::Two(a, b) => (a, b),
            CV::One(v) => (v, v),
        }
    }

    fn values(self) -> Vec<Value> {
        match self {
            CV::One(v) => vec![v],
            CV::Two(a, b) => vec![a, b],
        }
    }
}

/// Bytes between consecutive elements of a list.
fn stride(e: Elem) -> usize {
    match e {
        Elem::Inline(Record::Card) => size_of::<CardRec>(),
        Elem::Inline(Record::Shape) => size_of::<ShapeRec<'static>>(),
        Elem::Inline(_) => 0,
        Elem::Value(s) => clif(s.vty())[0].bytes() as usize,
    }
}

/// The Cranelift types of an IR type.
fn clif(ty: VTy) -> Vec<Type> {
    match ty {
        VTy::F64 => vec![types::F64],
        VTy::Bool | VTy::U8 => vec![types::I8],
        VTy::Sym => vec![types::I32],
        VTy::Ref(Record::Queue | Record::Domain) => vec![types::I32],
        VTy::Ref(_) | VTy::Mig => vec![PTR],
        VTy::List(_) | VTy::Labels(_) => vec![PTR, PTR],
        VTy::Opt(o) => vec![types::I8, clif(o.inner())[0]],
    }
}

struct Gen<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    p: &'a Program,
    ctx: Value,
    roots: HashMap<Root, Value>,
    locals: HashMap<u32, Vec<Variable>>,
    helpers: [FuncRef; 3],
    /// Values computed once before the per-node loop of `filter_score`, by the address
    /// of their IR node: what reads only the job and the cluster (`hoist`).
    hoisted: HashMap<*const Node, CV>,
    /// The queue and domain tables (start, length, zero record), loaded once before the
    /// per-node loop of `filter_score`.
    tables: HashMap<Record, (Value, Value, Value)>,
}

impl<'a, 'b> Gen<'a, 'b> {
    fn new(b: &'a mut FunctionBuilder<'b>, p: &'a Program, ctx: Value, helpers: [FuncRef; 3]) -> Gen<'a, 'b> {
        let cluster = b.ins().load(PTR, flags(), ctx, CTX_CLUSTER);
        let mut roots = HashMap::new();
        roots.insert(Root::Cluster, cluster);
        Gen { b, p, ctx, roots, locals: HashMap::new(), helpers, hoisted: HashMap::new(), tables: HashMap::new() }
    }

    // ------------------------------------------------------------ entry points

    fn admit(&mut self, params: &[Value]) {
        self.roots.insert(Root::Job, params[1]);
        for (i, r) in self.p.admit.iter().enumerate() {
            let ok = self.body(&r.body).one();
            let next = self.b.create_block();
            let reject = self.b.create_block();
            self.b.ins().brif(ok, next, &[], reject, &[]);
            self.b.switch_to_block(reject);
            let idx = self.b.ins().iconst(types::I32, i as i64);
            self.b.ins().return_(&[idx]);
            self.b.switch_to_block(next);
        }
        let none = self.b.ins().iconst(types::I32, -1);
        self.b.ins().return_(&[none]);
    }

    fn filter_score(&mut self, params: &[Value]) {
        let (job, nodes, n, out) = (params[1], params[2], params[3], params[4]);
        self.roots.insert(Root::Job, job);
        let i = self.b.declare_var(PTR);
        let zero = self.b.ins().iconst(PTR, 0);
        self.b.def_var(i, zero);
        let header = self.b.create_block();
        let body = self.b.create_block();
        let next = self.b.create_block();
        let done = self.b.create_block();
        // What reads only the job and the cluster is the same for every node: computed
        // once, here, instead of in every iteration; so are the tables' addresses.
        let queues = self.table(CTX_QUEUES, CTX_N_QUEUES, CTX_ZERO_QUEUE);
        let domains = self.table(CTX_DOMAINS, CTX_N_DOMAINS, CTX_ZERO_DOMAIN);
        self.tables.extend([(Record::Queue, queues), (Record::Domain, domains)]);
        for fi in self.p.filter_order.clone() {
            self.hoist(&self.p.filters[fi].body.node);
        }
        for r in &self.p.scores {
            self.hoist(&r.body.node);
        }
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(header);
        let iv = self.b.use_var(i);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, iv, n);
        self.b.ins().brif(more, body, &[], done, &[]);

        self.b.switch_to_block(body);
        let iv = self.b.use_var(i);
        let node_off = self.b.ins().imul_imm_u(iv, size_of::<NodeRec>() as i64);
        let node = self.b.ins().iadd(nodes, node_off);
        let res_off = self.b.ins().imul_imm_u(iv, OUT_SIZE);
        let res = self.b.ins().iadd(out, res_off);
        self.roots.insert(Root::Node, node);
        let fzero = self.b.ins().f64const(0.0);
        let izero32 = self.b.ins().iconst(types::I32, 0);
        for &fi in &self.p.filter_order.clone() {
            let pass = self.b.create_block();
            let reject = self.b.create_block();
            // Rejections leave the hot path: laid out after it.
            self.b.set_cold_block(reject);
            self.locals.clear();
            self.branch(&self.p.filters[fi].body.node, pass, reject);
            self.b.switch_to_block(reject);
            self.store_result(res, false, u16::try_from(fi).unwrap_or(NONE), [fzero; 4], fzero, izero32);
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(pass);
        }
        let mut tiers = [fzero; 4];
        let mut score = fzero;
        let mut faults = izero32;
        for r in &self.p.scores.clone() {
            let raw = self.body(&r.body).one();
            let s;
            (s, faults) = self.clamp_score(raw, faults);
            match r.tier {
                Some(t) => {
                    let slot = usize::from(t).saturating_sub(1).min(3);
                    tiers[slot] = self.b.ins().fadd(tiers[slot], s);
                }
                // × 1 is exact: no multiplication.
                None if r.weight == 1.0 => score = self.b.ins().fadd(score, s),
                None => {
                    let w = self.b.ins().f64const(r.weight);
                    let ws = self.b.ins().fmul(w, s);
                    score = self.b.ins().fadd(score, ws);
                }
            }
        }
        self.store_result(res, true, NONE, tiers, score, faults);
        self.b.ins().jump(next, &[]);

        self.b.switch_to_block(next);
        let iv = self.b.use_var(i);
        let iv1 = self.b.ins().iadd_imm_u(iv, 1);
        self.b.def_var(i, iv1);
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(done);
        self.b.ins().return_(&[]);
    }

    /// Computes, where the builder is, every largest part of `n` that reads neither the
    /// node nor anything bound inside the rule, and keeps it for `expr`. Computing such a
    /// part where the rule might not have (behind a short-circuit or an `if`) is safe: the
    /// code has no side effects and cannot trap (every load is of a record or bounds-
    /// checked); it runs once instead of once a node.
    fn hoist(&mut self, n: &'a Node) {
        if pass_invariant(n) {
            if !matches!(n.kind, Kind::Num(_) | Kind::Bool(_) | Kind::Enum(_) | Kind::Root(_)) {
                let v = self.expr(n);
                self.hoisted.insert(n, v);
            }
            return;
        }
        for c in n.children() {
            self.hoist(c);
        }
    }

    /// Writes one `NodeResult` (`#[repr(C)]`, 56 bytes): the flag and the filter's index in
    /// one 32-bit store (the byte between them is padding), the zeros of a rejection or of
    /// unused tiers as 16-byte stores — fewer stores per node than field by field.
    fn store_result(
        &mut self,
        res: Value,
        feasible: bool,
        rejected_by: u16,
        tiers: [Value; 4],
        score: Value,
        faults: Value,
    ) {
        const { assert!(OUT_REJECTED_BY == OUT_FEASIBLE + 2 && OUT_TIERS == 8 && OUT_SCORE == 40) };
        const { assert!(OUT_FAULTS == 48 && OUT_SIZE == 56) };
        // The head store puts `feasible` in the low byte: little-endian targets only.
        const { assert!(cfg!(target_endian = "little")) };
        let head = self.b.ins().iconst(types::I32, i64::from(feasible) | (i64::from(rejected_by) << 16));
        self.b.ins().store(flags(), head, res, OUT_FEASIBLE);
        let fzero = self.b.ins().f64const(0.0);
        let zeros = self.b.ins().splat(types::F64X2, fzero);
        let untiered = tiers.iter().all(|&t| t == tiers[0]) && self.b.func.dfg.value_type(tiers[0]) == types::F64;
        if untiered && !feasible {
            for off in [OUT_TIERS, OUT_TIERS + 16, OUT_SCORE] {
                self.b.ins().store(pair_flags(), zeros, res, off);
            }
            return;
        }
        if untiered {
            let both = self.b.ins().splat(types::F64X2, tiers[0]);
            for off in [OUT_TIERS, OUT_TIERS + 16] {
                self.b.ins().store(pair_flags(), both, res, off);
            }
        } else {
            for (k, t) in tiers.iter().enumerate() {
                self.b.ins().store(flags(), *t, res, OUT_TIERS + 8 * k as i32);
            }
        }
        self.b.ins().store(flags(), score, res, OUT_SCORE);
        self.b.ins().store(flags(), faults, res, OUT_FAULTS);
    }

    /// D4: NaN and values below 0 become 0, above 1 become 1; each is a fault, added to
    /// `faults`. A score in [0, 1] passes two compares and branches; the rest is cold.
    fn clamp_score(&mut self, x: Value, faults: Value) -> (Value, Value) {
        let zero = self.b.ins().f64const(0.0);
        let one = self.b.ins().f64const(1.0);
        let upper = self.b.create_block();
        let fix = self.b.create_block();
        let merge = self.b.create_block();
        self.b.set_cold_block(fix);
        self.b.append_block_param(merge, types::F64);
        self.b.append_block_param(merge, types::I32);
        // `>=` is false for NaN.
        let low_ok = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, zero);
        self.b.ins().brif(low_ok, upper, &[], fix, &[]);
        self.b.switch_to_block(upper);
        // Not NaN here, so `not >` is `<=`; `>` compares with the constant in memory.
        let high = self.b.ins().fcmp(FloatCC::GreaterThan, x, one);
        self.b.ins().brif(high, fix, &[], merge, &[BlockArg::Value(x), BlockArg::Value(faults)]);
        self.b.switch_to_block(fix);
        let high = self.b.ins().fcmp(FloatCC::GreaterThan, x, one);
        let s = self.b.ins().select(high, one, zero);
        let more = self.b.ins().iadd_imm_u(faults, 1);
        self.b.ins().jump(merge, &[BlockArg::Value(s), BlockArg::Value(more)]);
        self.b.switch_to_block(merge);
        let params = self.b.block_params(merge);
        (params[0], params[1])
    }

    fn card_score(&mut self, params: &[Value]) {
        self.roots.insert(Root::Job, params[1]);
        self.roots.insert(Root::Node, params[2]);
        self.roots.insert(Root::Card, params[3]);
        let mut total = self.b.ins().f64const(0.0);
        let mut faults = self.b.ins().iconst(types::I32, 0);
        for r in &self.p.card_scores.clone() {
            let raw = self.body(&r.body).one();
            let s;
            (s, faults) = self.clamp_score(raw, faults);
            let w = self.b.ins().f64const(r.weight);
            let ws = self.b.ins().fmul(w, s);
            total = self.b.ins().fadd(total, ws);
        }
        self.b.ins().store(flags(), faults, params[4], 0);
        self.b.ins().return_(&[total]);
    }

    fn keys(&mut self, keys: &[crate::ir::OrderKey], out: Value) {
        for (k, key) in keys.iter().enumerate() {
            let v = self.body(&key.body).one();
            let v = self.as_key(v, key.body.node.ty);
            self.b.ins().store(flags(), v, out, 8 * k as i32);
        }
        self.b.ins().return_(&[]);
    }

    /// An order key or cost as a canonical number: booleans as 0/1, one NaN.
    fn as_key(&mut self, v: Value, ty: VTy) -> Value {
        let x = if ty == VTy::Bool {
            let w = self.b.ins().uextend(types::I32, v);
            self.b.ins().fcvt_from_uint(types::F64, w)
        } else {
            v
        };
        self.canonical(x)
    }

    fn canonical(&mut self, x: Value) -> Value {
        let nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let canon = self.b.ins().f64const(f64::NAN);
        self.b.ins().select(nan, canon, x)
    }

    fn queue_keys(&mut self, params: &[Value]) {
        self.roots.insert(Root::Queue, params[1]);
        let keys = self.p.queue_order.clone();
        self.keys(&keys, params[2]);
    }

    fn job_keys(&mut self, params: &[Value]) {
        self.roots.insert(Root::Job, params[1]);
        let keys = self.p.job_order.clone();
        self.keys(&keys, params[2]);
    }

    fn victim_keys(&mut self, params: &[Value]) {
        self.roots.insert(Root::Claimant, params[1]);
        self.roots.insert(Root::Victim, params[2]);
        let keys = self.p.victim_order.clone();
        self.keys(&keys, params[3]);
    }

    fn gang(&mut self, params: &[Value]) {
        self.roots.insert(Root::Job, params[1]);
        let clause = params[2];
        for (i, g) in self.p.gang.clone().iter().enumerate() {
            let this = self.b.create_block();
            let other = self.b.create_block();
            let is = self.b.ins().icmp_imm_u(IntCC::Equal, clause, i as i64);
            self.b.ins().brif(is, this, &[], other, &[]);
            self.b.switch_to_block(this);
            let v = match &g.when {
                Some(w) => self.body(w).one(),
                None => self.b.ins().iconst(types::I8, 1),
            };
            self.b.ins().return_(&[v]);
            self.b.switch_to_block(other);
        }
        let no = self.b.ins().iconst(types::I8, 0);
        self.b.ins().return_(&[no]);
    }

    fn victim(&mut self, params: &[Value]) {
        let (rule, cost_out) = (params[1], params[4]);
        self.roots.insert(Root::Claimant, params[2]);
        self.roots.insert(Root::Victim, params[3]);
        for (i, r) in self.p.victims.clone().iter().enumerate() {
            let this = self.b.create_block();
            let other = self.b.create_block();
            let is = self.b.ins().icmp_imm_u(IntCC::Equal, rule, i as i64);
            self.b.ins().brif(is, this, &[], other, &[]);
            self.b.switch_to_block(this);
            let ok = self.body(&r.when).one();
            let cost = match &r.cost {
                Some(c) => {
                    let v = self.body(c).one();
                    self.canonical(v)
                }
                None => self.b.ins().f64const(0.0),
            };
            self.b.ins().store(flags(), cost, cost_out, 0);
            self.b.ins().return_(&[ok]);
            self.b.switch_to_block(other);
        }
        let zero = self.b.ins().f64const(0.0);
        self.b.ins().store(flags(), zero, cost_out, 0);
        let no = self.b.ins().iconst(types::I8, 0);
        self.b.ins().return_(&[no]);
    }

    // ------------------------------------------------------------ expressions

    /// A rule body: its locals are its own.
    fn body(&mut self, body: &Body) -> CV {
        self.locals.clear();
        self.expr(&body.node)
    }

    fn expr(&mut self, n: &Node) -> CV {
        if let Some(v) = self.hoisted.get(&std::ptr::from_ref(n)) {
            return *v;
        }
        match &n.kind {
            Kind::Num(x) => CV::One(self.b.ins().f64const(*x)),
            Kind::Bool(v) => CV::One(self.b.ins().iconst(types::I8, i64::from(*v))),
            Kind::Enum(e) => CV::One(self.b.ins().iconst(types::I8, i64::from(*e))),
            Kind::Str(i) => {
                let idx = self.b.ins().iconst(PTR, i64::from(*i));
                CV::One(self.literal(idx))
            }
            Kind::Local(l) => {
                let vars = self.locals.get(l).cloned().unwrap_or_default();
                let vals: Vec<Value> = vars.iter().map(|v| self.b.use_var(*v)).collect();
                match vals.as_slice() {
                    [a, b] => CV::Two(*a, *b),
                    [a] => CV::One(*a),
                    _ => {
                        crate::never!("local {l} read before it is defined");
                        self.zero(n.ty)
                    }
                }
            }
            Kind::Input(i) => {
                crate::never!("input {i} compiled: only test expectations read inputs, and they are interpreted");
                self.zero(n.ty)
            }
            Kind::Root(r) => match self.roots.get(r) {
                Some(v) => CV::One(*v),
                None => {
                    crate::never!("{r:?} read where the rule has no such root");
                    self.zero(n.ty)
                }
            },
            Kind::Field { base, record, field } => {
                let base = self.expr(base).one();
                let ptr = self.record_ptr(base, *record);
                match record.fields().get(usize::from(*field)) {
                    Some(f) => self.load(ptr, f.offset as i32, f.repr),
                    None => {
                        crate::never!("field {field} of {} does not exist", record.name());
                        self.zero(n.ty)
                    }
                }
            }
            Kind::Domain { node, level } => {
                let node = self.expr(node).one();
                if usize::from(*level) >= crate::schema::MAX_LEVELS {
                    return CV::One(self.b.ins().iconst(types::I32, i64::from(u32::MAX)));
                }
                let off = (offset_of!(NodeRec<'static>, domains) + 4 * usize::from(*level)) as i32;
                CV::One(self.b.ins().load(types::I32, flags(), node, off))
            }
            Kind::Attr { queue, attr } => {
                let q = self.expr(queue).one();
                self.attr(q, *attr, n.ty)
            }
            Kind::Label { labels, slot } => {
                let (ptr, len) = self.expr(labels).pair();
                let slot = self.b.ins().iconst(PTR, i64::from(*slot));
                CV::One(self.checked_load(ptr, len, slot, 4, types::I32))
            }
            Kind::Mig { counts, profile } => {
                let ptr = self.expr(counts).one();
                let p = self.expr(profile).one();
                let p = self.b.ins().uextend(PTR, p);
                let len = self.b.ins().iconst(PTR, crate::schema::MIG_PROFILES.len() as i64);
                CV::One(self.checked_load(ptr, len, p, 8, types::F64))
            }
            Kind::Not(x) => {
                let v = self.expr(x).one();
                CV::One(self.b.ins().bxor_imm_u(v, 1))
            }
            Kind::Neg(x) => {
                let v = self.expr(x).one();
                CV::One(self.b.ins().fneg(v))
            }
            Kind::Bin(Bin::And, a, b) => self.short_circuit(a, b, true),
            Kind::Bin(Bin::Or, a, b) => self.short_circuit(a, b, false),
            Kind::Bin(op, a, b) => {
                let x = self.expr(a).one();
                let y = self.expr(b).one();
                CV::One(self.binary(*op, x, y))
            }
            Kind::If(c, t, f) => {
                let cond = self.expr(c).one();
                let then_b = self.b.create_block();
                let else_b = self.b.create_block();
                let merge = self.b.create_block();
                let tys = clif(n.ty);
                for t in &tys {
                    self.b.append_block_param(merge, *t);
                }
                self.b.ins().brif(cond, then_b, &[], else_b, &[]);
                self.b.switch_to_block(then_b);
                let tv = self.expr(t).values();
                let targs: Vec<BlockArg> = tv.into_iter().map(BlockArg::Value).collect();
                self.b.ins().jump(merge, &targs);
                self.b.switch_to_block(else_b);
                let fv = self.expr(f).values();
                let fargs: Vec<BlockArg> = fv.into_iter().map(BlockArg::Value).collect();
                self.b.ins().jump(merge, &fargs);
                self.b.switch_to_block(merge);
                let ps = self.b.block_params(merge).to_vec();
                match ps.as_slice() {
                    [a, b] => CV::Two(*a, *b),
                    [a] => CV::One(*a),
                    _ => {
                        crate::never!("an `if` of type {} has no value", n.ty);
                        self.zero(n.ty)
                    }
                }
            }
            Kind::Let(l, v, body) => {
                let val = self.expr(v);
                self.define(*l, v.ty, val);
                self.expr(body)
            }
            Kind::IsSome(x) => {
                let v = self.expr(x);
                CV::One(match (x.ty, v) {
                    (VTy::Opt(_), CV::Two(present, _)) => present,
                    (VTy::Sym, CV::One(s)) => self.b.ins().icmp_imm_u(IntCC::NotEqual, s, 0),
                    _ => self.b.ins().iconst(types::I8, 1),
                })
            }
            Kind::Unwrap(x) => CV::One(self.expr(x).one()),
            Kind::Len(x) => {
                let (_, len) = self.expr(x).pair();
                CV::One(self.b.ins().fcvt_from_uint(types::F64, len))
            }
            Kind::Loop { kind, var, list, body } => self.comprehension(*kind, *var, list, body),
            Kind::Call(b, args) => {
                let vals: Vec<(Value, VTy)> = args.iter().map(|a| (self.expr(a).one(), a.ty)).collect();
                CV::One(self.call(*b, &vals))
            }
            Kind::ListLit(items) => {
                // Elements go to a stack slot of this function; the list is (address, length).
                let e = match n.ty {
                    VTy::List(e) => e,
                    _ => Elem::Value(Scalar::F64),
                };
                let size = stride(e) * items.len();
                let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    size.max(1) as u32,
                    3,
                ));
                for (k, item) in items.iter().enumerate() {
                    let v = self.expr(item).one();
                    self.b.ins().stack_store(PTR, v, slot, (k * stride(e)) as i32);
                }
                let addr = self.b.ins().stack_addr(PTR, slot, 0);
                let len = self.b.ins().iconst(PTR, items.len() as i64);
                CV::Two(addr, len)
            }
        }
    }

    fn zero(&mut self, ty: VTy) -> CV {
        let vals: Vec<Value> = clif(ty)
            .into_iter()
            .map(|t| if t == types::F64 { self.b.ins().f64const(0.0) } else { self.b.ins().iconst(t, 0) })
            .collect();
        match vals.as_slice() {
            [a, b] => CV::Two(*a, *b),
            [a] => CV::One(*a),
            _ => CV::One(self.b.ins().iconst(types::I8, 0)),
        }
    }

    fn define(&mut self, l: u32, ty: VTy, val: CV) {
        let tys = clif(ty);
        let vars: Vec<Variable> = match self.locals.get(&l) {
            Some(v) => v.clone(),
            None => {
                let v: Vec<Variable> = tys.iter().map(|t| self.b.declare_var(*t)).collect();
                self.locals.insert(l, v.clone());
                v
            }
        };
        for (var, value) in vars.iter().zip(val.values()) {
            self.b.def_var(*var, value);
        }
    }

    /// Control flow for a condition: to `yes` where it holds, else to `no`, without
    /// materialising `and`, `or` and `not` as values (a compare feeds its branch).
    fn branch(&mut self, n: &Node, yes: Block, no: Block) {
        if !self.hoisted.contains_key(&std::ptr::from_ref(n)) {
            match &n.kind {
                Kind::Bool(v) => {
                    self.b.ins().jump(if *v { yes } else { no }, &[]);
                    return;
                }
                Kind::Not(x) => return self.branch(x, no, yes),
                Kind::Bin(op @ (Bin::And | Bin::Or), a, b) => {
                    let rhs = self.b.create_block();
                    match op {
                        Bin::And => self.branch(a, rhs, no),
                        _ => self.branch(a, yes, rhs),
                    }
                    self.b.switch_to_block(rhs);
                    return self.branch(b, yes, no);
                }
                _ => {}
            }
        }
        let v = self.expr(n).one();
        self.b.ins().brif(v, yes, &[], no, &[]);
    }

    /// `a && b` / `a || b` without evaluating `b` when `a` decides.
    fn short_circuit(&mut self, a: &Node, b: &Node, and: bool) -> CV {
        let x = self.expr(a).one();
        let rhs = self.b.create_block();
        let merge = self.b.create_block();
        self.b.append_block_param(merge, types::I8);
        let decided = [BlockArg::Value(x)];
        if and {
            self.b.ins().brif(x, rhs, &[], merge, &decided);
        } else {
            self.b.ins().brif(x, merge, &decided, rhs, &[]);
        }
        self.b.switch_to_block(rhs);
        let y = self.expr(b).one();
        self.b.ins().jump(merge, &[BlockArg::Value(y)]);
        self.b.switch_to_block(merge);
        CV::One(self.b.block_params(merge)[0])
    }

    fn binary(&mut self, op: Bin, x: Value, y: Value) -> Value {
        let ins = self.b.ins();
        match op {
            Bin::Add => ins.fadd(x, y),
            Bin::Sub => ins.fsub(x, y),
            Bin::Mul => ins.fmul(x, y),
            Bin::Div => ins.fdiv(x, y),
            Bin::Lt => ins.fcmp(FloatCC::LessThan, x, y),
            Bin::Le => ins.fcmp(FloatCC::LessThanOrEqual, x, y),
            Bin::Gt => ins.fcmp(FloatCC::GreaterThan, x, y),
            Bin::Ge => ins.fcmp(FloatCC::GreaterThanOrEqual, x, y),
            Bin::Eq => ins.fcmp(FloatCC::Equal, x, y),
            Bin::Ne => ins.fcmp(FloatCC::NotEqual, x, y),
            Bin::BitEq => ins.icmp(IntCC::Equal, x, y),
            Bin::BitNe => ins.icmp(IntCC::NotEqual, x, y),
            Bin::And => ins.band(x, y),
            Bin::Or => ins.bor(x, y),
        }
    }

    /// `ops::min`/`ops::max`: NaN if either is NaN, else the smaller (larger); the first
    /// of two equal values (so -0.0 and 0.0 keep their order).
    fn min_max(&mut self, a: Value, b: Value, max: bool) -> Value {
        let cc = if max { FloatCC::GreaterThan } else { FloatCC::LessThan };
        let better = self.b.ins().fcmp(cc, b, a);
        let r = self.b.ins().select(better, b, a);
        let uno = self.b.ins().fcmp(FloatCC::Unordered, a, b);
        let nan = self.b.ins().f64const(f64::NAN);
        self.b.ins().select(uno, nan, r)
    }

    /// Round half away from zero, as `f64::round`: the integer part, moved one away from
    /// zero when the exact fractional part (`x − trunc(x)` is exact) is at least a half.
    /// NaN stays NaN; ±inf give NaN fractions, so no comparison holds and they stay.
    fn round(&mut self, x: Value) -> Value {
        let t = self.b.ins().trunc(x);
        let frac = self.b.ins().fsub(x, t);
        let half = self.b.ins().f64const(0.5);
        let minus_half = self.b.ins().f64const(-0.5);
        let one = self.b.ins().f64const(1.0);
        let up = self.b.ins().fadd(t, one);
        let down = self.b.ins().fsub(t, one);
        let ge = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, frac, half);
        let le = self.b.ins().fcmp(FloatCC::LessThanOrEqual, frac, minus_half);
        let r = self.b.ins().select(le, down, t);
        self.b.ins().select(ge, up, r)
    }

    fn call(&mut self, b: Builtin, args: &[(Value, VTy)]) -> Value {
        let a = |i: usize| args.get(i).map(|x| x.0);
        let (Some(x), y, z) = (a(0), a(1), a(2)) else {
            crate::never!("{b:?} called without arguments");
            return self.b.ins().f64const(f64::NAN);
        };
        match b {
            Builtin::Min => self.min_max(x, y.unwrap_or(x), false),
            Builtin::Max => self.min_max(x, y.unwrap_or(x), true),
            Builtin::Abs => self.b.ins().fabs(x),
            Builtin::Clamp => {
                let lo = self.min_max(x, y.unwrap_or(x), true);
                self.min_max(lo, z.unwrap_or(x), false)
            }
            Builtin::Floor => self.b.ins().floor(x),
            Builtin::Ceil => self.b.ins().ceil(x),
            Builtin::Trunc => self.b.ins().trunc(x),
            Builtin::Round => self.round(x),
            Builtin::Mod => {
                // `ops::modulo`'s three operations, in its order.
                let y = y.unwrap_or(x);
                let q = self.b.ins().fdiv(x, y);
                let q = self.b.ins().floor(q);
                let p = self.b.ins().fmul(y, q);
                self.b.ins().fsub(x, p)
            }
            Builtin::Sqrt => self.b.ins().sqrt(x),
            Builtin::Exp2 | Builtin::Log | Builtin::Pow => {
                let (f, call_args) = match b {
                    Builtin::Exp2 => (self.helpers[0], vec![x]),
                    Builtin::Log => (self.helpers[1], vec![x]),
                    _ => (self.helpers[2], vec![x, y.unwrap_or(x)]),
                };
                let inst = self.b.ins().call(f, &call_args);
                self.b.inst_results(inst)[0]
            }
            Builtin::Hash01 => {
                let ka = self.hash_key(args[0]);
                let kb = match args.get(1) {
                    Some(v) => self.hash_key(*v),
                    None => self.b.ins().iconst(types::I64, 0),
                };
                self.hash01(ka, kb)
            }
            Builtin::Has | Builtin::Len => {
                crate::never!("{b:?} reached code generation: lowering turns it into its own node");
                self.b.ins().f64const(f64::NAN)
            }
        }
    }

    /// `ops::num_key`, `str_key` via the symbol table, booleans and enums as integers.
    fn hash_key(&mut self, (v, ty): (Value, VTy)) -> Value {
        match ty {
            VTy::F64 => {
                let bits = self.b.ins().bitcast(types::I64, MemFlagsData::new(), v);
                let zero_f = self.b.ins().f64const(0.0);
                let is_zero = self.b.ins().fcmp(FloatCC::Equal, v, zero_f);
                let zero_i = self.b.ins().iconst(types::I64, 0);
                let r = self.b.ins().select(is_zero, zero_i, bits);
                let is_nan = self.b.ins().fcmp(FloatCC::Unordered, v, v);
                let nan_bits = self.b.ins().iconst(types::I64, f64::NAN.to_bits() as i64);
                self.b.ins().select(is_nan, nan_bits, r)
            }
            VTy::Bool | VTy::U8 => self.b.ins().uextend(types::I64, v),
            VTy::Sym => {
                let idx = self.b.ins().uextend(PTR, v);
                let ptr = self.b.ins().load(PTR, flags(), self.ctx, CTX_SYM_HASHES);
                let len = self.b.ins().load(PTR, flags(), self.ctx, CTX_N_HASHES);
                self.checked_load(ptr, len, idx, 8, types::I64)
            }
            other => {
                crate::never!("hash01 of a {other} value: the checker allows numbers, flags, enums and strings");
                self.b.ins().iconst(types::I64, 0)
            }
        }
    }

    /// `ops::hash01`, instruction for instruction.
    fn hash01(&mut self, a: Value, b: Value) -> Value {
        let rot = self.b.ins().rotl_imm_u(b, 32);
        let z = self.b.ins().bxor(a, rot);
        let z = self.b.ins().bxor_imm_u(z, 0x9E37_79B9_7F4A_7C15_u64 as i64);
        let s = self.b.ins().ushr_imm_u(z, 30);
        let z = self.b.ins().bxor(z, s);
        let z = self.b.ins().imul_imm_u(z, 0xBF58_476D_1CE4_E5B9_u64 as i64);
        let s = self.b.ins().ushr_imm_u(z, 27);
        let z = self.b.ins().bxor(z, s);
        let z = self.b.ins().imul_imm_u(z, 0x94D0_49BB_1331_11EB_u64 as i64);
        let s = self.b.ins().ushr_imm_u(z, 31);
        let z = self.b.ins().bxor(z, s);
        let top = self.b.ins().ushr_imm_u(z, 11);
        let f = self.b.ins().fcvt_from_uint(types::F64, top);
        let scale = self.b.ins().f64const((1u64 << 53) as f64);
        self.b.ins().fdiv(f, scale)
    }

    fn comprehension(&mut self, kind: CompKind, var: u32, list: &Node, body: &Node) -> CV {
        let (ptr, len) = self.expr(list).pair();
        let e = match list.ty {
            VTy::List(e) => e,
            _ => Elem::Value(Scalar::Sym),
        };
        let (stride, elem) = (stride(e), e.vty());
        let acc_ty = if matches!(kind, CompKind::Any | CompKind::All) { types::I8 } else { types::F64 };
        let i = self.b.declare_var(PTR);
        let acc = self.b.declare_var(acc_ty);
        let zero = self.b.ins().iconst(PTR, 0);
        self.b.def_var(i, zero);
        let init = match kind {
            CompKind::Any => self.b.ins().iconst(types::I8, 0),
            CompKind::All => self.b.ins().iconst(types::I8, 1),
            CompKind::Count | CompKind::Sum => self.b.ins().f64const(0.0),
            CompKind::Min => self.b.ins().f64const(f64::INFINITY),
            CompKind::Max => self.b.ins().f64const(f64::NEG_INFINITY),
        };
        self.b.def_var(acc, init);
        let header = self.b.create_block();
        let step = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);

        self.b.switch_to_block(header);
        let iv = self.b.use_var(i);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, iv, len);
        self.b.ins().brif(more, step, &[], exit, &[]);

        self.b.switch_to_block(step);
        let iv = self.b.use_var(i);
        let off = self.b.ins().imul_imm_u(iv, stride as i64);
        let addr = self.b.ins().iadd(ptr, off);
        let item = match e {
            Elem::Inline(_) => addr,
            Elem::Value(s) => self.b.ins().load(clif(s.vty())[0], flags(), addr, 0),
        };
        self.define(var, elem, CV::One(item));
        let v = self.expr(body).one();
        let a = self.b.use_var(acc);
        let next_i = self.b.ins().iadd_imm_u(iv, 1);
        self.b.def_var(i, next_i);
        match kind {
            CompKind::Any | CompKind::All => {
                // Stop at the first element that decides.
                let decided = if kind == CompKind::Any { v } else { self.b.ins().bxor_imm_u(v, 1) };
                let result = self.b.ins().iconst(types::I8, i64::from(kind == CompKind::Any));
                let stop = self.b.create_block();
                self.b.ins().brif(decided, stop, &[], header, &[]);
                self.b.switch_to_block(stop);
                self.b.def_var(acc, result);
                self.b.ins().jump(exit, &[]);
                let _ = a;
            }
            _ => {
                let next = match kind {
                    CompKind::Count => {
                        let one = self.b.ins().f64const(1.0);
                        let zero = self.b.ins().f64const(0.0);
                        let inc = self.b.ins().select(v, one, zero);
                        self.b.ins().fadd(a, inc)
                    }
                    CompKind::Sum => self.b.ins().fadd(a, v),
                    CompKind::Min => self.min_max(a, v, false),
                    _ => self.min_max(a, v, true),
                };
                self.b.def_var(acc, next);
                self.b.ins().jump(header, &[]);
            }
        }
        self.b.switch_to_block(exit);
        CV::One(self.b.use_var(acc))
    }

    // ------------------------------------------------------------ memory

    /// A record's address: pointers are themselves; queue and domain indices are looked
    /// up in the context's tables, out-of-range ones read an all-zero record.
    fn record_ptr(&mut self, base: Value, record: Record) -> Value {
        let (table, len, zero, size) = match record {
            Record::Queue => (CTX_QUEUES, CTX_N_QUEUES, CTX_ZERO_QUEUE, size_of::<crate::schema::QueueRec>()),
            Record::Domain => (CTX_DOMAINS, CTX_N_DOMAINS, CTX_ZERO_DOMAIN, size_of::<crate::schema::DomainRec>()),
            _ => return base,
        };
        let (start, n, zero_rec) = match self.tables.get(&record) {
            Some(&t) => t,
            None => self.table(table, len, zero),
        };
        let idx = self.b.ins().uextend(PTR, base);
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, idx, n);
        let off = self.b.ins().imul_imm_u(idx, size as i64);
        let at = self.b.ins().iadd(start, off);
        self.b.ins().select(inside, at, zero_rec)
    }

    /// A context table's start, length and zero record, from their offsets in the context.
    fn table(&mut self, table: i32, len: i32, zero: i32) -> (Value, Value, Value) {
        let start = self.b.ins().load(PTR, record_flags(), self.ctx, table);
        let n = self.b.ins().load(PTR, record_flags(), self.ctx, len);
        let zero_rec = self.b.ins().load(PTR, record_flags(), self.ctx, zero);
        (start, n, zero_rec)
    }

    fn load(&mut self, ptr: Value, offset: i32, repr: Repr) -> CV {
        let f = record_flags();
        match repr {
            Repr::F64 => CV::One(self.b.ins().load(types::F64, f, ptr, offset)),
            Repr::Bool | Repr::U8 => CV::One(self.b.ins().load(types::I8, f, ptr, offset)),
            Repr::Sym | Repr::U32 => CV::One(self.b.ins().load(types::I32, f, ptr, offset)),
            Repr::Opt { value, present } => {
                let p = self.b.ins().load(types::I8, f, ptr, offset + present as i32);
                let v = self.load(ptr, offset, *value).one();
                CV::Two(p, v)
            }
            Repr::Resources | Repr::Mig => CV::One(self.b.ins().iadd_imm_u(ptr, i64::from(offset))),
            Repr::List => {
                let p = self.b.ins().load(PTR, f, ptr, offset + crate::schema::LIST_PTR as i32);
                let n = self.b.ins().load(PTR, f, ptr, offset + crate::schema::LIST_LEN as i32);
                CV::Two(p, n)
            }
        }
    }

    /// `ptr[idx]` if `idx < len`, else zero.
    fn checked_load(&mut self, ptr: Value, len: Value, idx: Value, size: i64, ty: Type) -> Value {
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, idx, len);
        let load_b = self.b.create_block();
        let merge = self.b.create_block();
        self.b.append_block_param(merge, ty);
        let zero = if ty == types::F64 { self.b.ins().f64const(0.0) } else { self.b.ins().iconst(ty, 0) };
        self.b.ins().brif(inside, load_b, &[], merge, &[BlockArg::Value(zero)]);
        self.b.switch_to_block(load_b);
        let off = self.b.ins().imul_imm_u(idx, size);
        let at = self.b.ins().iadd(ptr, off);
        let v = self.b.ins().load(ty, flags(), at, 0);
        self.b.ins().jump(merge, &[BlockArg::Value(v)]);
        self.b.switch_to_block(merge);
        self.b.block_params(merge)[0]
    }

    /// The runtime symbol of string literal `idx` (0 if the runtime gave fewer).
    fn literal(&mut self, idx: Value) -> Value {
        let ptr = self.b.ins().load(PTR, flags(), self.ctx, CTX_LITERALS);
        let len = self.b.ins().load(PTR, flags(), self.ctx, CTX_N_LITERALS);
        self.checked_load(ptr, len, idx, 4, types::I32)
    }

    fn attr(&mut self, queue: Value, attr: u16, ty: VTy) -> CV {
        let q = self.b.ins().uextend(PTR, queue);
        let rows = self.b.ins().load(PTR, flags(), self.ctx, CTX_N_ATTR_ROWS);
        let n_attrs = self.b.ins().load(PTR, flags(), self.ctx, CTX_N_ATTRS);
        let a = self.b.ins().iconst(PTR, i64::from(attr));
        // In range only if the queue row and the attribute column both exist.
        let row_ok = self.b.ins().icmp(IntCC::UnsignedLessThan, q, rows);
        let col_ok = self.b.ins().icmp(IntCC::UnsignedLessThan, a, n_attrs);
        let ok = self.b.ins().band(row_ok, col_ok);
        let row = self.b.ins().imul(q, n_attrs);
        let idx = self.b.ins().iadd(row, a);
        let big = self.b.ins().iconst(PTR, -1);
        let idx = self.b.ins().select(ok, idx, big);
        let ptr = self.b.ins().load(PTR, flags(), self.ctx, CTX_ATTRS);
        let total = self.b.ins().imul(rows, n_attrs);
        let bits = self.checked_load(ptr, total, idx, 8, types::I64);
        CV::One(match ty {
            VTy::F64 => self.b.ins().bitcast(types::F64, MemFlagsData::new(), bits),
            VTy::Bool | VTy::U8 => self.b.ins().ireduce(types::I8, bits),
            VTy::Sym => {
                // Strings are stored as literal index + 1; 0 means absent.
                let present = self.b.ins().icmp_imm_u(IntCC::NotEqual, bits, 0);
                let lit = self.b.ins().iadd_imm_s(bits, -1);
                let big = self.b.ins().iconst(PTR, -1);
                let lit = self.b.ins().select(present, lit, big);
                self.literal(lit)
            }
            other => {
                crate::never!("an attribute of type {other}: attributes are numbers, flags, strings or enums");
                self.b.ins().iconst(types::I32, 0)
            }
        })
    }
}
