//! The monitor's rules of a status snapshot (PROTOCOL.md §5).

use crate::proto::{EdgeStatusResponse, NodeState, ProviderHealth};

/// The PROTOCOL.md §5 rules a snapshot breaks (empty when it keeps them all).
pub fn snapshot_problems(s: &EdgeStatusResponse) -> Vec<String> {
    let mut out = Vec::new();
    for n in &s.nodes {
        let ready = n.state == NodeState::Ready as i32;
        if n.connected != ready {
            out.push(format!(
                "{}: connected={} in state {}",
                n.node_id, n.connected, n.state
            ));
        }
        for p in &n.provider_snapshots {
            let id = format!("{}/{}", n.node_id, p.provider_id);
            if p.health == ProviderHealth::Offline as i32 {
                let numbers = p.numbers();
                if numbers.iter().any(|x| *x != 0) || p.admission_eligible {
                    out.push(format!("{id}: offline but reports {numbers:?}"));
                }
            }
            if !ready && p.health != ProviderHealth::Offline as i32 {
                out.push(format!("{id}: node not READY but provider not OFFLINE"));
            }
            if p.in_flight > p.capacity || p.long_context_in_flight > p.long_context_capacity {
                out.push(format!("{id}: in_flight over capacity: {p:?}"));
            }
            if p.long_context_in_flight > p.in_flight || p.long_context_queued > p.queued {
                out.push(format!("{id}: long-context counts exceed totals: {p:?}"));
            }
            if p.admission_eligible && p.in_flight >= p.capacity {
                out.push(format!("{id}: eligible with no room: {p:?}"));
            }
        }
    }
    out
}
