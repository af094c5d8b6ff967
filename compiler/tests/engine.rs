//! Known answers from the reference engine on the example policies.

use gpol_compiler::engine::{CompiledPolicy, EngineKind, NONE, NodeResult};
use gpol_compiler::interp::Ctx;
use gpol_compiler::schema::{ClusterRec, EnumKind, JobRec, NodeRec, Opt, QueueRec, Sym};

fn compiled(path: &str, kind: EngineKind) -> CompiledPolicy {
    let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
    gpol_compiler::load::compile_file(full.as_ref(), kind).expect("the example policy compiles")
}

fn sharing(name: &str) -> u8 {
    EnumKind::Sharing.variant(name).unwrap_or(u8::MAX)
}

struct World {
    cluster: ClusterRec<'static>,
    queues: Vec<QueueRec>,
    literals: Vec<Sym>,
    hashes: Vec<u64>,
}

impl World {
    fn new(p: &CompiledPolicy) -> World {
        let literals = (1..=p.program.literals.len() as u32).map(Sym).collect();
        let hashes = (0..=p.program.literals.len() as u64).collect();
        World {
            cluster: ClusterRec::default(),
            queues: vec![QueueRec::default(); p.policy.queues.len()],
            literals,
            hashes,
        }
    }

    fn ctx<'a>(&'a self, p: &'a CompiledPolicy) -> Ctx<'a> {
        Ctx {
            cluster: &self.cluster,
            queues: &self.queues,
            domains: &[],
            literals: &self.literals,
            sym_hashes: &self.hashes,
            attrs: &p.program.attrs,
        }
    }
}

fn node(cards: f64, free: f64, sharing_mode: &str) -> NodeRec<'static> {
    NodeRec { cards, free_cards: free, free_gpu: free, sharing: sharing(sharing_mode), ..NodeRec::default() }
}

const ENGINES: [EngineKind; 2] = [EngineKind::Interp, EngineKind::Jit];

#[test]
fn binpack_scores_busy_nodes_higher() {
    for kind in ENGINES {
        let p = compiled("policies/fair_share.gpol", kind);
        let w = World::new(&p);
        let job = JobRec { whole_cards: 1.0, ..JobRec::default() };
        let nodes = [node(8.0, 6.0, "exclusive"), node(8.0, 2.0, "exclusive"), node(0.0, 0.0, "exclusive")];
        let mut out = [NodeResult::default(); 3];
        p.engine().filter_score(&w.ctx(&p), &job, &nodes, &mut out);
        assert!(out.iter().all(|r| r.feasible && r.rejected_by == NONE));
        assert_eq!(out[0].score, 0.25, "1 - 6/8");
        assert_eq!(out[1].score, 0.75, "1 - 2/8");
        assert_eq!(out[2].score, 0.0, "a node without cards scores 0");
    }
}

#[test]
fn sharing_filters_reject_with_the_right_rule() {
    for kind in ENGINES {
        let p = compiled("policies/gpu_sharing.gpol", kind);
        let w = World::new(&p);
        let filters = &p.program.filters;
        let index = |name: &str| filters.iter().position(|r| r.name == name).unwrap_or(usize::MAX) as u16;
        let whole = JobRec { whole_cards: 2.0, total_gpus: 2.0, ..JobRec::default() };
        let nodes = [node(8.0, 8.0, "exclusive"), node(1.0, 1.0, "mig")];
        let mut out = [NodeResult::default(); 2];
        p.engine().filter_score(&w.ctx(&p), &whole, &nodes, &mut out);
        assert!(out[0].feasible);
        assert!(!out[1].feasible);
        let rejected = out[1].rejected_by;
        assert!(
            rejected == index("whole_cards_not_partitioned") || rejected == index("mig_nodes_for_mig_jobs"),
            "rejected by {}",
            filters.get(usize::from(rejected)).map_or("?", |r| r.name.as_str())
        );
        // A MIG job needs a free instance of its profile.
        let profile = EnumKind::MigProfile.variant("1g.10gb").unwrap_or(0);
        let mig_job = JobRec { mig_profile: Opt::some(profile), ..JobRec::default() };
        let mut with_slice = node(1.0, 0.0, "mig");
        with_slice.free_mig.0[usize::from(profile)] = 1.0;
        let nodes = [with_slice, node(1.0, 0.0, "mig")];
        p.engine().filter_score(&w.ctx(&p), &mig_job, &nodes, &mut out);
        assert!(out[0].feasible);
        assert_eq!(out[1].rejected_by, index("mig_profile_free"));
    }
}

#[test]
fn admit_and_order_keys() {
    for kind in ENGINES {
        let p = compiled("policies/gpu_sharing.gpol", kind);
        let w = World::new(&p);
        let profile = EnumKind::MigProfile.variant("1g.10gb").unwrap_or(0);
        let bursty_mig = JobRec { bursty: true, mig_profile: Opt::some(profile), ..JobRec::default() };
        assert_eq!(p.engine().admit(&w.ctx(&p), &bursty_mig), Some(0));
        assert_eq!(p.engine().admit(&w.ctx(&p), &JobRec::default()), None);

        let p = compiled("policies/fair_share.gpol", kind);
        let w = World::new(&p);
        let job = JobRec { priority: 5.0, waiting: 7200.0, submitted: 42.0, ..JobRec::default() };
        let mut keys = [0.0; 2];
        p.engine().job_keys(&w.ctx(&p), &job, &mut keys);
        assert_eq!(keys, [7.0, 42.0], "priority + min(waiting / 1h, 10), then submission time");
    }
}

#[test]
fn compiled_policies_are_shareable_across_threads() {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<CompiledPolicy>();
    let p = compiled("policies/fair_share.gpol", EngineKind::Jit);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let p = p.clone();
            std::thread::spawn(move || {
                let w = World::new(&p);
                let job = JobRec { whole_cards: 1.0, ..JobRec::default() };
                let mut out = [NodeResult::default()];
                p.engine().filter_score(&w.ctx(&p), &job, &[node(8.0, 2.0, "exclusive")], &mut out);
                out[0].score
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap_or(f64::NAN), 0.75);
    }
}

#[test]
fn a_backend_failure_names_the_rule() {
    use gpol_compiler::ir::RuleKind;
    use gpol_compiler::ir::{Body, Kind, Node, Program, Rule, VTy};
    use gpol_compiler::schema::Record;
    let good = |name: &str| Rule {
        kind: RuleKind::Filter,
        name: name.into(),
        reason: None,
        tier: None,
        weight: 1.0,
        is_static: false,
        body: Body { node: Node::boolean(true), locals: 0 },
    };
    // Ill-typed on purpose: a field read through a number instead of a record pointer.
    let broken = Node::new(
        Kind::Bin(
            gpol_compiler::ir::Bin::Gt,
            Box::new(Node::new(
                Kind::Field { base: Box::new(Node::num(1.0)), record: Record::Node, field: 3 },
                VTy::F64,
            )),
            Box::new(Node::num(0.0)),
        ),
        VTy::Bool,
    );
    let program = Program {
        filters: vec![good("fine"), Rule { name: "broken".into(), body: Body { node: broken, locals: 0 }, ..good("") }],
        filter_order: vec![0, 1],
        ..Program::default()
    };
    assert!(gpol_compiler::jit::compile(std::sync::Arc::new(program.clone())).is_err());
    let culprit = gpol_compiler::jit::culprit(&program);
    assert_eq!(culprit, Some(gpol_compiler::ir::RuleId::Filter(1)));
    assert_eq!(culprit.map(|id| program.rule_label(id)).as_deref(), Some("filter broken"));
}
