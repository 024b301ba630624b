//! What `registry_ops` checks after every op: the snapshot against the model and
//! PROTOCOL.md §5, the budgeted encoder against the plain one, the lifecycle events,
//! and selector resolution.

use iop_core::proto::{Message, NodeState, ProviderHealth, ProviderStatus};
use iop_core::registry::{
    EventSequencer, Generation, NodeConfig, NodeRegistry, Target, TargetLevel, resolve_target,
};

use super::model::Model;
use super::{EDGE_ID, Harness};

impl Harness {
    pub(super) fn drain_events(&mut self) {
        let mut polled = Vec::new();
        while let Some(event) = self.reg.poll_event() {
            polled.push(event);
        }
        let dropped = self.reg.take_dropped_events();
        let expected = std::mem::take(&mut self.model.events);
        let kept = expected.len().min(self.model.event_capacity);
        assert_eq!(dropped, (expected.len() - kept) as u64, "dropped events");
        let got: Vec<_> = polled
            .iter()
            .map(|e| {
                (
                    e.node_id.clone(),
                    e.kind.to_wire(),
                    e.generation.get(),
                    e.occurred_at_unix_ms,
                    e.reason.clone(),
                )
            })
            .collect();
        let want: Vec<_> = expected
            .iter()
            .take(kept)
            .map(|e| {
                (
                    e.node_id.clone(),
                    e.kind,
                    e.generation,
                    e.at,
                    e.reason.to_owned(),
                )
            })
            .collect();
        assert_eq!(got, want, "events");

        // Numbered for the wire, drops leave gaps: every number used exactly once.
        let mut sequencer = EventSequencer::new();
        for (i, event) in polled.iter().enumerate() {
            assert_eq!(sequencer.next(EDGE_ID, event).sequence, i as u64 + 1);
        }
        for _ in 0..dropped {
            sequencer.skip();
        }
        assert_eq!(sequencer.peek(), polled.len() as u64 + dropped + 1);
    }

    pub(super) fn resolve(&self, selector: &str, node_level: bool) {
        let level = if node_level {
            TargetLevel::Node
        } else {
            TargetLevel::Edge
        };
        match resolve_target(&self.reg, selector, level) {
            Ok(Target::Edge) => assert_eq!(level, TargetLevel::Edge),
            Ok(Target::Nodes(nodes)) => {
                assert_eq!(level, TargetLevel::Node);
                assert!(!nodes.is_empty(), "resolved to no nodes");
                assert!(nodes.windows(2).all(|w| w[0] < w[1]), "unsorted");
                for n in &nodes {
                    assert!(self.model.nodes.contains_key(n), "resolved to unknown {n}");
                }
            }
            Ok(Target::Provider {
                node_id,
                provider_id,
            }) => {
                assert_eq!(level, TargetLevel::Node);
                let m = self.model.nodes.get(&node_id);
                assert!(m.is_some_and(|m| m.providers.contains_key(&provider_id)));
            }
            Err(err) => {
                let _ = err.reject_reason();
            }
        }
    }
}

pub(super) fn ids_valid(config: &NodeConfig) -> bool {
    iop_core::ids::is_valid_id(&config.node_id)
        && config.providers.iter().all(|p| {
            iop_core::ids::is_valid_id(&p.provider_id) && p.long_context_capacity <= p.capacity
        })
}

/// The PROTOCOL.md §5 invariants, on the full snapshot, against the model.
pub(super) fn check(reg: &NodeRegistry, model: &Model) {
    let full = reg.snapshot(EDGE_ID, 7, &[] as &[&str], usize::MAX);
    assert!(!full.truncated);
    assert_eq!(full.registry_revision, reg.revision());
    let ids: Vec<&str> = full.nodes.iter().map(|n| n.node_id.as_str()).collect();
    let want: Vec<&str> = model.nodes.keys().map(String::as_str).collect();
    assert_eq!(
        ids, want,
        "configured nodes are never dropped, sorted by id"
    );

    for node in &full.nodes {
        let m = &model.nodes[&node.node_id];
        let ready = m.state == NodeState::Ready;
        assert_eq!(node.state, m.state as i32, "{}: state", node.node_id);
        assert_eq!(
            node.generation, m.generation,
            "{}: generation",
            node.node_id
        );
        assert_eq!(node.connected, ready, "connected ⇔ READY");
        assert_eq!(
            reg.node_state(&node.node_id),
            Some((m.state, Generation::from_raw(m.generation)))
        );
        let pids: Vec<&str> = node
            .provider_snapshots
            .iter()
            .map(|p| p.provider_id.as_str())
            .collect();
        let want: Vec<&str> = m.providers.keys().map(String::as_str).collect();
        assert_eq!(pids, want, "{}: providers", node.node_id);
        for p in &node.provider_snapshots {
            let pm = &m.providers[&p.provider_id];
            let numbers = p.numbers();
            if !ready || pm.offline {
                assert_eq!(p.status, ProviderStatus::Unavailable as i32);
                assert_eq!(p.health, ProviderHealth::Offline as i32);
                assert_eq!(numbers, [0; 6], "offline provider reports zeros");
                assert!(!p.admission_eligible);
                continue;
            }
            let (leases, long_leases) = model.leases_of(&node.node_id, &p.provider_id);
            let (queued, long_queued) = model.queued_of(&node.node_id, &p.provider_id);
            assert_eq!(
                numbers,
                [
                    pm.capacity,
                    leases,
                    queued,
                    pm.long_capacity,
                    long_leases,
                    long_queued
                ],
                "{}/{}: numbers",
                node.node_id,
                p.provider_id
            );
            assert!(p.in_flight <= p.capacity);
            assert!(p.long_context_in_flight <= p.long_context_capacity.min(p.in_flight));
            assert!(p.long_context_queued <= p.queued);
            let degraded = pm.unhealthy || m.drained;
            let status = if degraded {
                ProviderStatus::Degraded
            } else {
                ProviderStatus::Available
            };
            let health = if pm.unhealthy {
                ProviderHealth::Unhealthy
            } else {
                ProviderHealth::Healthy
            };
            assert_eq!((p.status, p.health), (status as i32, health as i32));
            let eligible = !m.drained && !pm.unhealthy && p.in_flight < p.capacity;
            assert_eq!(p.admission_eligible, eligible, "admission_eligible");
        }
    }

    let mut encoded = Vec::new();
    let _ = reg.encode_snapshot(EDGE_ID, 7, &[] as &[&str], usize::MAX, &mut encoded);
    assert_eq!(encoded, full.encode_to_vec(), "encode_snapshot ≠ snapshot");
}

/// A snapshot of `ids` within `budget` bytes: a complete prefix of the unbudgeted one.
pub(super) fn check_budgeted_snapshot(reg: &NodeRegistry, ids: &[&str], budget: usize) {
    let all = reg.snapshot(EDGE_ID, 7, ids, usize::MAX);
    let some = reg.snapshot(EDGE_ID, 7, ids, budget);
    assert!(
        some.encoded_len() <= budget || some.nodes.is_empty(),
        "{} bytes over a budget of {budget}",
        some.encoded_len()
    );
    assert!(some.nodes.len() <= all.nodes.len());
    assert_eq!(
        some.nodes[..],
        all.nodes[..some.nodes.len()],
        "not a prefix"
    );
    assert_eq!(some.truncated, some.nodes.len() < all.nodes.len());
    let mut encoded = Vec::new();
    let _ = reg.encode_snapshot(EDGE_ID, 7, ids, budget, &mut encoded);
    assert_eq!(
        encoded,
        some.encode_to_vec(),
        "budgeted encode_snapshot ≠ snapshot"
    );
}
