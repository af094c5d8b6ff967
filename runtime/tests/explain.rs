//! `explain` renders the decision records: a quota block with its numbers, a victim
//! search's verdicts, and a rejection by rule name.

mod support;

use gpol_runtime::explain::{explain, state_text};
use gpol_runtime::{Block, Res};
use gpol_runtime::{Reason, State};
use support::{cards, h100, queued};

#[test]
fn a_quota_block_is_shown_with_its_numbers() {
    let text = "policy capped\n\nqueue org {\n  queue a { limit 2 gpu }\n  queue b {}\n}\n";
    let mut s = support::scheduler(text, &[h100("n1")]);
    s.submit(queued("a", cards("first", 2))).unwrap();
    let held = s.submit(queued("a", cards("held", 1))).unwrap();
    s.cycle();
    let block = Block::Limit { queue: 1, res: Res::Gpu, limit: 2000, allocated: 2000, needs: 1000 };
    assert_eq!(s.state(held), State::Pending(Some(Reason::Quota(block))));
    assert_eq!(state_text(&s, held), "pending because quota");
    let why = explain(&s, held);
    assert!(why.contains("→ waits: quota (queue `a` would exceed its gpu limit (holds 2, needs 1, limit 2))"), "{why}");
}

#[test]
fn a_victim_search_shows_every_verdict_and_the_choice() {
    let text = "policy p\n\nqueue team {}\n\npriority_class low = 0\npriority_class high = 10\n\n\
                preempt by_priority { when claimant.priority > victim.priority and victim.preemptible }\n";
    let mut s = support::scheduler(text, &[h100("n1")]);
    let low = |name: &str| gpol_compiler::spec::JobSpec { priority_class: Some("low".into()), ..cards(name, 4) };
    s.submit(gpol_compiler::spec::JobSpec { preemptible: true, ..low("a") }).unwrap();
    s.submit(low("b")).unwrap();
    s.cycle();
    let claimant =
        s.submit(gpol_compiler::spec::JobSpec { priority_class: Some("high".into()), ..cards("c", 4) }).unwrap();
    // Ask before the cycle: the search is shown, nothing changes.
    let why = explain(&s, claimant);
    assert!(why.contains("    a: candidate in its own queue, allowed by `preempt by_priority`, cost 0"), "{why}");
    assert!(why.contains("    b: no preempt rule allows evicting it"), "{why}");
    assert!(
        why.contains("    chosen: evict a under `preempt by_priority` (cost 0); total cost 0; then start on n1"),
        "{why}"
    );
    s.cycle();
    assert_eq!(state_text(&s, claimant), "running on n1");
}

#[test]
fn a_rejection_names_its_rule() {
    let text = "policy p\n\nqueue team {}\n\nadmit small \"at most 4 cards\" { job.whole_cards <= 4 gpu }\n";
    let mut s = support::scheduler(text, &[h100("n1")]);
    let big = s.submit(cards("big", 8)).unwrap();
    s.cycle();
    assert_eq!(state_text(&s, big), "rejected because small");
    assert!(explain(&s, big).contains("admit small: fails and rejects it for good"), "{}", explain(&s, big));
}

#[test]
fn quota_lines_show_borrow_and_lend_limits() {
    let text = "policy limits\n\nqueue cohort {\n  queue a { guarantee 4 gpu; borrow_limit 2 gpu }\n  \
                queue b { guarantee 4 gpu; lend_limit 1 gpu }\n}\n";
    let mut s = support::scheduler(text, &[h100("n1")]);
    let held = s.submit(queued("a", cards("wide", 7))).unwrap();
    s.cycle();
    let why = explain(&s, held);
    // a may borrow 2, but b lends only 1: 4 + 1 = 5 available.
    assert!(
        why.contains(
            "quota a gpu: allocated 0, guarantee 4, limit none, borrow limit 2, borrowed 0, available 5, needs 7"
        ),
        "{why}"
    );
}

#[test]
fn the_order_of_queues_is_shown_level_by_level_with_its_keys() {
    let text = "policy ordered\n\nqueue org {\n  queue dept {\n    queue a {}\n    queue b {}\n  }\n  queue c {}\n}\n\n\
                queue_order { queue.allocated.gpu / 1 gpu asc }\n";
    let mut s = support::scheduler(text, &[h100("n1")]);
    s.submit(queued("b", cards("held", 3))).unwrap();
    s.submit(queued("c", cards("other", 1))).unwrap();
    s.cycle();
    let waiting = s.submit(queued("a", cards("next", 8))).unwrap();
    let why = explain(&s, waiting);
    assert!(why.contains("  queue order (queue_order key 1):\n"), "{why}");
    // The top level: c holds 1, dept (b's 3) 3; then within dept: a 0, b 3.
    assert!(why.contains("    in org: c [1.0000, nothing waiting] · dept [3.0000] ← its queue\n"), "{why}");
    assert!(why.contains("    in dept: a [0.0000] ← its queue · b [3.0000, nothing waiting]\n"), "{why}");
}

#[test]
fn a_gangs_placements_are_shown_best_first_with_their_values() {
    let text = "policy racks\n\ntopology rack\n\nqueue team {}\n\ngang {\n  prefer same rack weight 2\n}\n";
    let in_rack =
        |name: &str, rack: &str| gpol_compiler::spec::NodeSpec { domains: vec![(0, rack.into())], ..h100(name) };
    let mut s = support::scheduler(text, &[in_rack("a1", "r1"), in_rack("a2", "r1"), in_rack("b1", "r2")]);
    let busy = s.submit(cards("busy", 8)).unwrap();
    s.cycle();
    let gang = s.submit(gpol_compiler::spec::JobSpec { replicas: 2, ..cards("g", 8) }).unwrap();
    let why = explain(&s, gang);
    // `busy` took a1: no rack holds both replicas now, so the one placement spans the
    // racks, and as no placement could use fewer it earns the whole preference: 2 × 2/2.
    assert!(why.contains("  gang placements (1 found, best first):\n    2 replicas on a2, b1: value 2.000\n"), "{why}");
    s.complete(busy);
    let why = explain(&s, gang);
    // With a1 free, rack r1 holds both: the fill takes the fewest racks first.
    assert!(why.contains("  gang placements (1 found, best first):\n    2 replicas on a1, a2: value 2.000\n"), "{why}");
}
