//! PROTOCOL.md §4.5: node events, per-session sequence, gaps as resync points.

use iop_core::cp::{CloseReason, CpEvent, ProtocolViolation, ResyncCause};
use iop_core::proto::NodeEventKind::*;
use iop_core::testing::scripted::edges::*;

fn sequences(t: &Pair) -> Vec<u64> {
    t.cp_events
        .iter()
        .filter_map(|e| match e {
            CpEvent::NodeEvent { event, .. } => Some(event.sequence),
            _ => None,
        })
        .collect()
}

fn resyncs(t: &Pair) -> Vec<ResyncCause> {
    t.cp_events
        .iter()
        .filter_map(|e| match e {
            CpEvent::ResyncNeeded { cause, .. } => Some(*cause),
            _ => None,
        })
        .collect()
}

#[test]
fn events_in_sequence_surface_without_resync() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    t.send(conn, node_event("edge-1", NodeReady, 2));
    t.send(conn, node_event("edge-1", NodeDisconnected, 3));
    assert_eq!(sequences(&t), vec![2, 3]);
    assert!(resyncs(&t).is_empty());
}

#[test]
fn a_gap_is_a_resync_point_with_a_status_request() {
    let mut t = harness();
    let (conn, sid) = t.enrol("edge-1", &[]);
    assert!(t.cp.edge("edge-1").unwrap().fresh);
    t.send(conn, node_event("edge-1", NodeReady, 5));
    assert!(!t.is_closed(conn));
    assert_eq!(
        resyncs(&t),
        vec![ResyncCause::EventGap {
            expected: 2,
            got: 5
        }]
    );
    assert_eq!(sequences(&t), vec![5]);
    assert!(!t.cp.edge("edge-1").unwrap().fresh);
    let req = request_of(&t.cp_events).unwrap();
    assert_eq!(req.session_id, sid);
    assert_eq!(
        status_requests(&t.take_frames(conn)),
        vec![req.correlation_id]
    );
    t.send(conn, status_response(req.correlation_id, "edge-1", 2));
    assert!(t.cp.edge("edge-1").unwrap().fresh);
    assert_eq!(t.cp.stats().event_gaps, 1);
}

#[test]
fn a_first_event_other_than_edge_ready_is_a_resync_not_an_error() {
    let mut t = harness();
    let (conn, _) = t.hello_with(hello("edge-1", &[]));
    t.take_events();
    t.send(conn, node_event("edge-1", NodeReady, 1));
    assert!(!t.is_closed(conn));
    assert_eq!(resyncs(&t), vec![ResyncCause::MissingEdgeReady]);
}

#[test]
fn sequence_restarts_at_one_each_session() {
    let mut t = harness();
    let (c1, _) = t.enrol("edge-1", &[]);
    t.send(c1, node_event("edge-1", NodeReady, 2));
    let (c2, _) = t.hello_with(hello("edge-1", &[]));
    t.take_events();
    t.send(c2, node_event("edge-1", EdgeReady, 1));
    assert!(!t.is_closed(c2));
    assert!(resyncs(&t).is_empty());
}

#[test]
fn a_sequence_going_backwards_is_a_protocol_error() {
    for bad in [0, 1] {
        let mut t = harness();
        let (conn, _) = t.enrol("edge-1", &[]);
        t.send(conn, node_event("edge-1", NodeReady, bad));
        assert!(t.is_closed(conn));
        assert!(t.cp_events.iter().any(|e| matches!(e,
            CpEvent::Closed { reason: CloseReason::ProtocolError(ProtocolViolation::NodeEventSequence { last: 1, got }), .. } if *got == bad)));
    }
}

#[test]
fn an_event_for_another_edge_is_a_protocol_error() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    t.send(conn, node_event("edge-2", NodeReady, 2));
    assert!(t.is_closed(conn));
}

#[test]
fn a_status_requested_before_the_gap_does_not_make_the_view_fresh() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    let before = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    t.pump();
    t.send(conn, node_event("edge-1", NodeReady, 4));
    let after = request_of(&t.cp_events).unwrap();
    t.send(conn, status_response(before.correlation_id, "edge-1", 3));
    assert!(!t.cp.edge("edge-1").unwrap().fresh);
    t.send(conn, status_response(after.correlation_id, "edge-1", 4));
    assert!(t.cp.edge("edge-1").unwrap().fresh);
}
