//! A synthetic fleet for the placement benchmark, without sockets: `edges` Edges of 4
//! READY nodes with 2 providers each (`llama` serving `llama-3` on every node; `api`
//! serving one of four models per Edge), numbers drawn at random; load updates
//! applied to the views as the Control Plane applies them ([`EdgeLoad::apply`]) and
//! folded into an [`iop_fleet::Fleet`]; and the scan a router without an index would
//! make, the placement's baseline.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use iop_core::cp::load::{EdgeLoad, LoadChange};
use iop_core::cp::{ConnectionId, CpEvent};
use iop_core::proto::{
    EdgeNodeSnapshot, EdgeStatusResponse, NodeState, ProviderHealth, ProviderLoad,
    ProviderSnapshot, ProviderStatus,
};
use iop_fleet::{Fleet, FleetConfig};

/// Nodes per Edge.
pub const NODES: usize = 4;
/// Providers per node.
pub const PROVIDERS: usize = 2;
/// The model every node's `llama` provider serves.
pub const HOT_MODEL: &str = "llama-3";
/// The models of the `api` providers, one per Edge in turn.
pub const API_MODELS: [&str; 4] = ["gpt-a", "gpt-b", "gpt-c", "gpt-d"];

/// A small deterministic generator (xorshift64*): the same fleet every run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (not zero).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Random numbers for one provider of `capacity`: its load update.
pub fn provider_load(rng: &mut Rng, node: usize, provider: usize, capacity: u32) -> ProviderLoad {
    let in_flight = rng.below(u64::from(capacity) + 1) as u32;
    let offline = rng.below(40) == 0;
    let (capacity, in_flight, queued) = if offline {
        (0, 0, 0)
    } else {
        (capacity, in_flight, rng.below(3) as u32)
    };
    ProviderLoad {
        node_id: node_id(node),
        provider_id: provider_id(provider).into(),
        status: if offline {
            ProviderStatus::Unavailable
        } else {
            ProviderStatus::Available
        } as i32,
        health: if offline {
            ProviderHealth::Offline
        } else {
            ProviderHealth::Healthy
        } as i32,
        capacity,
        in_flight,
        queued,
        admission_eligible: !offline && in_flight < capacity,
        node_connected: true,
        ..Default::default()
    }
}

fn node_id(node: usize) -> String {
    format!("gpu-{node}")
}

fn provider_id(provider: usize) -> &'static str {
    if provider == 0 { "llama" } else { "api" }
}

/// The capacity of provider `provider` (by position) of every node.
pub fn capacity_of(provider: usize) -> u32 {
    if provider == 0 { 4 } else { 8 }
}

/// A provider as a full status reports it: the numbers of its load update `l`, the
/// model it serves.
pub fn snapshot(l: ProviderLoad, model: &str) -> ProviderSnapshot {
    ProviderSnapshot {
        provider_id: l.provider_id,
        status: l.status,
        health: l.health,
        capacity: l.capacity,
        in_flight: l.in_flight,
        queued: l.queued,
        long_context_capacity: l.long_context_capacity,
        long_context_in_flight: l.long_context_in_flight,
        long_context_queued: l.long_context_queued,
        models: vec![model.into()],
        admission_eligible: l.admission_eligible,
        ..Default::default()
    }
}

/// Edge `e`'s full status, its numbers drawn from `rng`.
pub fn status(e: usize, rng: &mut Rng) -> EdgeStatusResponse {
    let nodes = (0..NODES)
        .map(|n| EdgeNodeSnapshot {
            node_id: node_id(n),
            connected: true,
            state: NodeState::Ready as i32,
            labels: [("zone".to_owned(), format!("z{}", e % 8))].into(),
            provider_snapshots: (0..PROVIDERS)
                .map(|p| {
                    let l = provider_load(rng, n, p, capacity_of(p));
                    let model = if p == 0 {
                        HOT_MODEL
                    } else {
                        API_MODELS[e % API_MODELS.len()]
                    };
                    snapshot(l, model)
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    EdgeStatusResponse {
        edge_id: edge_id(e),
        nodes,
        registry_revision: 1,
        ..Default::default()
    }
}

/// Edge `e`'s id.
pub fn edge_id(e: usize) -> String {
    format!("edge-{e:06}")
}

/// The fleet and the views the Control Plane holds, as the core keeps them.
pub struct Synthetic {
    /// The fleet, folded from the events.
    pub fleet: Fleet,
    /// Each Edge's view.
    pub views: Vec<Arc<EdgeLoad>>,
    /// The wall clock, Unix ms.
    pub now_ms: u64,
}

impl Synthetic {
    /// `edges` Edges that push their updates, each with a first full status at
    /// `now_ms`.
    pub fn new(edges: usize, now_ms: u64, rng: &mut Rng) -> Self {
        let mut fleet = Fleet::new(FleetConfig::default()).unwrap_or_else(|_| unreachable!());
        let mut views = Vec::with_capacity(edges);
        for e in 0..edges {
            let view = Arc::new(EdgeLoad::from_status(&status(e, rng), 1));
            fleet.handle_event(&CpEvent::SessionAccepted {
                conn: ConnectionId(e as u64),
                edge_id: edge_id(e),
                session_id: 1,
                superseded_session_id: None,
                load_update_interval: Some(Duration::from_millis(250)),
            });
            fleet.handle_event(&CpEvent::LoadView {
                edge_id: edge_id(e),
                session_id: 1,
                at_unix_ms: now_ms,
                change: LoadChange::Replaced(view.clone()),
            });
            views.push(view);
        }
        Self {
            fleet,
            views,
            now_ms,
        }
    }

    /// Applies `update` to Edge `e`'s view and folds the change into the fleet, as the
    /// Control Plane's apply path does.
    pub fn update(&mut self, e: usize, update: &[ProviderLoad]) {
        let Some(view) = self.views.get_mut(e) else {
            return;
        };
        let applied = Arc::make_mut(view).apply(update);
        if applied.changed.is_empty() {
            return;
        }
        self.fleet.handle_event(&CpEvent::LoadView {
            edge_id: edge_id(e),
            session_id: 1,
            at_unix_ms: self.now_ms,
            change: LoadChange::Updated {
                view: view.clone(),
                changed: applied.changed,
            },
        });
    }

    /// The baseline: the best `limit` providers of `model` found by scanning every
    /// view (the same rules: online, room, eligible), as (free, queued, edge, index).
    pub fn scan(&self, model: &str, limit: usize) -> Vec<(u32, u32, usize, usize)> {
        let mut best: BinaryHeap<(Reverse<u32>, u32, usize, usize)> = BinaryHeap::new();
        for (e, view) in self.views.iter().enumerate() {
            for (i, p) in view.providers().enumerate() {
                let free = p.capacity().saturating_sub(p.in_flight());
                if p.is_offline() || free == 0 || !p.admission_eligible() {
                    continue;
                }
                if !p.models().any(|m| m == model) {
                    continue;
                }
                best.push((Reverse(free), p.queued(), e, i));
                if best.len() > limit {
                    best.pop();
                }
            }
        }
        let mut out: Vec<_> = best
            .into_iter()
            .map(|(Reverse(f), q, e, i)| (f, q, e, i))
            .collect();
        out.sort_by_key(|&(f, q, e, i)| (Reverse(f), q, e, i));
        out
    }
}
