//! The load benchmark's short version (`benches/load.rs` is the full one): a served
//! extender on loopback answers a stream of filter and prioritize requests, by names and
//! with whole Node objects, over HTTP and HTTPS, each answer a 200 that accounts for every node. The
//! latencies are printed, not judged: docs/performance.md records the benchmark's.

#[path = "support/load.rs"]
mod load;

use load::Setup;

#[test]
fn a_stream_of_requests_is_answered_in_full() {
    let ext = load::extender(500);
    for (whole_nodes, requests, tls) in [(false, 100, false), (true, 10, false), (false, 50, true)] {
        let report = load::run(ext.clone(), Setup { nodes: 500, whole_nodes, requests, clients: 2, tls });
        println!("{report}");
        assert_eq!(report.wrong, 0, "{report}");
    }
}
