//! PROTOCOL.md §5.1, §5.3: which connection owns a node, generations, and what the
//! snapshot shows of each state.

use super::*;

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
