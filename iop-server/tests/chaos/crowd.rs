//! A crowd of Edges in this process (the library's `EdgeClient`s on a runtime of
//! their own), each dialling one replica first and the other two after: when a
//! replica goes, its share of the crowd reconnects at once, so the replicas write
//! their ownership claims in groups (the batched path of the group commit), not one
//! by one as the few `iop-edge` processes alone would.

use std::net::SocketAddr;
use std::time::Duration;

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
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the crowd's runtime");
        let edges = runtime.block_on(async {
            (0..size)
                .map(|i| {
                    let first = replicas[i % replicas.len()];
                    let others = replicas.iter().copied().filter(|a| *a != first);
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
