//! One test per rule of PROTOCOL.md §5 (and the seed's field rules): each name states the rule.

use iop_core::proto::{
    EdgeNodeSnapshot, EdgeStatusResponse, NodeState, ProviderHealth, ProviderSnapshot,
    ProviderStatus,
};
use iop_core::registry::{
    AdmitError, Candidate, CloseOutcome, ConfigError, ConfigureOutcome, ConnectError,
    DequeueOutcome, Generation, LeaseKind, NodeConfig, NodeEndpoint, NodeRegistry,
    ProviderCategory, ProviderConfig, ReadyOutcome, RegistryEvent, RegistryEventKind,
    ReleaseOutcome, RemoveOutcome,
};

const EDGE: &str = "edge-1";

fn node(id: &str) -> NodeConfig {
    NodeConfig::new(id)
        .with_revision("sha256:abc")
        .with_model("llama-3")
        .with_label("zone", "a")
        .with_endpoint(NodeEndpoint::new("10.0.0.1:7000", "tok"))
        .with_provider(
            ProviderConfig::new("gpu", ProviderCategory::LocalInference, 2, 1)
                .with_model("llama-3"),
        )
        .with_provider(ProviderConfig::new("api", ProviderCategory::Api, 4, 0))
}

fn registry_with(ids: &[&str]) -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    for id in ids {
        assert_eq!(reg.configure(node(id), 1), Ok(ConfigureOutcome::Added));
    }
    drain_events(&mut reg);
    reg
}

fn ready(reg: &mut NodeRegistry, id: &str, now: u64) -> Generation {
    let g = reg.connect(id, now).expect("connect");
    assert_eq!(reg.mark_ready(id, g, now), ReadyOutcome::Ready);
    g
}

fn snap(reg: &NodeRegistry) -> EdgeStatusResponse {
    reg.snapshot(EDGE, 99, &[] as &[&str], usize::MAX)
}

fn node_snap(reg: &NodeRegistry, id: &str) -> EdgeNodeSnapshot {
    reg.snapshot(EDGE, 99, &[id], usize::MAX)
        .nodes
        .into_iter()
        .next()
        .expect("node present")
}

fn provider(reg: &NodeRegistry, id: &str, provider_id: &str) -> ProviderSnapshot {
    node_snap(reg, id)
        .provider_snapshots
        .into_iter()
        .find(|p| p.provider_id == provider_id)
        .expect("provider present")
}

fn drain_events(reg: &mut NodeRegistry) -> Vec<RegistryEvent> {
    std::iter::from_fn(|| reg.poll_event()).collect()
}

fn kinds(reg: &mut NodeRegistry) -> Vec<(String, RegistryEventKind, u64)> {
    drain_events(reg)
        .into_iter()
        .map(|e| (e.node_id, e.kind, e.generation.get()))
        .collect()
}

fn assert_offline_zeros(p: &ProviderSnapshot) {
    assert_eq!(p.status, ProviderStatus::Unavailable as i32);
    assert_eq!(p.health, ProviderHealth::Offline as i32);
    assert!(!p.admission_eligible);
    assert_eq!(
        [
            p.capacity,
            p.in_flight,
            p.queued,
            p.long_context_capacity,
            p.long_context_in_flight,
            p.long_context_queued
        ],
        [0; 6]
    );
}

mod capacity;
mod configuration;
mod ownership;
