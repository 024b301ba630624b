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

#[test]
fn configured_node_stays_in_snapshot_before_first_connect() {
    let reg = registry_with(&["n1"]);
    let n = node_snap(&reg, "n1");
    assert_eq!(n.state, NodeState::Configured as i32);
    assert!(!n.connected);
    assert_eq!(n.generation, 0);
    let config = n.config.expect("config summary");
    assert_eq!(config.revision, "sha256:abc");
    assert_eq!(config.provider_ids, ["api", "gpu"], "sorted by provider id");
    assert_eq!(config.models, ["llama-3"]);
    assert_eq!(n.labels.get("zone").map(String::as_str), Some("a"));
}

#[test]
fn pending_node_is_reported_but_not_connected() {
    let mut reg = registry_with(&["n1"]);
    let g = reg.connect("n1", 5).expect("connect");
    let n = node_snap(&reg, "n1");
    assert_eq!(n.state, NodeState::Pending as i32);
    assert_eq!(n.generation, g.get());
    assert_eq!(n.last_transition_unix_ms, 5);
    assert!(
        !n.connected,
        "connected means dispatch-ready, not registration accepted"
    );
    assert!(
        kinds(&mut reg).is_empty(),
        "no event for accepting a connection"
    );
}

#[test]
fn connected_is_true_only_while_ready() {
    let mut reg = registry_with(&["n1"]);
    let g = ready(&mut reg, "n1", 5);
    assert!(node_snap(&reg, "n1").connected);
    let _ = reg.close("n1", g, "bye", 6);
    let n = node_snap(&reg, "n1");
    assert!(!n.connected);
    assert_eq!(n.state, NodeState::Disconnected as i32);
    assert_eq!(n.generation, g.get(), "last owner's generation is kept");
}

#[test]
fn disconnected_node_stays_in_snapshot() {
    let mut reg = registry_with(&["n1", "n2"]);
    let g = ready(&mut reg, "n1", 5);
    let _ = reg.close("n1", g, "bye", 6);
    let ids: Vec<_> = snap(&reg).nodes.into_iter().map(|n| n.node_id).collect();
    assert_eq!(ids, ["n1", "n2"]);
}

#[test]
fn only_removal_drops_a_node_and_emits_node_removed() {
    let mut reg = registry_with(&["n1", "n2"]);
    let g = ready(&mut reg, "n1", 5);
    let _lease = reg.admit("n1", "gpu", LeaseKind::Normal).expect("admit");
    drain_events(&mut reg);
    assert_eq!(
        reg.remove("n1", 7),
        RemoveOutcome::Removed { released_leases: 1 }
    );
    let ids: Vec<_> = snap(&reg).nodes.into_iter().map(|n| n.node_id).collect();
    assert_eq!(ids, ["n2"]);
    assert_eq!(
        kinds(&mut reg),
        [("n1".to_owned(), RegistryEventKind::Removed, g.get())]
    );
    assert_eq!(reg.remove("n1", 8), RemoveOutcome::UnknownNode);
    assert!(kinds(&mut reg).is_empty());
}

#[test]
fn duplicate_connection_is_rejected_without_touching_owner() {
    let mut reg = registry_with(&["n1"]);
    let g = reg.connect("n1", 5).expect("connect");
    let before = snap(&reg);
    assert_eq!(
        reg.connect("n1", 6),
        Err(ConnectError::Duplicate {
            owner: g,
            state: NodeState::Pending
        })
    );
    assert_eq!(
        snap(&reg),
        before,
        "pending owner untouched, revision unchanged"
    );
    assert_eq!(reg.mark_ready("n1", g, 7), ReadyOutcome::Ready);
    drain_events(&mut reg);
    let before = snap(&reg);
    assert_eq!(
        reg.connect("n1", 8),
        Err(ConnectError::Duplicate {
            owner: g,
            state: NodeState::Ready
        })
    );
    assert_eq!(snap(&reg), before, "ready owner untouched");
    assert!(
        kinds(&mut reg).is_empty(),
        "no event for a rejected duplicate"
    );
    // The rejected duplicates consumed no generation.
    let _ = reg.close("n1", g, "bye", 9);
    let next = reg.connect("n1", 10).expect("connect");
    assert_eq!(next.get(), g.get() + 1);
}

#[test]
fn stale_close_emits_no_disconnect() {
    let mut reg = registry_with(&["n1"]);
    let old = ready(&mut reg, "n1", 5);
    let _ = reg.close("n1", old, "reset", 6);
    let new = ready(&mut reg, "n1", 7);
    drain_events(&mut reg);
    let before = snap(&reg);
    // The old connection's close arrives late, twice, and a made-up one too.
    assert_eq!(reg.close("n1", old, "late", 8), CloseOutcome::Stale);
    assert_eq!(reg.close("n1", old, "late", 8), CloseOutcome::Stale);
    assert_eq!(
        reg.close("n1", Generation::from_raw(new.get() + 5), "?", 8),
        CloseOutcome::Stale
    );
    assert_eq!(snap(&reg), before, "the live owner is still READY");
    assert!(
        kinds(&mut reg).is_empty(),
        "no NODE_DISCONNECTED for a stale close"
    );
}

#[test]
fn stale_ready_changes_nothing() {
    let mut reg = registry_with(&["n1"]);
    let old = reg.connect("n1", 5).expect("connect");
    let _ = reg.close("n1", old, "gone", 6);
    let new = reg.connect("n1", 7).expect("connect");
    let before = snap(&reg);
    assert_eq!(reg.mark_ready("n1", old, 8), ReadyOutcome::Stale);
    assert_eq!(snap(&reg), before);
    assert_eq!(reg.mark_ready("n1", new, 9), ReadyOutcome::Ready);
    assert_eq!(reg.mark_ready("n1", new, 9), ReadyOutcome::AlreadyReady);
    assert_eq!(
        kinds(&mut reg),
        [("n1".to_owned(), RegistryEventKind::Ready, new.get())]
    );
}

#[test]
fn pending_close_returns_node_to_previous_state_without_event() {
    let mut reg = registry_with(&["n1"]);
    let before = node_snap(&reg, "n1");
    let g = reg.connect("n1", 5).expect("connect");
    assert_eq!(
        reg.close("n1", g, "handshake failed", 6),
        CloseOutcome::PendingAbandoned {
            restored: NodeState::Configured
        }
    );
    assert_eq!(
        node_snap(&reg, "n1"),
        before,
        "back to CONFIGURED as it was"
    );

    let owner = ready(&mut reg, "n1", 7);
    let _ = reg.close("n1", owner, "reset", 8);
    let before = node_snap(&reg, "n1");
    drain_events(&mut reg);
    let g = reg.connect("n1", 9).expect("connect");
    assert_eq!(
        reg.close("n1", g, "handshake failed", 10),
        CloseOutcome::PendingAbandoned {
            restored: NodeState::Disconnected
        }
    );
    assert_eq!(
        node_snap(&reg, "n1"),
        before,
        "back to DISCONNECTED as it was"
    );
    assert!(kinds(&mut reg).is_empty(), "a PENDING close emits nothing");
}

#[test]
fn node_disconnected_is_emitted_only_when_the_owner_leaves_ready() {
    let mut reg = registry_with(&["n1"]);
    let g = ready(&mut reg, "n1", 5);
    assert_eq!(
        reg.close("n1", g, "reset by peer", 6),
        CloseOutcome::Disconnected { released_leases: 0 }
    );
    let events = drain_events(&mut reg);
    let [ready_event, disconnected] = events.as_slice() else {
        panic!("expected two events, got {events:?}");
    };
    assert_eq!(ready_event.kind, RegistryEventKind::Ready);
    assert_eq!(ready_event.occurred_at_unix_ms, 5);
    assert_eq!(disconnected.kind, RegistryEventKind::Disconnected);
    assert_eq!(disconnected.generation, g);
    assert_eq!(disconnected.occurred_at_unix_ms, 6);
    assert_eq!(disconnected.reason, "reset by peer");
}

#[test]
fn generations_strictly_increase_across_nodes() {
    let mut reg = registry_with(&["n1", "n2"]);
    let a = reg.connect("n1", 1).expect("connect");
    let b = reg.connect("n2", 1).expect("connect");
    let _ = reg.close("n1", a, "", 2);
    let c = reg.connect("n1", 3).expect("connect");
    assert!(Generation::NONE < a && a < b && b < c);
    assert_eq!(reg.connect("nope", 4), Err(ConnectError::UnknownNode));
}

#[test]
fn offline_provider_keeps_identity_and_reports_zeros() {
    let mut reg = registry_with(&["n1"]);
    // Before the first connection every provider is offline.
    for p in node_snap(&reg, "n1").provider_snapshots {
        assert!(!p.provider_id.is_empty());
        assert_offline_zeros(&p);
    }
    let _g = ready(&mut reg, "n1", 5);
    let _lease = reg
        .admit("n1", "gpu", LeaseKind::LongContext)
        .expect("admit");
    reg.enqueue(LeaseKind::LongContext, vec![Candidate::new("n1", "gpu")])
        .expect("enqueue");
    assert_eq!(reg.set_provider_online("n1", "gpu", false), Ok(true));
    let p = provider(&reg, "n1", "gpu");
    assert_eq!(p.provider_id, "gpu");
    assert_eq!(
        p.category,
        iop_core::proto::ProviderCategory::LocalInference as i32
    );
    assert_eq!(p.models, ["llama-3"]);
    assert_offline_zeros(&p);
    assert_eq!(
        reg.admit("n1", "gpu", LeaseKind::Normal),
        Err(AdmitError::ProviderOffline)
    );
    // The other provider of the READY node is unaffected.
    assert_eq!(provider(&reg, "n1", "api").capacity, 4);
}

#[test]
fn capacity_and_eligibility_return_together_on_ready() {
    let mut reg = registry_with(&["n1"]);
    let g = ready(&mut reg, "n1", 5);
    let _ = reg.close("n1", g, "reset", 6);
    assert_offline_zeros(&provider(&reg, "n1", "gpu"));
    let g = reg.connect("n1", 7).expect("connect");
    assert_offline_zeros(&provider(&reg, "n1", "gpu"));
    assert_eq!(reg.mark_ready("n1", g, 8), ReadyOutcome::Ready);
    // The first snapshot after READY has both.
    let p = provider(&reg, "n1", "gpu");
    assert_eq!((p.capacity, p.long_context_capacity), (2, 1));
    assert!(p.admission_eligible);
    assert_eq!(p.status, ProviderStatus::Available as i32);
    assert_eq!(p.health, ProviderHealth::Healthy as i32);
}

#[test]
fn capacity_and_eligibility_return_together_when_provider_comes_back_online() {
    let mut reg = registry_with(&["n1"]);
    let _g = ready(&mut reg, "n1", 5);
    let _ = reg.set_provider_online("n1", "gpu", false);
    assert_eq!(reg.set_provider_online("n1", "gpu", true), Ok(true));
    let p = provider(&reg, "n1", "gpu");
    assert_eq!(p.capacity, 2);
    assert!(p.admission_eligible);
}

#[test]
fn stale_lease_release_does_not_touch_new_generation() {
    let mut reg = registry_with(&["n1"]);
    let old_gen = ready(&mut reg, "n1", 5);
    let old = reg
        .admit("n1", "gpu", LeaseKind::LongContext)
        .expect("admit");
    assert_eq!(old.generation(), old_gen);
    let _ = reg.close("n1", old_gen, "reset", 6);
    let _new_gen = ready(&mut reg, "n1", 7);
    let new = reg
        .admit("n1", "gpu", LeaseKind::LongContext)
        .expect("admit");
    let before = snap(&reg);
    assert_eq!(reg.release(old), ReleaseOutcome::Stale);
    assert_eq!(
        snap(&reg),
        before,
        "the new generation's counts are untouched"
    );
    let p = provider(&reg, "n1", "gpu");
    assert_eq!((p.in_flight, p.long_context_in_flight), (1, 1));
    assert_eq!(reg.release(new), ReleaseOutcome::Released);
    let p = provider(&reg, "n1", "gpu");
    assert_eq!((p.in_flight, p.long_context_in_flight), (0, 0));
}

#[test]
fn leaving_ready_releases_all_leases_without_any_event_delivered() {
    let mut reg = registry_with(&["n1"]);
    let g = ready(&mut reg, "n1", 5);
    let _a = reg.admit("n1", "gpu", LeaseKind::Normal).expect("admit");
    let _b = reg.admit("n1", "api", LeaseKind::Normal).expect("admit");
    let _c = reg.admit("n1", "api", LeaseKind::Normal).expect("admit");
    // Nobody polls the events: cleanup does not depend on them.
    assert_eq!(
        reg.close("n1", g, "reset", 6),
        CloseOutcome::Disconnected { released_leases: 3 }
    );
    let _g = ready(&mut reg, "n1", 7);
    for p in node_snap(&reg, "n1").provider_snapshots {
        assert_eq!((p.in_flight, p.long_context_in_flight), (0, 0));
    }
}

#[test]
fn long_context_lease_counts_in_both_pools() {
    let mut reg = registry_with(&["n1"]);
    let _g = ready(&mut reg, "n1", 5);
    let long = reg
        .admit("n1", "gpu", LeaseKind::LongContext)
        .expect("admit");
    let p = provider(&reg, "n1", "gpu");
    assert_eq!((p.in_flight, p.long_context_in_flight), (1, 1));
    assert_eq!(
        reg.admit("n1", "gpu", LeaseKind::LongContext),
        Err(AdmitError::AtLongContextCapacity {
            long_context_capacity: 1
        })
    );
    let normal = reg
        .admit("n1", "gpu", LeaseKind::Normal)
        .expect("room for a normal one");
    let p = provider(&reg, "n1", "gpu");
    assert_eq!((p.in_flight, p.long_context_in_flight), (2, 1));
    assert!(!p.admission_eligible, "no room left");
    assert_eq!(
        reg.admit("n1", "gpu", LeaseKind::Normal),
        Err(AdmitError::AtCapacity { capacity: 2 })
    );
    assert_eq!(reg.release(long), ReleaseOutcome::Released);
    assert_eq!(reg.release(normal), ReleaseOutcome::Released);
    assert!(provider(&reg, "n1", "gpu").admission_eligible);
}

#[test]
fn admission_needs_ready_undrained_online_healthy_and_room() {
    let mut reg = registry_with(&["n1"]);
    assert_eq!(
        reg.admit("nope", "gpu", LeaseKind::Normal),
        Err(AdmitError::UnknownNode)
    );
    assert_eq!(
        reg.admit("n1", "nope", LeaseKind::Normal),
        Err(AdmitError::UnknownProvider)
    );
    assert_eq!(
        reg.admit("n1", "gpu", LeaseKind::Normal),
        Err(AdmitError::NodeNotReady {
            state: NodeState::Configured
        })
    );
    let g = reg.connect("n1", 5).expect("connect");
    assert_eq!(
        reg.admit("n1", "gpu", LeaseKind::Normal),
        Err(AdmitError::NodeNotReady {
            state: NodeState::Pending
        })
    );
    let _ = reg.mark_ready("n1", g, 6);
    let _ = reg.set_provider_healthy("n1", "gpu", false);
    assert_eq!(
        reg.admit("n1", "gpu", LeaseKind::Normal),
        Err(AdmitError::ProviderUnhealthy)
    );
    let _ = reg.set_provider_healthy("n1", "gpu", true);
    let _ = reg.drain("n1");
    assert_eq!(
        reg.admit("n1", "gpu", LeaseKind::Normal),
        Err(AdmitError::NodeDrained)
    );
    let _ = reg.resume("n1");
    let lease = reg.admit("n1", "gpu", LeaseKind::Normal).expect("admit");
    assert_eq!(lease.node_id(), "n1");
    assert_eq!(lease.provider_id(), "gpu");
    assert_eq!(lease.kind(), LeaseKind::Normal);
}

#[test]
fn drained_node_stays_ready_with_degraded_ineligible_providers_until_resumed() {
    let mut reg = registry_with(&["n1"]);
    let _g = ready(&mut reg, "n1", 5);
    assert_eq!(reg.drain("n1"), Ok(true));
    assert_eq!(reg.drain("n1"), Ok(false));
    let n = node_snap(&reg, "n1");
    assert_eq!(n.state, NodeState::Ready as i32);
    assert!(n.connected);
    for p in &n.provider_snapshots {
        assert_eq!(p.status, ProviderStatus::Degraded as i32);
        assert_eq!(p.health, ProviderHealth::Healthy as i32);
        assert!(!p.admission_eligible);
        assert!(p.capacity > 0, "a drained node still reports its capacity");
    }
    assert_eq!(reg.resume("n1"), Ok(true));
    assert!(provider(&reg, "n1", "gpu").admission_eligible);
    assert!(reg.drain("nope").is_err());
}

#[test]
fn unhealthy_provider_is_degraded_and_not_eligible() {
    let mut reg = registry_with(&["n1"]);
    let _g = ready(&mut reg, "n1", 5);
    assert_eq!(reg.set_provider_healthy("n1", "gpu", false), Ok(true));
    assert_eq!(reg.set_provider_healthy("n1", "gpu", false), Ok(false));
    let p = provider(&reg, "n1", "gpu");
    assert_eq!(p.status, ProviderStatus::Degraded as i32);
    assert_eq!(p.health, ProviderHealth::Unhealthy as i32);
    assert!(!p.admission_eligible);
    assert_eq!(p.capacity, 2);
}

#[test]
fn queued_counts_requests_listing_the_provider_as_candidate() {
    let mut reg = registry_with(&["n1", "n2"]);
    let _a = ready(&mut reg, "n1", 5);
    let _b = ready(&mut reg, "n2", 5);
    let t1 = reg
        .enqueue(
            LeaseKind::Normal,
            vec![
                Candidate::new("n1", "gpu"),
                Candidate::new("n2", "gpu"),
                Candidate::new("n1", "gpu"),
            ],
        )
        .expect("enqueue");
    let _t2 = reg
        .enqueue(LeaseKind::LongContext, vec![Candidate::new("n1", "gpu")])
        .expect("enqueue");
    let p = provider(&reg, "n1", "gpu");
    assert_eq!(
        (p.queued, p.long_context_queued),
        (2, 1),
        "repeats count once"
    );
    assert_eq!(provider(&reg, "n2", "gpu").queued, 1);
    assert_eq!(provider(&reg, "n1", "api").queued, 0);
    assert_eq!(reg.dequeue(t1), DequeueOutcome::Dequeued);
    assert_eq!(reg.dequeue(t1), DequeueOutcome::UnknownTicket);
    let p = provider(&reg, "n1", "gpu");
    assert_eq!((p.queued, p.long_context_queued), (1, 1));
    assert_eq!(provider(&reg, "n2", "gpu").queued, 0);
    assert!(reg.enqueue(LeaseKind::Normal, Vec::new()).is_err());
}

#[test]
fn queue_pressure_counts_only_configured_providers() {
    let mut reg = registry_with(&["n1"]);
    let _t = reg
        .enqueue(
            LeaseKind::Normal,
            vec![Candidate::new("n1", "gpu"), Candidate::new("later", "gpu")],
        )
        .expect("enqueue");
    let _ = reg.remove("n1", 5);
    assert_eq!(reg.configure(node("n1"), 6), Ok(ConfigureOutcome::Added));
    assert_eq!(reg.configure(node("later"), 6), Ok(ConfigureOutcome::Added));
    let _a = ready(&mut reg, "n1", 7);
    let _b = ready(&mut reg, "later", 7);
    assert_eq!(
        provider(&reg, "n1", "gpu").queued,
        1,
        "still queued: counts again"
    );
    assert_eq!(provider(&reg, "later", "gpu").queued, 1);
}

#[test]
fn revision_bumps_on_every_change_and_never_on_a_no_op() {
    let mut reg = NodeRegistry::new();
    let r0 = reg.revision();
    let _ = reg.configure(node("n1"), 1);
    let r1 = reg.revision();
    assert!(r1 > r0);
    assert_eq!(
        reg.configure(node("n1"), 2),
        Ok(ConfigureOutcome::Unchanged)
    );
    assert_eq!(reg.revision(), r1);
    assert_eq!(
        reg.configure(node("n1").with_label("tier", "gold"), 3),
        Ok(ConfigureOutcome::Updated)
    );
    let r2 = reg.revision();
    assert!(r2 > r1);
    let g = reg.connect("n1", 4).expect("connect");
    let r3 = reg.revision();
    assert!(r3 > r2);
    let _ = reg.connect("n1", 4);
    let _ = reg.close("n1", Generation::from_raw(77), "", 4);
    let _ = reg.mark_ready("n1", Generation::from_raw(77), 4);
    let _ = reg.set_provider_online("n1", "gpu", true);
    let _ = reg.resume("n1");
    assert_eq!(
        reg.revision(),
        r3,
        "rejected, stale and no-op calls change nothing"
    );
    let _ = reg.mark_ready("n1", g, 5);
    assert!(reg.revision() > r3);
    assert_eq!(snap(&reg).registry_revision, reg.revision());
}

#[test]
fn config_update_emits_node_configured_and_keeps_ownership() {
    let mut reg = registry_with(&["n1"]);
    let g = ready(&mut reg, "n1", 5);
    let lease = reg.admit("n1", "gpu", LeaseKind::Normal).expect("admit");
    drain_events(&mut reg);
    let updated = node("n1").with_revision("sha256:def");
    assert_eq!(reg.configure(updated, 6), Ok(ConfigureOutcome::Updated));
    assert_eq!(
        kinds(&mut reg),
        [("n1".to_owned(), RegistryEventKind::Configured, g.get())]
    );
    let n = node_snap(&reg, "n1");
    assert_eq!(n.state, NodeState::Ready as i32);
    assert_eq!(n.config.expect("config").revision, "sha256:def");
    assert_eq!(provider(&reg, "n1", "gpu").in_flight, 1);
    assert_eq!(reg.release(lease), ReleaseOutcome::Released);
}

#[test]
fn config_update_cannot_drop_a_busy_provider() {
    let mut reg = registry_with(&["n1"]);
    let _g = ready(&mut reg, "n1", 5);
    let _lease = reg.admit("n1", "gpu", LeaseKind::Normal).expect("admit");
    let without_gpu = NodeConfig::new("n1").with_provider(ProviderConfig::new(
        "api",
        ProviderCategory::Api,
        4,
        0,
    ));
    assert!(matches!(
        reg.configure(without_gpu, 6),
        Err(ConfigError::ProviderBusy { ref provider_id, in_flight: 1, .. }) if provider_id == "gpu"
    ));
    let shrunk = NodeConfig::new("n1").with_provider(ProviderConfig::new(
        "gpu",
        ProviderCategory::Cli,
        0,
        0,
    ));
    assert!(matches!(
        reg.configure(shrunk, 6),
        Err(ConfigError::ProviderBusy { .. })
    ));
}

#[test]
fn configuration_is_validated() {
    let mut reg = NodeRegistry::new();
    let bad = |reg: &mut NodeRegistry, c: NodeConfig| reg.configure(c, 1).expect_err("refused");
    assert!(matches!(
        bad(&mut reg, NodeConfig::new("bad id")),
        ConfigError::InvalidNodeId(_)
    ));
    assert!(matches!(
        bad(&mut reg, NodeConfig::new("n").with_label("k", "a=b")),
        ConfigError::InvalidLabel(_)
    ));
    let mut many_labels = NodeConfig::new("n");
    for i in 0..65 {
        many_labels = many_labels.with_label(format!("k{i}"), "v");
    }
    assert!(matches!(
        bad(&mut reg, many_labels),
        ConfigError::TooManyLabels { count: 65, max: 64 }
    ));
    let mut many_providers = NodeConfig::new("n");
    for i in 0..257 {
        many_providers = many_providers.with_provider(ProviderConfig::new(
            format!("p{i}"),
            ProviderCategory::Cli,
            1,
            0,
        ));
    }
    assert!(matches!(
        bad(&mut reg, many_providers),
        ConfigError::TooManyProviders {
            count: 257,
            max: 256
        }
    ));
    let twice = NodeConfig::new("n")
        .with_provider(ProviderConfig::new("p", ProviderCategory::Cli, 1, 0))
        .with_provider(ProviderConfig::new("p", ProviderCategory::Api, 1, 0));
    assert!(matches!(
        bad(&mut reg, twice),
        ConfigError::DuplicateProvider { .. }
    ));
    let long_above =
        NodeConfig::new("n").with_provider(ProviderConfig::new("p", ProviderCategory::Cli, 1, 2));
    assert!(matches!(
        bad(&mut reg, long_above),
        ConfigError::LongContextCapacityAboveCapacity { .. }
    ));
    assert!(matches!(
        bad(&mut reg, NodeConfig::new("n").with_model("")),
        ConfigError::InvalidName { what: "model", .. }
    ));
    assert!(matches!(
        bad(
            &mut reg,
            NodeConfig::new("n").with_provider(ProviderConfig::new(
                "p/q",
                ProviderCategory::Cli,
                1,
                0
            ))
        ),
        ConfigError::InvalidProviderId(_)
    ));
    assert!(reg.is_empty());
    assert_eq!(reg.revision(), 0);
    assert!(reg.poll_event().is_none());
}

#[test]
fn snapshot_filter_reports_asked_nodes_sorted_once_and_skips_unknown_ids() {
    let reg = registry_with(&["b", "a", "c"]);
    let all: Vec<_> = snap(&reg).nodes.into_iter().map(|n| n.node_id).collect();
    assert_eq!(all, ["a", "b", "c"]);
    let some: Vec<_> = reg
        .snapshot(EDGE, 1, &["c", "zzz", "a", "c"], usize::MAX)
        .nodes
        .into_iter()
        .map(|n| n.node_id)
        .collect();
    assert_eq!(some, ["a", "c"]);
    let none = reg.snapshot(EDGE, 1, &["zzz"], usize::MAX);
    assert!(none.nodes.is_empty());
    assert!(!none.truncated);
}

#[test]
fn event_queue_is_bounded_and_counts_drops() {
    let mut reg = NodeRegistry::with_event_capacity(2);
    for id in ["a", "b", "c", "d"] {
        let _ = reg.configure(node(id), 1);
    }
    assert_eq!(reg.pending_events(), 2);
    assert_eq!(reg.take_dropped_events(), 2);
    assert_eq!(reg.take_dropped_events(), 0);
    let first: Vec<_> = drain_events(&mut reg)
        .into_iter()
        .map(|e| e.node_id)
        .collect();
    assert_eq!(first, ["a", "b"], "oldest kept, newest dropped");
    assert_eq!(reg.len(), 4, "dropping events never affects the registry");
}

#[test]
fn accessors_report_the_registry_as_configured() {
    let mut reg = registry_with(&["b", "a"]);
    assert_eq!(reg.len(), 2);
    assert!(reg.contains("a") && !reg.contains("z"));
    assert_eq!(reg.node_ids().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(
        reg.node_state("a"),
        Some((NodeState::Configured, Generation::NONE))
    );
    assert_eq!(reg.node_state("z"), None);
    assert_eq!(reg.is_drained("a"), Some(false));
    let config = reg.node_config("a").expect("configured");
    assert_eq!(config.endpoint.address(), "10.0.0.1:7000");
    let ids: Vec<_> = config
        .providers
        .iter()
        .map(|p| p.provider_id.as_str())
        .collect();
    assert_eq!(ids, ["api", "gpu"]);
    let t = reg
        .enqueue(LeaseKind::Normal, vec![Candidate::new("a", "gpu")])
        .expect("enqueue");
    assert_eq!(reg.queue_len(), 1);
    assert_eq!(reg.dequeue(t), DequeueOutcome::Dequeued);
    assert_eq!(reg.queue_len(), 0);
    let g = ready(&mut reg, "a", 3);
    assert_eq!(reg.node_state("a"), Some((NodeState::Ready, g)));
}
