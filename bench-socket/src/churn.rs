//! The load plane's fleet and probes: Edges × 4 nodes × 2 providers whose numbers
//! change about once a second, and probe Edges whose leases are timed until the
//! change shows on a Control Plane's load watch (`load_plane`, `load_replicas`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iop_tokio::core::NodeRegistry;
use iop_tokio::core::edge::EdgeConfig;
use iop_tokio::core::registry::{Lease, LeaseKind, NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::fleet::ChangeKind;
use iop_tokio::{ControlPlaneHandle, EdgeClient, EdgeHandle, WatchItem};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::fleet;

type BoxError = Box<dyn std::error::Error>;

/// Nodes per Edge.
pub const NODES: usize = 4;
/// How long a probe waits for its change before it counts as missed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Edge `i`'s nodes: 4 READY nodes, a `llama` provider (capacity 4) and an `api` one
/// (capacity 16) each.
fn configure(reg: &mut NodeRegistry, now: u64) {
    for n in 0..NODES {
        let id = format!("gpu-{n}");
        let node = NodeConfig::new(id.clone())
            .with_provider(
                ProviderConfig::new("llama", ProviderCategory::LocalInference, 4, 0)
                    .with_model("llama-3"),
            )
            .with_provider(
                ProviderConfig::new("api", ProviderCategory::Api, 16, 0).with_model("gpt-4"),
            );
        if reg.configure(node, now).is_ok() {
            let _ = reg.connect_ready(&id, now);
        }
    }
}

/// A step of one provider: a lease taken, or one released (at random, within room).
fn step(reg: &mut NodeRegistry, held: &mut Vec<(usize, Lease)>, slot: usize, coin: bool) {
    let (node, provider) = (
        slot / 2,
        if slot.is_multiple_of(2) {
            "llama"
        } else {
            "api"
        },
    );
    let mine = held.iter().filter(|(s, _)| *s == slot).count();
    if (coin || mine == 0)
        && let Ok(lease) = reg.admit(&format!("gpu-{node}"), provider, LeaseKind::Normal)
    {
        held.push((slot, lease));
        return;
    }
    if let Some(at) = held.iter().position(|(s, _)| *s == slot) {
        let (_, lease) = held.swap_remove(at);
        let _ = reg.release(lease);
    }
}

/// `n` Edges named `{prefix}-00000`… against `addr`, until the parent goes; with
/// `churn`, each provider's numbers change once a second, an Edge's providers at
/// different instants.
pub fn edges(n: usize, addr: SocketAddr, churn: bool, prefix: &str) -> Result<(), BoxError> {
    fleet::check_fd_limit(n)?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let mut edges: Vec<(EdgeHandle, Vec<(usize, Lease)>)> = Vec::with_capacity(n);
        for i in 0..n {
            let mut config = EdgeConfig::new(format!("{prefix}-{i:05}"), iop_tokio::process_seed());
            config.backoff_base = Duration::from_millis(100);
            config.backoff_max = Duration::from_secs(1);
            let handle = EdgeClient::new(config).connect(addr)?;
            handle.with_registry(|reg: &mut NodeRegistry, now| configure(reg, now));
            edges.push((handle, Vec::new()));
        }
        if !churn {
            fleet::until_parent_goes().await;
            drop(edges);
            return Ok(());
        }
        let churner = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
            // Bounded: an hour of ticks.
            for t in 0..36_000usize {
                tick.tick().await;
                // Provider `slot` of Edge `i` changes on ticks where (i + slot) % 10
                // is the tick's: each once a second, an Edge's spread over the second.
                for (i, (handle, held)) in edges.iter_mut().enumerate() {
                    let slots: Vec<usize> =
                        (0..NODES * 2).filter(|s| (i + s) % 10 == t % 10).collect();
                    if slots.is_empty() {
                        continue;
                    }
                    handle.with_registry(|reg: &mut NodeRegistry, _| {
                        for &slot in &slots {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            step(reg, held, slot, seed & 1 == 0);
                        }
                    });
                }
            }
        });
        fleet::until_parent_goes().await;
        churner.abort();
        Ok::<_, BoxError>(())
    })
}

/// A probe Edge `name` against `addr`: one node `p0` with a `llama` provider serving
/// model `probe` (the one timed) and a `noise` one.
pub fn probe_edge(name: &str, addr: SocketAddr) -> Result<EdgeHandle, BoxError> {
    let handle = EdgeClient::new(EdgeConfig::new(name, 7)).connect(addr)?;
    handle.with_registry(|reg: &mut NodeRegistry, now| {
        let node = NodeConfig::new("p0")
            .with_provider(
                ProviderConfig::new("llama", ProviderCategory::LocalInference, 64, 0)
                    .with_model("probe"),
            )
            .with_provider(
                ProviderConfig::new("noise", ProviderCategory::Api, 64, 0).with_model("noise"),
            );
        let _ = reg.configure(node, now);
        let _ = reg.connect_ready("p0", now);
    });
    Ok(handle)
}

/// What `cp`'s load watch shows of the probes: (edge, in_flight of its provider 0,
/// when seen), sent as each change is applied; the task ends with the watch.
pub fn watch_probes(
    cp: &ControlPlaneHandle,
) -> (
    UnboundedReceiver<(String, u32, Instant)>,
    tokio::task::JoinHandle<()>,
) {
    let (seen_tx, seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watch = cp.watch_load();
    let watcher = tokio::spawn(async move {
        while let Some(item) = watch.next().await {
            let WatchItem::Changes(changes) = item else {
                continue;
            };
            let at = Instant::now();
            for c in changes {
                if !c.edge_id.starts_with("probe-") {
                    continue;
                }
                let view = match &c.kind {
                    ChangeKind::View(v) => v,
                    ChangeKind::Numbers { view, .. } => view,
                    _ => continue,
                };
                if let Some(p) = view.provider(0) {
                    let _ = seen_tx.send((c.edge_id.to_string(), p.in_flight(), at));
                }
            }
        }
    });
    (seen_rx, watcher)
}

/// The probes' noise: another provider of each changes every 100 ms, so a probe's
/// change waits for its Edge's next update slot, as on a busy Edge.
pub fn noise(probes: Vec<EdgeHandle>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut held: Vec<Vec<Lease>> = probes.iter().map(|_| Vec::new()).collect();
        for _ in 0..36_000 {
            tick.tick().await;
            for (h, held) in probes.iter().zip(&mut held) {
                h.with_registry(|reg: &mut NodeRegistry, _| {
                    if held.len() >= 8 {
                        for lease in held.drain(..) {
                            let _ = reg.release(lease);
                        }
                    } else if let Ok(lease) = reg.admit("p0", "noise", LeaseKind::Normal) {
                        held.push(lease);
                    }
                });
            }
        }
    })
}

/// One probe: a lease taken (or, past 32, all released) on `probe` (named `id`),
/// then the time until `seen` shows its new in_flight (ms); `None` after
/// [`PROBE_TIMEOUT`].
pub async fn probe_once(
    probe: &EdgeHandle,
    held: &mut Vec<Lease>,
    id: &str,
    seen: &mut UnboundedReceiver<(String, u32, Instant)>,
) -> Option<f64> {
    let expected = probe.with_registry(|reg: &mut NodeRegistry, _| {
        if held.len() >= 32 {
            for lease in held.drain(..) {
                let _ = reg.release(lease);
            }
        } else if let Ok(lease) = reg.admit("p0", "llama", LeaseKind::Normal) {
            held.push(lease);
        }
        held.len() as u32
    });
    let t0 = Instant::now();
    let deadline = t0 + PROBE_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, seen.recv()).await {
            Ok(Some((edge, in_flight, at))) if edge == id && in_flight == expected => {
                return Some(at.saturating_duration_since(t0).as_secs_f64() * 1e3);
            }
            Ok(Some(_)) => {}
            _ => return None,
        }
    }
}

/// A random pause of up to `period` after `every` (xorshift state in `jitter`): a
/// probe right after the update that showed the last one would always wait the same
/// part of an interval.
pub fn pause(jitter: &mut u64, every: Duration, period: Duration) -> Duration {
    *jitter = jitter
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1);
    every + Duration::from_millis((*jitter >> 33) % (period.as_millis() as u64 + 1))
}
