//! Realistic messages to measure: status requests, and status responses built by a
//! real [`NodeRegistry`] (labels, config summaries, leases, queue pressure, a mix of
//! node states).

use iop_core::NodeRegistry;
use iop_core::proto::{EdgeStatusRequest, EdgeStatusResponse, Envelope};
use iop_core::registry::{
    Candidate, LeaseKind, NodeConfig, NodeEndpoint, ProviderCategory, ProviderConfig, ReadyOutcome,
};

/// The Edge id used by every fixture.
pub const EDGE_ID: &str = "edge-bench-0001";
/// The wall-clock time stamped on fixtures (2026-11-30).
pub const NOW_UNIX_MS: u64 = 1_796_000_000_000;

const CATEGORIES: [ProviderCategory; 3] = [
    ProviderCategory::LocalInference,
    ProviderCategory::Api,
    ProviderCategory::Cli,
];
const MODELS: [&str; 4] = [
    "llama-3.1-8b-instruct",
    "qwen2.5-32b-instruct",
    "mistral-small-24b",
    "gpt-oss-20b",
];

fn node_id(i: usize) -> String {
    format!("node-{i:05}")
}

fn node_config(i: usize, providers: usize) -> NodeConfig {
    let mut node = NodeConfig::new(node_id(i))
        .with_label("zone", format!("zone-{}", i % 3))
        .with_label("rack", format!("r{:03}", i / 40))
        .with_revision(format!(
            "sha256:{:016x}",
            (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ))
        .with_endpoint(NodeEndpoint::new(
            format!("10.0.{}.{}:7000", i / 250, i % 250),
            "node-token",
        ));
    for m in MODELS.iter().take(2) {
        node = node.with_model(*m);
    }
    for p in 0..providers {
        let category = CATEGORIES
            .get(p % CATEGORIES.len())
            .copied()
            .unwrap_or(ProviderCategory::Api);
        let mut provider = ProviderConfig::new(format!("provider-{p}"), category, 8, 2);
        for m in MODELS.iter().skip(p % 2).take(2) {
            provider = provider.with_model(*m);
        }
        node = node.with_provider(provider);
    }
    node
}

/// A registry of `nodes` nodes with `providers` providers each: nine in ten nodes are
/// READY (with one normal and one long-context lease on their first provider and one
/// queued request naming their first two providers), every tenth was never connected.
///
/// Panics only if the registry refuses this fixed, valid configuration.
pub fn registry(nodes: usize, providers: usize) -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    for i in 0..nodes {
        let at = NOW_UNIX_MS - 60_000 + i as u64;
        let _added = reg
            .configure(node_config(i, providers), at)
            .expect("valid fixture config");
        if i % 10 == 9 {
            continue;
        }
        let id = node_id(i);
        let generation = reg.connect(&id, at).expect("fixture node connects");
        assert_eq!(reg.mark_ready(&id, generation, at), ReadyOutcome::Ready);
        if providers > 0 {
            // Leases are handles the Edge would keep; the numbers live in the registry.
            let _normal = reg
                .admit(&id, "provider-0", LeaseKind::Normal)
                .expect("room");
            let _long = reg
                .admit(&id, "provider-0", LeaseKind::LongContext)
                .expect("room");
            let candidates = (0..providers.min(2))
                .map(|p| Candidate::new(id.clone(), format!("provider-{p}")))
                .collect();
            let _ticket = reg
                .enqueue(LeaseKind::Normal, candidates)
                .expect("queue has room");
        }
    }
    while reg.poll_event().is_some() {}
    reg
}

/// The full status of `reg`, as the Edge answers a status request.
pub fn status_response(reg: &NodeRegistry) -> EdgeStatusResponse {
    reg.snapshot(EDGE_ID, NOW_UNIX_MS, &[] as &[&str], usize::MAX)
}

/// A status response envelope for `correlation_id`.
pub fn status_response_envelope(reg: &NodeRegistry, correlation_id: u64) -> Envelope {
    Envelope::correlated(correlation_id, status_response(reg))
}

/// The status request the CP sends on every resync: every node, one correlation id.
pub fn full_status_request(correlation_id: u64) -> Envelope {
    Envelope::correlated(
        correlation_id,
        EdgeStatusRequest {
            node_ids: Vec::new(),
            ..Default::default()
        },
    )
}

/// A status request naming four nodes.
pub fn targeted_status_request(correlation_id: u64) -> Envelope {
    Envelope::correlated(
        correlation_id,
        EdgeStatusRequest {
            node_ids: (0..4).map(node_id).collect(),
            ..Default::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use iop_core::proto::{Message, NodeState};

    #[test]
    fn the_registry_fixture_is_realistic() {
        let reg = registry(20, 4);
        let status = status_response(&reg);
        assert_eq!(status.nodes.len(), 20);
        let ready = status.nodes.iter().filter(|n| n.connected).count();
        assert_eq!(ready, 18);
        let n0 = &status.nodes[0];
        assert_eq!(n0.state, NodeState::Ready as i32);
        assert_eq!(n0.labels.len(), 2);
        assert_eq!(n0.provider_snapshots.len(), 4);
        let p0 = &n0.provider_snapshots[0];
        assert_eq!(
            (p0.in_flight, p0.long_context_in_flight, p0.queued),
            (2, 1, 1)
        );
        assert_eq!(n0.provider_snapshots[1].queued, 1);
        assert_eq!(status.nodes[9].state, NodeState::Configured as i32);
        // Never a node address or token on the wire.
        let bytes = status.encode_to_vec();
        assert!(!bytes.windows(10).any(|w| w == b"node-token"));
        assert!(!bytes.windows(5).any(|w| w == b"10.0."));
    }

    #[test]
    fn encode_snapshot_matches_prost_on_the_fixture() {
        let reg = registry(50, 4);
        let mut ours = Vec::new();
        let out = reg.encode_snapshot(EDGE_ID, NOW_UNIX_MS, &[] as &[&str], usize::MAX, &mut ours);
        assert_eq!(out.nodes, 50);
        assert_eq!(ours, status_response(&reg).encode_to_vec());
    }

    #[test]
    fn requests_carry_their_correlation_id() {
        assert_eq!(full_status_request(7).correlation_id, 7);
        assert_eq!(
            targeted_status_request(3).encoded_len(),
            full_status_request(3).encoded_len() + 4 * 12
        );
    }
}
