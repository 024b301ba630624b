//! The node side of a [`Sim`]: nodes connecting, becoming ready, closing (with
//! current and stale generations), leases, queue pressure, provider marks, removal
//! and reconfiguration — in each Edge process's registry.

use std::collections::BTreeMap;

use super::sim::{NODES, ORIGIN_UNIX_MS, Sim, edge_id, node_config};
use crate::registry::{Candidate, Generation, Lease, LeaseKind, QueueTicket};

/// What the simulated node side of one Edge process holds.
#[derive(Debug, Default)]
pub(super) struct NodeSide {
    pub(super) generations: BTreeMap<&'static str, Vec<Generation>>,
    pub(super) leases: Vec<Lease>,
    pub(super) tickets: Vec<QueueTicket>,
}

impl Sim {
    /// Node connect / ready / close (current or stale) / lease / queue / provider
    /// marks / remove and reconfigure, on one process's registry.
    pub(super) fn node_activity(&mut self) {
        let i = self.any_process();
        let node = self.node();
        let op = self.rng.range(0, 11);
        let kind = if self.rng.chance(1, 3) {
            LeaseKind::LongContext
        } else {
            LeaseKind::Normal
        };
        let pick = self.rng.next_u64() as usize;
        let side = self.nodes.entry(i).or_default();
        let Some(p) = self.pair.edges.get_mut(i) else {
            return;
        };
        let mut reg = p.edge.registry_mut();
        let ms = ORIGIN_UNIX_MS + self.pair.now.as_millis();
        let gens = side.generations.entry(node).or_default();
        match op {
            0 | 1 => {
                if let Ok(g) = reg.connect(node, ms) {
                    gens.push(g);
                }
            }
            2 | 3 => {
                if let Some(g) = gens.last() {
                    let _ = reg.mark_ready(node, *g, ms);
                }
            }
            4 => {
                if let Some(g) = gens.last() {
                    let _ = reg.close(node, *g, "node went away", ms);
                }
            }
            5 => {
                // A stale close: a generation that is not (or no longer) the owner's.
                if let Some(g) = gens.first() {
                    let _ = reg.close(node, *g, "stale", ms);
                }
            }
            6 | 7 => {
                if let Ok(lease) = reg.admit(node, "p0", kind) {
                    side.leases.push(lease);
                }
            }
            8 => {
                if !side.leases.is_empty() {
                    let lease = side.leases.swap_remove(pick % side.leases.len());
                    let _ = reg.release(lease);
                }
            }
            9 => {
                if !side.tickets.is_empty() && pick.is_multiple_of(2) {
                    let t = side.tickets.swap_remove(pick % side.tickets.len());
                    let _ = reg.dequeue(t);
                } else if let Ok(t) = reg.enqueue(kind, vec![Candidate::new(node, "p0")]) {
                    side.tickets.push(t);
                }
            }
            10 => {
                if pick.is_multiple_of(2) {
                    let _ = reg.set_provider_online(node, "p0", pick.is_multiple_of(4));
                } else {
                    let _ = reg.set_provider_healthy(node, "p0", pick % 4 == 1);
                }
            }
            _ => {
                if reg.contains(node) {
                    let _ = reg.remove(node, ms);
                } else {
                    let _ = reg.configure(node_config(node), ms);
                }
            }
        }
        // The change is an input: the guard's drop queues its node events.
        drop(reg);
        let edge = p
            .edge
            .registry()
            .snapshot("sim", ms, &[] as &[&str], usize::MAX);
        let at = self.pair.now.as_millis();
        self.pair
            .monitor_mut()
            .on_snapshot(at, &format!("process {i}"), &edge);
        self.advance_ms(1);
    }

    pub(super) fn node(&mut self) -> &'static str {
        NODES
            .get(self.rng.index(NODES.len()))
            .copied()
            .unwrap_or("n0")
    }
}

impl Sim {
    /// Once faults are over and every Edge has said its last word (an update, or the
    /// status it answered), the Control Plane's view of each main process's load is
    /// that process's truth: every provider's §5.2 numbers and its node's `connected`
    /// (PROTOCOL.md §4.8). A difference is a violation at `at_ms`.
    pub(super) fn check_load_views(&mut self, at_ms: u64) {
        for (k, &i) in self.mains.iter().enumerate() {
            let Some(p) = self.pair.edges.get(i) else {
                continue;
            };
            let edge_id = edge_id(k);
            let mut truth = BTreeMap::new();
            p.edge.registry().visit_loads(&mut |node, provider, n| {
                let numbers = (n.status, n.health, n.numbers, n.admission_eligible);
                truth.insert(
                    (node.to_owned(), provider.to_owned()),
                    (numbers, n.node_connected),
                );
            });
            let mut view = BTreeMap::new();
            if let Some(load) = self.pair.cp.edge_load(&edge_id) {
                for node in load.nodes() {
                    let connected = node.state() == crate::proto::NodeState::Ready;
                    for p in node.providers() {
                        let numbers = (p.status(), p.health(), p.numbers(), p.admission_eligible());
                        view.insert(
                            (node.node_id().to_owned(), p.provider_id().to_owned()),
                            (numbers, connected),
                        );
                    }
                }
            }
            if truth != view {
                self.pair.monitor_mut().fail(
                    at_ms,
                    format!(
                        "{edge_id}: the Control Plane's view of its load is not its registry's"
                    ),
                );
            }
        }
    }
}
