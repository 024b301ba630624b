//! Simulated nodes (`iop-edge --simulate`, and the demo): seeded, they connect, become
//! ready, take and release leases, queue requests, disconnect and reconnect, so an
//! operator sees life in status and events. They act only through the registry's
//! public calls, exactly as a real Node⇄Edge transport would.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iop_core::NodeRegistry;
use iop_core::proto::NodeState;
use iop_core::registry::{Candidate, Generation, Lease, LeaseKind, QueueTicket};
use iop_core::rng::SplitMix64;

use iop_core::edge::TargetLevel;

use super::edge_ops::{on_edge, target_nodes};
use super::unix_ms;
use iop_tokio::{CommandResult, EdgeClient, EdgeHandle};

/// `sim.disconnect`: drops the matched simulated nodes' connections and keeps them
/// down (the simulation leaves them alone) until `sim.connect`.
pub const SIM_DISCONNECT: &str = "sim.disconnect";
/// `sim.connect`: connects the matched simulated nodes, makes them ready, and hands
/// them back to the simulation.
pub const SIM_CONNECT: &str = "sim.connect";

/// `sim.lease`: takes one lease on the first provider of each matched simulated node
/// and keeps it (the simulation leaves the node alone) until `sim.connect`: a
/// `node.drain` of it then waits, as it would for real work.
pub const SIM_LEASE: &str = "sim.lease";

/// What one simulated node holds: its connection and the leases and queued requests
/// it made.
#[derive(Debug, Default)]
struct SimNode {
    generation: Option<Generation>,
    leases: Vec<Lease>,
    tickets: Vec<QueueTicket>,
}

/// Chances (in percent, per step and node) of each thing a simulated node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimRates {
    /// A disconnected node connects.
    pub connect: u64,
    /// A ready node drops its connection.
    pub disconnect: u64,
    /// A ready node takes a lease.
    pub lease: u64,
    /// A ready node releases a lease.
    pub release: u64,
    /// A request is queued for the node's providers.
    pub enqueue: u64,
    /// A queued request is taken out.
    pub dequeue: u64,
}

impl Default for SimRates {
    fn default() -> Self {
        Self {
            connect: 50,
            disconnect: 3,
            lease: 40,
            release: 35,
            enqueue: 20,
            dequeue: 25,
        }
    }
}

/// Simulated nodes over a registry: call [`step`](Self::step) periodically.
#[derive(Debug)]
pub struct Simulator {
    rng: SplitMix64,
    rates: SimRates,
    nodes: BTreeMap<String, SimNode>,
    held: BTreeSet<String>,
}

impl Simulator {
    /// A simulator drawing from `seed`.
    pub fn new(seed: u64, rates: SimRates) -> Self {
        Self {
            rng: SplitMix64::new(seed),
            rates,
            nodes: BTreeMap::new(),
            held: BTreeSet::new(),
        }
    }

    /// Stops random changes to `node_id` (it keeps its state); [`connect`](Self::connect)
    /// and [`disconnect`](Self::disconnect) still work on it.
    pub fn hold(&mut self, node_id: &str) {
        self.held.insert(node_id.to_owned());
    }

    /// Lets random changes to `node_id` happen again.
    pub fn release_hold(&mut self, node_id: &str) {
        self.held.remove(node_id);
    }

    /// Connects `node_id` and makes it ready now (if configured and not live). True
    /// when it is READY under this simulator afterwards.
    pub fn connect(&mut self, reg: &mut NodeRegistry, node_id: &str, now_unix_ms: u64) -> bool {
        let node = self.nodes.entry(node_id.to_owned()).or_default();
        if node.generation.is_none() {
            match reg.connect(node_id, now_unix_ms) {
                Ok(g) => node.generation = Some(g),
                Err(_) => return false,
            }
        }
        let Some(g) = node.generation else {
            return false;
        };
        let _ = reg.mark_ready(node_id, g, now_unix_ms);
        reg.node_state(node_id) == Some((NodeState::Ready, g))
    }

    /// Holds `node_id` ([`hold`](Self::hold)), connects it if it is not, and takes one
    /// lease on its first provider, kept until the node disconnects. True when the
    /// registry granted it.
    pub fn lease(&mut self, reg: &mut NodeRegistry, node_id: &str, now_unix_ms: u64) -> bool {
        self.hold(node_id);
        if !self.connect(reg, node_id, now_unix_ms) {
            return false;
        }
        let Some(provider) = reg
            .node_config(node_id)
            .and_then(|c| c.providers.into_iter().next())
        else {
            return false;
        };
        match reg.admit(node_id, &provider.provider_id, LeaseKind::Normal) {
            Ok(lease) => {
                self.nodes
                    .entry(node_id.to_owned())
                    .or_default()
                    .leases
                    .push(lease);
                true
            }
            Err(_) => false,
        }
    }

    /// Drops `node_id`'s connection: the registry releases its leases and reports it
    /// DISCONNECTED. True when it had one.
    pub fn disconnect(
        &mut self,
        reg: &mut NodeRegistry,
        node_id: &str,
        reason: &str,
        now_unix_ms: u64,
    ) -> bool {
        let Some(node) = self.nodes.get_mut(node_id) else {
            return false;
        };
        let Some(g) = node.generation.take() else {
            return false;
        };
        // Leases die with the connection (the registry released them).
        node.leases.clear();
        let _ = reg.close(node_id, g, reason, now_unix_ms);
        true
    }

    /// One round: every configured node that is not held may connect, take or release
    /// a lease, queue or unqueue a request, or disconnect.
    pub fn step(&mut self, reg: &mut NodeRegistry, now_unix_ms: u64) {
        let ids: Vec<String> = reg.node_ids().map(str::to_owned).collect();
        // Nodes removed from the config: forget them (their leases are dead).
        self.nodes.retain(|id, _| ids.contains(id));
        for id in ids {
            if self.held.contains(&id) {
                continue;
            }
            self.step_node(reg, &id, now_unix_ms);
        }
    }

    fn step_node(&mut self, reg: &mut NodeRegistry, id: &str, now: u64) {
        let rates = self.rates;
        let providers: Vec<String> = reg
            .node_config(id)
            .map(|c| c.providers.into_iter().map(|p| p.provider_id).collect())
            .unwrap_or_default();
        let ready = self
            .nodes
            .get(id)
            .and_then(|n| n.generation)
            .is_some_and(|g| reg.node_state(id) == Some((NodeState::Ready, g)));
        if !ready {
            // Someone else's connection or none: connect when free, at the given rate.
            let live = matches!(
                reg.node_state(id),
                Some((NodeState::Pending | NodeState::Ready, _))
            );
            let ours = self.nodes.get(id).and_then(|n| n.generation).is_some();
            if (ours || !live) && self.rng.chance(rates.connect, 100) {
                self.connect(reg, id, now);
            }
            return;
        }
        if self.rng.chance(rates.disconnect, 100) {
            self.disconnect(reg, id, "simulated connection loss", now);
            return;
        }
        if !providers.is_empty() && self.rng.chance(rates.lease, 100) {
            let provider = &providers[self.rng.index(providers.len())];
            let kind = if self.rng.chance(25, 100) {
                LeaseKind::LongContext
            } else {
                LeaseKind::Normal
            };
            if let Ok(lease) = reg.admit(id, provider, kind) {
                self.nodes
                    .entry(id.to_owned())
                    .or_default()
                    .leases
                    .push(lease);
            }
        }
        let node = self.nodes.entry(id.to_owned()).or_default();
        if !node.leases.is_empty() && self.rng.chance(rates.release, 100) {
            let i = self.rng.index(node.leases.len());
            let lease = node.leases.swap_remove(i);
            let _ = reg.release(lease);
        }
        if !providers.is_empty() && node.tickets.len() < 8 && self.rng.chance(rates.enqueue, 100) {
            let candidates = providers
                .iter()
                .map(|p| Candidate::new(id, p.as_str()))
                .collect();
            if let Ok(t) = reg.enqueue(LeaseKind::Normal, candidates) {
                node.tickets.push(t);
            }
        }
        if !node.tickets.is_empty() && self.rng.chance(rates.dequeue, 100) {
            let t = node.tickets.remove(0);
            let _ = reg.dequeue(t);
        }
    }
}

/// Runs `sim` on `edge`'s registry every `interval` until the Edge stops. The
/// simulator stays shared so the caller can steer it (hold, connect, disconnect).
pub fn spawn(
    edge: EdgeHandle,
    sim: Arc<Mutex<Simulator>>,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut events = edge.events();
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                // The subscription ends when the Edge stops: so do we.
                next = futures_lite::StreamExt::next(&mut events) => {
                    if next.is_none() {
                        return;
                    }
                    continue;
                }
            }
            edge.with_registry(|reg, _now| {
                if let Ok(mut sim) = sim.lock() {
                    sim.step(reg, unix_ms());
                }
            });
        }
    })
}

/// Registers `sim.disconnect`, `sim.connect` and `sim.lease` on `client`, steering `sim`: an
/// operator (or a test) drops a node and brings it back at a moment of their choosing.
pub fn register(client: EdgeClient, sim: Arc<Mutex<Simulator>>) -> EdgeClient {
    let down = sim.clone();
    let lease = sim.clone();
    client
        .operation(SIM_LEASE, TargetLevel::Node, move |ctx| {
            let sim = lease.clone();
            on_edge(ctx, move |ctx, handle| async move {
                let nodes = target_nodes(ctx.target());
                let leased = handle.with_registry(|reg, _now| {
                    let Ok(mut sim) = sim.lock() else { return 0 };
                    nodes
                        .iter()
                        .filter(|id| sim.lease(reg, id, unix_ms()))
                        .count()
                });
                CommandResult::succeeded(format!(
                    "{leased} of {} node(s) hold a lease until sim.connect",
                    nodes.len()
                ))
                .with_detail("leased", leased.to_string())
            })
        })
        .operation(SIM_DISCONNECT, TargetLevel::Node, move |ctx| {
            let sim = down.clone();
            on_edge(ctx, move |ctx, handle| async move {
                let nodes = target_nodes(ctx.target());
                let dropped = handle.with_registry(|reg, _now| {
                    let Ok(mut sim) = sim.lock() else { return 0 };
                    nodes
                        .iter()
                        .filter(|id| {
                            sim.hold(id);
                            sim.disconnect(reg, id, "sim.disconnect", unix_ms())
                        })
                        .count()
                });
                CommandResult::succeeded(format!(
                    "{dropped} of {} node(s) disconnected; held until sim.connect",
                    nodes.len()
                ))
                .with_detail("disconnected", dropped.to_string())
            })
        })
        .operation(SIM_CONNECT, TargetLevel::Node, move |ctx| {
            let sim = sim.clone();
            on_edge(ctx, move |ctx, handle| async move {
                let nodes = target_nodes(ctx.target());
                let ready = handle.with_registry(|reg, _now| {
                    let Ok(mut sim) = sim.lock() else { return 0 };
                    nodes
                        .iter()
                        .filter(|id| {
                            sim.release_hold(id);
                            sim.connect(reg, id, unix_ms())
                        })
                        .count()
                });
                CommandResult::succeeded(format!("{ready} of {} node(s) ready", nodes.len()))
                    .with_detail("ready", ready.to_string())
            })
        })
}
