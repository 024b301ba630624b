//! PROTOCOL.md §5.2: providers offline and online, leases, admission, queue
//! pressure.

use super::*;

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
