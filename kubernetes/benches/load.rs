//! Load on loopback: p50/p99 latency and throughput of filter and prioritize at 500 and
//! 5,000 nodes, names only (`nodeCacheCapable: true`) and whole Node objects, over HTTP and
//! HTTPS, one client and four at once. Bounded: a
//! fixed number of requests per run. `cargo bench -p gpol-kubernetes --bench load`;
//! docs/performance.md records the results.

#[path = "../tests/support/load.rs"]
mod load;

use load::Setup;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    println!("gpolc serve on loopback, policy {} (filter then prioritize per request)", load::POLICY);
    for nodes in std::env::var("NODES").ok().and_then(|v| v.parse().ok()).map_or(vec![500, 5000], |n| vec![n]) {
        let ext = load::extender(nodes);
        for (whole_nodes, requests) in
            [(false, if nodes > 1000 { 500 } else { 2000 }), (true, if nodes > 1000 { 40 } else { 300 })]
        {
            for tls in [false, true] {
                for clients in [1, 4] {
                    let setup = Setup { nodes, whole_nodes, requests: requests / clients, clients, tls };
                    let report = load::run(ext.clone(), setup);
                    println!("{report}");
                }
            }
        }
    }
}
