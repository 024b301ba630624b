//! A crowd of Edges in this process (the library's `EdgeClient`s on a runtime of
//! their own), each dialling one replica first and the other two after (half of
//! them in one order, half in the other): when a replica goes, its share of the
//! crowd reconnects at once, so the replicas write their ownership claims in groups
//! (the batched path of the group commit), not one by one as the few `iop-edge`
//! processes alone would.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iop_core::edge::EdgeConfig;
use iop_tokio::{EdgeClient, EdgeHandle};

/// The crowd's Edge ids start so (the checker's own Edges are `edge-N`).
pub const PREFIX: &str = "crowd";

pub struct Crowd {
    /// Dropped (the Edges stop) with the crowd.
    _runtime: tokio::runtime::Runtime,
    _edges: Vec<EdgeHandle>,
}

impl Crowd {
    /// `size` Edges over the replicas listening on `replicas`.
    pub fn start(size: usize, replicas: &[SocketAddr]) -> Crowd {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            // One thread holds the few hundred of a campaign; a crowd of thousands
            // reconnecting at once needs both cores the test process may use.
            .worker_threads(if size > 1_000 { 2 } else { 1 })
            .enable_all()
            .build()
            .expect("the crowd's runtime");
        let edges = runtime.block_on(async {
            (0..size)
                .map(|i| {
                    let first = replicas[i % replicas.len()];
                    // Every other Edge lists the others in reverse, so a replica's
                    // Edges spread over the rest when it goes, as a fleet's varied
                    // lists spread them.
                    let mut others: Vec<SocketAddr> =
                        replicas.iter().copied().filter(|a| *a != first).collect();
                    if (i / replicas.len()) % 2 == 1 {
                        others.reverse();
                    }
                    let mut config = EdgeConfig::new(format!("{PREFIX}-{i:04}"), i as u64 + 1);
                    config.backoff_base = Duration::from_millis(200);
                    config.backoff_max = Duration::from_secs(2);
                    EdgeClient::new(config)
                        .fallback_addrs(others)
                        .connect(first)
                        .expect("a crowd Edge")
                })
                .collect()
        });
        Crowd {
            _runtime: runtime,
            _edges: edges,
        }
    }
}

/// How many Edges the crowd of a schedule has: `IOP_CHAOS_CROWD` (0, none, unless
/// set: `scripts/chaos.sh --crowd N`).
pub fn size_from_env() -> usize {
    std::env::var("IOP_CHAOS_CROWD")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Waits (at most 60 s) until every replica lists each of the crowd's `size` Edges
/// live; else a violation saying how many each lists.
pub fn back(cps: &[(String, SocketAddr)], size: usize, violations: &mut Vec<String>) {
    let path = format!("/v1/edges?limit=1&state=connected&q={PREFIX}-");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        let totals: Vec<Option<u64>> = cps
            .iter()
            .map(|(_, a)| {
                super::http::get_json(*a, &path, Duration::from_secs(3))
                    .and_then(|v| v["total"].as_u64())
            })
            .collect();
        if totals.iter().all(|t| *t == Some(size as u64)) {
            return;
        }
        last = format!("{totals:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    violations.push(format!(
        "the crowd of {size} never all live on every replica's list: {last}"
    ));
}
