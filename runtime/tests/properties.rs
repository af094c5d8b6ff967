//! Invariants of the scheduler over random clusters and random event sequences (submit,
//! complete, node failure, time, quota changes), checked after every step, in both
//! engines, which must also produce the same schedule; after every cycle, no waiting job
//! could have started.

mod support;

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::ir::QuotaKind;
use gpol_compiler::schema::EnumKind;
use gpol_compiler::spec::mig_milli;
use gpol_compiler::spec::{JobSpec, MILLI, NodeSpec, Request, Sharing};
use gpol_runtime::Decision;
use gpol_runtime::Headroom;
use gpol_runtime::Scheduler;
use gpol_runtime::State;
use gpol_runtime::Symbols;
use gpol_runtime::fit::{self, Ask};
use gpol_runtime::{Amounts, Quotas, Res};
use proptest::prelude::*;
use std::collections::HashMap;

/// A policy with a cohort that borrows and lends, per-user limits, filters and scores
/// over sharing modes, a card score, and fair-share order.
const POLICY: &str = r#"policy properties

use std.pack

queue org {
  queue train { guarantee 8 gpu, 64 cpu; borrow_limit 8 gpu; limit 24 gpu; usage_half_life 1h }
  queue serve { guarantee 4 gpu; lend_limit 2 gpu; user_limit 3 gpu }
  queue adhoc { weight 2 }
}

filter whole_cards_unshared { job.whole_cards > 0 gpu implies node.sharing == exclusive }

filter bursty_off_mig { not (job.bursty and node.sharing == mig) }

score pack weight 2 { std.pack.binpack(job, node) }

score room weight 1 { node.cpu_free / max(node.cpu, 1 cpu) }

card_score emptiest { card.free / 1 gpu }

queue_order { queue.dominant_share / queue.weight asc }

job_order { job.priority desc, job.submitted asc }
"#;

fn compiled(kind: EngineKind) -> CompiledPolicy {
    support::compiled("properties.gpol", POLICY, kind)
}

fn profile(name: &str) -> u8 {
    EnumKind::MigProfile.variant(name).unwrap_or(0)
}

/// A MIG layout of `gpu`: the picked profiles that still fit, in turn.
fn layout(gpu: &gpol_compiler::mig::Gpu, picks: &[usize]) -> Vec<u8> {
    let mut l = Vec::new();
    for &k in picks {
        let Some(p) = gpu.slots.get(k % gpu.slots.len()).and_then(|s| gpol_compiler::mig::profile(s.profile)) else {
            continue;
        };
        l.push(p);
        if !gpu.fits(&l) {
            l.pop();
        }
    }
    l
}

fn node() -> impl Strategy<Value = NodeSpec> {
    let gpus = gpol_compiler::mig::GPUS.len();
    let picks = prop::collection::vec(prop::collection::vec(0usize..8, 1..8), 1..3);
    let card_mem = prop::sample::select(vec![40u64 << 30, 80 << 30]);
    (0usize..4, 1u32..9, (0..gpus, picks), 1u32..5, 4u64..129, 0u8..3, card_mem).prop_map(
        |(mode, cards, (gpu, picks), clients, cpu, rack, card_mem)| {
            let sharing = [Sharing::Exclusive, Sharing::Mig, Sharing::Timeslice, Sharing::Mps][mode];
            // MIG nodes are of a GPU with MIG, every table in turn, with one layout for
            // every card or (two picks) one per card.
            let gpu = &gpol_compiler::mig::GPUS[gpu];
            let mig: Vec<Vec<u8>> = match picks.as_slice() {
                [every] => vec![layout(gpu, every)],
                per_card => (0..cards as usize).map(|c| layout(gpu, &per_card[c % per_card.len()])).collect(),
            };
            let is_mig = sharing == Sharing::Mig;
            NodeSpec {
                model: match (is_mig, cards % 2) {
                    (true, _) => gpu.model.into(),
                    (false, 0) => "h100".into(),
                    (false, _) => "a100".into(),
                },
                cards,
                card_mem: if is_mig { u64::from(gpu.memory_gb) << 30 } else { card_mem },
                sharing,
                mig: if is_mig { mig } else { Vec::new() },
                max_clients: clients,
                cpu_milli: cpu * 1000,
                mem: 1 << 40,
                domains: vec![(1, format!("rack{rack}"))],
                ..NodeSpec::default()
            }
        },
    )
}

fn job() -> impl Strategy<Value = JobSpec> {
    let request = prop_oneof![
        (1u32..5).prop_map(Request::Whole),
        (1u32..1000).prop_map(Request::Fraction),
        prop::sample::select(vec![profile("1g.10gb"), profile("2g.20gb"), profile("3g.40gb"), profile("7g.80gb")])
            .prop_map(Request::Mig),
        Just(Request::None),
    ];
    let gpu_mem = prop::sample::select(vec![0u64, 8 << 30, 30 << 30, 90 << 30]);
    (request, 0usize..3, 0u8..3, 1u64..33, any::<bool>(), -2i32..3, gpu_mem).prop_map(
        |(request, queue, user, cpu, bursty, priority, gpu_mem)| JobSpec {
            queue: Some(["train", "serve", "adhoc"][queue].into()),
            user: Some(format!("user{user}")),
            priority: Some(f64::from(priority)),
            request,
            gpu_mem,
            cpu_milli: cpu * 1000,
            mem: 1 << 30,
            bursty,
            preemptible: true,
            ..JobSpec::default()
        },
    )
}

/// Jobs from a small space, so many are alike but for what one rule reads (`bursty`).
fn alike_job() -> impl Strategy<Value = JobSpec> {
    let request = prop_oneof![
        (1u32..3).prop_map(Request::Whole),
        Just(Request::Mig(profile("1g.10gb"))),
        Just(Request::Fraction(500))
    ];
    (request, 0usize..2, any::<bool>()).prop_map(|(request, queue, bursty)| JobSpec {
        queue: Some(["train", "adhoc"][queue].into()),
        user: Some("user".into()),
        request,
        cpu_milli: 1000,
        mem: 1 << 30,
        bursty,
        ..JobSpec::default()
    })
}

#[derive(Clone, Debug)]
enum Event {
    Submit(Box<JobSpec>),
    /// Complete the n-th running job (modulo how many run).
    Complete(usize),
    Fail(usize),
    Advance(u64),
    Quota(usize, QuotaKind, Option<i64>),
    Cycle,
}

fn event() -> impl Strategy<Value = Event> {
    events(job().boxed())
}

fn events(job: BoxedStrategy<JobSpec>) -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => job.prop_map(|j| Event::Submit(Box::new(j))),
        3 => any::<usize>().prop_map(Event::Complete),
        1 => any::<usize>().prop_map(Event::Fail),
        2 => (1u64..3_600_000).prop_map(Event::Advance),
        1 => (1usize..4, prop::sample::select(vec![QuotaKind::Guarantee, QuotaKind::Limit, QuotaKind::BorrowLimit, QuotaKind::LendLimit]), prop::option::of(0i64..20_000))
            .prop_map(|(q, k, v)| Event::Quota(q, k, v)),
        4 => Just(Event::Cycle),
    ]
}

/// Checks every invariant; `before` is each queue's GPU allocation before the last cycle.
fn invariants(s: &Scheduler, before: &[i64]) -> Result<(), String> {
    // Cards: shares and clients add up to what the running jobs hold; no MIG instance is
    // held twice; fractions never span cards; CPU adds up.
    let mut held: HashMap<(usize, usize), (u32, u32)> = HashMap::new();
    let mut whole: HashMap<(usize, usize), u32> = HashMap::new();
    let mut instances: HashMap<(usize, usize, usize), usize> = HashMap::new();
    let mut cpu: HashMap<usize, u64> = HashMap::new();
    for j in s.jobs() {
        if j.life.state == State::Running {
            if j.holding.slots.is_empty() {
                return Err(format!("running job {} holds nothing", j.ask.name));
            }
        } else if !j.holding.slots.is_empty() {
            return Err(format!("job {} is {:?} but holds resources", j.ask.name, j.life.state));
        }
        for slot in &j.holding.slots {
            *cpu.entry(slot.node).or_insert(0) += j.ask.cpu_milli;
            match j.ask.request {
                Request::Fraction(m) if slot.cards.len() != 1 || slot.cards[0].1 != m => {
                    return Err(format!("fractional job {} spans {:?}", j.ask.name, slot.cards));
                }
                Request::Whole(k) if slot.cards.len() != k as usize || slot.cards.iter().any(|c| c.1 != MILLI) => {
                    return Err(format!("whole-card job {} holds {:?}", j.ask.name, slot.cards));
                }
                Request::Mig(_) if slot.instance.is_none() => {
                    return Err(format!("MIG job {} holds no instance", j.ask.name));
                }
                _ => {}
            }
            for &(card, milli) in &slot.cards {
                let e = held.entry((slot.node, card)).or_insert((0, 0));
                e.0 += milli;
                e.1 += 1;
                if let Request::Whole(k) = j.ask.request {
                    whole.insert((slot.node, card), k);
                }
            }
            if let Some((card, inst)) = slot.instance {
                *instances.entry((slot.node, card, inst)).or_insert(0) += 1;
            }
        }
    }
    for (ni, n) in s.cluster().nodes.iter().enumerate() {
        if n.free_cpu_milli + cpu.get(&ni).copied().unwrap_or(0) != n.cpu_milli {
            return Err(format!("node {} CPU does not add up", n.name));
        }
        for (ci, c) in n.cards.iter().enumerate() {
            let (milli, clients) = held.get(&(ni, ci)).copied().unwrap_or((0, 0));
            let holder = whole.get(&(ni, ci)).copied().unwrap_or(0);
            if c.holder_cards != holder {
                return Err(format!(
                    "node {} card {ci}: holder_cards {} but a job of {holder} holds it",
                    n.name, c.holder_cards
                ));
            }
            if c.free_milli > MILLI || c.free_milli + milli != MILLI || c.clients != clients {
                return Err(format!(
                    "node {} card {ci}: free {} clients {} but jobs hold {milli} in {clients}",
                    n.name, c.free_milli, c.clients
                ));
            }
            if c.instances.is_empty() && c.clients > n.max_clients {
                return Err(format!(
                    "node {} card {ci} has {} clients, more than {}",
                    n.name, c.clients, n.max_clients
                ));
            }
            for (ii, inst) in c.instances.iter().enumerate() {
                let holders = instances.get(&(ni, ci, ii)).copied().unwrap_or(0);
                if holders > 1 || inst.used != (holders == 1) {
                    return Err(format!(
                        "node {} card {ci} instance {ii}: used {} held by {holders}",
                        n.name, inst.used
                    ));
                }
            }
        }
    }
    // Each node's summaries match its cards, and the headroom answers "does it fit?"
    // exactly where it claims to, for every job's request.
    for (i, n) in s.cluster().nodes.iter().enumerate() {
        if n.free != n.counted_free() {
            return Err(format!("node {}: summary {:?} but the cards say {:?}", n.name, n.free, n.counted_free()));
        }
        let room = &s.cluster().headroom[i];
        if *room != Headroom::of(n) {
            return Err(format!("node {}: headroom {room:?} but the node says {:?}", n.name, Headroom::of(n)));
        }
        for j in s.jobs() {
            let (ask, fits) = (Ask::of(j), fit::fits(n, j));
            let quick = fit::may_fit(room, &ask);
            if (fits && !quick) || (fit::headroom_decides(&ask) && fits != quick) {
                return Err(format!("node {}: fits {fits} but the headroom says {quick} for {ask:?}", n.name));
            }
        }
    }
    // Domains equal the sum of their nodes.
    for (d, (free, milli, hist)) in s.cluster().domains.iter().zip(s.cluster().recomputed_domains()) {
        let trimmed: Vec<u32> = d
            .free_histogram
            .iter()
            .copied()
            .rev()
            .skip_while(|x| *x == 0)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let hist: Vec<u32> =
            hist.into_iter().rev().skip_while(|x| *x == 0).collect::<Vec<_>>().into_iter().rev().collect();
        if d.free_cards != free || d.free_milli != milli || trimmed != hist {
            return Err(format!(
                "domain aggregates drifted: {} {} {:?} vs {free} {milli} {hist:?}",
                d.free_cards, d.free_milli, d.free_histogram
            ));
        }
    }
    // Queue accounting equals what running jobs hold; nothing is added to a queue at or
    // above its limit, and no queue borrows past its borrow limit by an admission.
    let mut gpu = vec![0i64; s.quotas().queues.len()];
    for j in s.jobs().iter().filter(|j| j.life.state == State::Running) {
        let mut q = Some(j.ask.queue);
        while let Some(qi) = q {
            gpu[qi] += j.total_milli() as i64;
            q = s.quotas().queues[qi].place.parent;
        }
    }
    for (qi, q) in s.quotas().queues.iter().enumerate() {
        let alloc = q.get(&q.load.alloc, Res::Gpu);
        if alloc != gpu[qi] {
            return Err(format!("queue {} accounts {alloc} milli-GPU, jobs hold {}", q.place.name, gpu[qi]));
        }
        let grew = alloc > before.get(qi).copied().unwrap_or(0);
        if let Some(&limit) = q.quota.limit.get(&Res::Gpu)
            && alloc > limit
            && grew
        {
            return Err(format!("queue {} was admitted past its limit: {alloc} > {limit}", q.place.name));
        }
        if let Some(&bl) = q.quota.borrow_limit.get(&Res::Gpu) {
            let borrowed = alloc - q.get(&q.quota.guarantee, Res::Gpu);
            if borrowed > bl && grew {
                return Err(format!("queue {} borrowed {borrowed} past its borrow limit {bl}", q.place.name));
            }
        }
    }
    Ok(())
}

/// After a cycle, no waiting job could start now: the jobs a cycle skips (classes that
/// failed, shapes found full, jobs the quota holds back) could not have been placed. (The
/// policy has no victim rules and its filters read nothing that a start changes.)
fn no_waiting_job_could_start(s: &Scheduler) -> Result<(), String> {
    for j in (0..s.jobs().len()).filter(|&j| s.job(j).is_pending()) {
        if let Decision::Place { replicas } = s.decide(j) {
            return Err(format!("job {} waits ({:?}) but could start on {replicas:?}", s.job(j).ask.name, s.state(j)));
        }
    }
    Ok(())
}

/// Plays the events; the scheduler they leave, and what it decided (cycles' decisions
/// and the requeues of failed nodes).
fn play(
    policy: &CompiledPolicy,
    nodes: &[NodeSpec],
    events: &[Event],
) -> Result<(Scheduler, Vec<gpol_runtime::Event>), TestCaseError> {
    let mut s = Scheduler::new(policy.clone());
    for (i, n) in nodes.iter().enumerate() {
        let spec = NodeSpec { name: format!("n{i}"), ..n.clone() };
        prop_assert!(spec.mig_gpu().is_ok(), "{:?}", spec.mig_gpu());
        s.add_node(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    let mut decided = Vec::new();
    let mut submitted = 0;
    for ev in events {
        let before: Vec<i64> = s.quotas().queues.iter().map(|q| q.get(&q.load.alloc, Res::Gpu)).collect();
        match ev {
            Event::Submit(j) => {
                s.submit(JobSpec { name: format!("j{submitted}"), ..(**j).clone() })
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                submitted += 1;
            }
            Event::Complete(k) => {
                let running: Vec<usize> =
                    (0..s.jobs().len()).filter(|&j| s.job(j).life.state == State::Running).collect();
                if !running.is_empty() {
                    s.complete(running[k % running.len()]);
                }
            }
            Event::Fail(k) => {
                let n = k % s.cluster().nodes.len();
                decided.extend(s.fail_node(n));
            }
            Event::Advance(ms) => s.advance(*ms).expect("generated steps stay within the clock limit"),
            Event::Quota(q, kind, v) => s.set_quota(*q, *kind, Res::Gpu, *v),
            Event::Cycle => {
                decided.extend(s.cycle());
                no_waiting_job_could_start(&s).map_err(|e| TestCaseError::fail(format!("after a cycle: {e}")))?;
            }
        }
        invariants(&s, &before).map_err(|e| TestCaseError::fail(format!("after {ev:?}: {e}")))?;
    }
    Ok((s, decided))
}

/// Plays the events under both engines, which must schedule alike.
fn engines_agree(
    jit: &CompiledPolicy,
    interp: &CompiledPolicy,
    nodes: &[NodeSpec],
    events: &[Event],
) -> Result<(), TestCaseError> {
    let (_, a) = play(jit, nodes, events)?;
    let (_, b) = play(interp, nodes, events)?;
    prop_assert_eq!(a, b, "the engines scheduled differently");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_and_engines_agree(nodes in prop::collection::vec(node(), 1..7), events in prop::collection::vec(event(), 1..60)) {
        thread_local! {
            static POLICIES: (CompiledPolicy, CompiledPolicy) = (compiled(EngineKind::Jit), compiled(EngineKind::Interp));
        }
        POLICIES.with(|(jit, interp)| engines_agree(jit, interp, &nodes, &events))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Many jobs alike: the classes of waiting jobs skip only jobs that could not start.
    #[test]
    fn alike_jobs_wait_only_when_they_must(
        nodes in prop::collection::vec(node(), 1..5),
        events in prop::collection::vec(events(alike_job().boxed()), 1..80),
    ) {
        thread_local! {
            static JIT: CompiledPolicy = compiled(EngineKind::Jit);
        }
        JIT.with(|jit| play(jit, &nodes, &events).map(drop))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With a filter that time alone can satisfy and head-of-line reservations, a job
    /// that could start after the clock moved is tried again, and engines agree.
    #[test]
    fn jobs_that_time_could_start_are_tried_again(
        nodes in prop::collection::vec(node(), 1..5),
        events in prop::collection::vec(event(), 1..60),
    ) {
        thread_local! {
            static POLICIES: (CompiledPolicy, CompiledPolicy) = {
                let text = POLICY.replace(
                    "card_score emptiest",
                    "filter big_jobs_wait { job.whole_cards <= 2 gpu or job.waiting >= 20m }\n\n\
                     settings { reserve_after 30m }\n\ncard_score emptiest",
                );
                let compile = |kind| support::compiled("properties.gpol", &text, kind);
                (compile(EngineKind::Jit), compile(EngineKind::Interp))
            };
        }
        POLICIES.with(|(jit, interp)| engines_agree(jit, interp, &nodes, &events))?;
    }
}

#[test]
fn mig_charge_is_by_compute_slices() {
    assert_eq!(mig_milli(profile("2g.20gb")), 286);
}

proptest! {
    /// Decayed usage is brought up to date at events with a closed form, so updating it
    /// more often changes nothing: the same allocations over the same times give the same
    /// usage whether or not extra updates happen in between.
    #[test]
    fn decayed_usage_is_independent_of_update_frequency(
        steps in prop::collection::vec((0i64..8000, 1u64..7_200_000, 1usize..5), 1..30),
    ) {
        let policy = compiled(EngineKind::Interp);
        let mut a = Quotas::new(&policy.policy, &mut Symbols::default());
        let mut b = a.clone();
        let (mut now, user) = (0u64, gpol_compiler::schema::Sym(1));
        for (gpus, dt, splits) in steps {
            let amount = Amounts::from([(Res::Gpu, gpus)]);
            for q in [&mut a, &mut b] {
                q.advance_usage(now);
                q.charge(1, user, &amount, 1);
            }
            for k in 1..=splits as u64 {
                b.advance_usage(now + dt * k / splits as u64);
            }
            now += dt;
            a.advance_usage(now);
        }
        for (qa, qb) in a.queues.iter().zip(&b.queues) {
            let tolerance = 1e-9 * qa.usage.value.abs().max(1.0);
            prop_assert!((qa.usage.value - qb.usage.value).abs() <= tolerance, "{}: {} vs {}", qa.place.name, qa.usage.value, qb.usage.value);
        }
    }
}
