//! Edges with work on them: each serves [`NODES`] READY nodes of two providers (one
//! local model, one API), in one of four zones, and its leases move so that each
//! Edge's `registry_revision` changes about once per [`CHURN_PERIOD`] — the refresh
//! then has a new view to merge, not an unchanged one to skip.

use std::net::SocketAddr;
use std::time::Duration;

use iop_tokio::core::NodeRegistry;
use iop_tokio::core::edge::EdgeConfig;
use iop_tokio::core::registry::{Lease, LeaseKind, NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::{EdgeClient, EdgeHandle};

use crate::fleet;

/// Nodes per Edge.
pub const NODES: usize = 4;
/// Providers per node.
pub const PROVIDERS: usize = 2;
/// How often each Edge's leases change.
pub const CHURN_PERIOD: Duration = Duration::from_secs(10);

const ZONES: [&str; 4] = ["eu-1", "eu-2", "us-1", "ap-1"];
const MODELS: [&str; 3] = ["gpt-4", "claude-3", "gemini-1"];

/// Fills `reg` with Edge `index`'s nodes, all READY.
fn configure(reg: &mut NodeRegistry, index: usize, now: u64) {
    for n in 0..NODES {
        let node_id = format!("gpu-{n}");
        let node = NodeConfig::new(node_id.clone())
            .with_label("zone", ZONES[index % ZONES.len()])
            .with_label("tier", if n % 2 == 0 { "a100" } else { "h100" })
            .with_provider(
                ProviderConfig::new("llama", ProviderCategory::LocalInference, 4, 2)
                    .with_model("llama-3-70b"),
            )
            .with_provider(
                ProviderConfig::new("api", ProviderCategory::Api, 16, 4)
                    .with_model(MODELS[(index + n) % MODELS.len()]),
            );
        if reg.configure(node, now).is_ok() {
            let _ = reg.connect_ready(&node_id, now);
        }
    }
}

/// One Edge's churn step: admit a lease while it holds fewer than `NODES`, else
/// release them all.
fn churn(handle: &EdgeHandle, held: &mut Vec<Lease>, step: usize) {
    handle.with_registry(|reg: &mut NodeRegistry, _| {
        if held.len() < NODES {
            let node = format!("gpu-{}", step % NODES);
            if let Ok(lease) = reg.admit(&node, "llama", LeaseKind::Normal) {
                held.push(lease);
            }
        } else {
            for lease in held.drain(..) {
                let _ = reg.release(lease);
            }
        }
    });
}

/// Runs `n` loaded Edges `{prefix}-00000`, ... against `addr` until standard input
/// closes; their leases change every [`CHURN_PERIOD`] when `churning`.
pub fn run_edges(n: usize, addr: SocketAddr, prefix: &str, churning: bool) -> Result<(), String> {
    fleet::check_fd_limit(n)?;
    let rt = fleet::runtime().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut edges = Vec::with_capacity(n);
        for i in 0..n {
            let mut config = EdgeConfig::new(format!("{prefix}-{i:05}"), iop_tokio::process_seed());
            config.backoff_base = Duration::from_millis(100);
            config.backoff_max = Duration::from_secs(1);
            let handle = EdgeClient::new(config)
                .connect(addr)
                .map_err(|e| e.to_string())?;
            handle.with_registry(|reg: &mut NodeRegistry, now| configure(reg, i, now));
            edges.push((handle, Vec::new()));
        }
        let churner = tokio::spawn(async move {
            if !churning {
                return;
            }
            // A tenth of the Edges a tenth of the period: each once per period.
            let slices = 10;
            let mut tick = tokio::time::interval(CHURN_PERIOD / slices);
            // Bounded: an hour of steps, longer than any run.
            let steps = 3_600 * slices as usize / CHURN_PERIOD.as_secs() as usize;
            for step in 0..steps {
                tick.tick().await;
                let slice = step % slices as usize;
                for (i, (handle, held)) in edges.iter_mut().enumerate() {
                    if i % slices as usize == slice {
                        churn(handle, held, step);
                    }
                }
            }
        });
        fleet::until_parent_goes().await;
        churner.abort();
        Ok(())
    })
}
