//! PROTOCOL.md §4.2, §5.3: heartbeats, the unreachable verdict, the liveness window.

use std::time::Duration;

use iop_core::cp::{CloseReason, CpEvent, Reachability};
use iop_core::proto::{Body, GoAwayReason, HeartbeatAck};
use iop_core::testing::scripted::edges::*;

const I: Duration = Duration::from_secs(5);

#[test]
fn every_heartbeat_is_acked_with_its_sequence() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    for seq in [1, 2, 7] {
        t.send(conn, heartbeat(seq));
    }
    let acks: Vec<u64> = t
        .take_frames(conn)
        .into_iter()
        .filter_map(|f| match f.body {
            Some(Body::HeartbeatAck(HeartbeatAck { sequence })) => Some(sequence),
            _ => None,
        })
        .collect();
    assert_eq!(acks, vec![1, 2, 7]);
}

#[test]
fn an_edge_that_keeps_talking_stays_connected() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    for seq in 1..=20 {
        t.advance(I);
        t.send(conn, heartbeat(seq));
    }
    assert!(!t.is_closed(conn));
    assert!(t.take_events().is_empty());
}

#[test]
fn silence_makes_the_edge_unreachable_then_any_byte_makes_it_reachable() {
    let mut t = harness();
    let (conn, sid) = t.enrol("edge-1", &[]);
    t.advance(2 * I - Duration::from_millis(1));
    assert_eq!(
        t.cp.edge("edge-1").unwrap().reachability,
        Reachability::Connected
    );
    t.advance(Duration::from_millis(1));
    assert_eq!(
        t.take_events(),
        vec![CpEvent::EdgeUnreachable {
            edge_id: "edge-1".into(),
            session_id: sid,
            silent_for: 2 * I
        }]
    );
    assert_eq!(
        t.cp.edge("edge-1").unwrap().reachability,
        Reachability::Unreachable
    );
    // Unreachable is the CP's verdict: the last status (the Edge's word) is untouched.
    assert!(t.cp.edge("edge-1").unwrap().last_status.is_some());
    t.send(conn, heartbeat(1));
    assert_eq!(
        t.take_events(),
        vec![CpEvent::EdgeReachable {
            edge_id: "edge-1".into(),
            session_id: sid
        }]
    );
    assert_eq!(
        t.cp.edge("edge-1").unwrap().reachability,
        Reachability::Connected
    );
}

#[test]
fn three_silent_intervals_end_the_session() {
    let mut t = harness();
    let (conn, sid) = t.enrol("edge-1", &[]);
    t.advance(3 * I - Duration::from_millis(1));
    assert!(!t.is_closed(conn));
    t.advance(Duration::from_millis(1));
    assert_eq!(
        go_away(&t.take_frames(conn)),
        Some((GoAwayReason::HeartbeatTimeout as i32, 0))
    );
    assert!(t.is_closed(conn));
    let events = t.take_events();
    assert!(events.contains(&CpEvent::EdgeDisconnected {
        edge_id: "edge-1".into(),
        session_id: sid,
        reason: CloseReason::HeartbeatTimeout
    }));
    assert_eq!(
        t.cp.edge("edge-1").unwrap().reachability,
        Reachability::Disconnected
    );
    assert_eq!(t.cp.stats().heartbeat_timeouts, 1);
}

#[test]
fn the_offered_interval_is_clamped() {
    let mut c = cfg();
    c.heartbeat_interval = Duration::from_millis(10);
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (_, resp) = t.hello_with(hello("edge-1", &[]));
    assert_eq!(resp.heartbeat_interval_ms, 1_000);
}

#[test]
fn poll_timeout_tracks_the_earliest_deadline() {
    // The connections' deadlines alone: no periodic refresh of the Edges' load.
    let mut c = cfg();
    c.status_refresh = None;
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    let start = t.now;
    let _c = t.connect();
    assert_eq!(t.cp.poll_timeout(), Some(start + Duration::from_secs(10)));
    t.enrol("edge-1", &[]);
    // The pre-hello connection still has the earliest deadline.
    assert_eq!(t.cp.poll_timeout(), Some(start + Duration::from_secs(10)));
    // Extra timeout calls are harmless.
    t.cp.handle_timeout(t.now);
    t.cp.handle_timeout(t.now);
    t.pump();
    assert!(t.take_events().is_empty());
}
