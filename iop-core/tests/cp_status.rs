//! PROTOCOL.md §4.3: status requests, correlation, timeouts, late and never-issued responses.

use std::time::Duration;

use iop_core::cp::{
    Absence, CloseReason, CpConfig, CpEvent, EdgeAbsent, Fault, ProtocolViolation, RequestId,
    ResyncCause, StatusError,
};
use iop_core::proto::{Body, EdgeNodeSnapshot, EdgeStatusResponse, Envelope, GoAwayReason};
use iop_core::testing::scripted::edges::*;

fn no_auto() -> CpConfig {
    let mut c = cfg();
    c.auto_status_on_resync = false;
    c
}

#[test]
fn every_accepted_session_is_a_resync_point_with_an_automatic_status_request() {
    let mut t = harness();
    let (conn, resp) = t.hello_with(hello("edge-1", &[]));
    let events = t.take_events();
    let request = RequestId {
        session_id: resp.session_id,
        correlation_id: 1,
    };
    assert!(events.contains(&CpEvent::ResyncNeeded {
        edge_id: "edge-1".into(),
        session_id: resp.session_id,
        cause: ResyncCause::NewSession,
        request: Some(request)
    }));
    assert_eq!(status_requests(&t.take_frames(conn)), vec![1]);
    assert!(!t.cp.edge("edge-1").unwrap().fresh);
    t.send(conn, status_response(1, "edge-1", 9));
    let view = t.cp.edge("edge-1").unwrap();
    assert!(view.fresh);
    assert_eq!(view.last_status.as_ref().unwrap().registry_revision, 9);
}

#[test]
fn auto_status_can_be_turned_off() {
    let mut t = harness_with(no_auto(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.hello_with(hello("edge-1", &[]));
    assert!(status_requests(&t.take_frames(conn)).is_empty());
    assert_eq!(request_of(&t.take_events()), None);
}

#[test]
fn happy_path_ids_strictly_increase_and_responses_surface() {
    let mut t = harness_with(no_auto(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, sid) = t.enrol("edge-1", &[]);
    let a = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    let b =
        t.cp.request_status(t.now, "edge-1", vec!["node-1".into()])
            .unwrap();
    t.pump();
    assert_eq!((a.session_id, a.correlation_id), (sid, 1));
    assert_eq!(b.correlation_id, 2);
    let frames = t.take_frames(conn);
    assert_eq!(status_requests(&frames), vec![1, 2]);
    assert!(matches!(&frames[1].body, Some(Body::StatusRequest(r)) if r.node_ids == ["node-1"]));
    let resp = EdgeStatusResponse {
        edge_id: "edge-1".into(),
        nodes: vec![
            EdgeNodeSnapshot {
                node_id: "node-1".into(),
                connected: true,
                ..Default::default()
            },
            EdgeNodeSnapshot {
                node_id: "node-2".into(),
                connected: false,
                ..Default::default()
            },
        ],
        observed_at_unix_ms: 10,
        registry_revision: 3,
        truncated: true,
    };
    t.send(conn, Envelope::correlated(2, resp.clone()));
    let events = t.take_events();
    assert_eq!(
        events,
        vec![CpEvent::StatusReceived {
            request: b,
            response: resp
        }]
    );
    // Its Edge is the response's, read like any event's.
    assert_eq!(events[0].edge_id(), Some("edge-1"));
    let s = t.cp.edge("edge-1").unwrap().last_status.clone().unwrap();
    assert_eq!(
        (
            s.registry_revision,
            s.node_count,
            s.connected_nodes,
            s.truncated
        ),
        (3, 2, 1, true)
    );
}

#[test]
fn unanswered_requests_time_out_and_late_answers_are_dropped() {
    let mut t = harness_with(no_auto(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol("edge-1", &[]);
    let a = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    t.pump();
    t.advance(Duration::from_millis(4_000));
    t.send(conn, heartbeat(1));
    t.advance(Duration::from_millis(4_000));
    t.send(conn, heartbeat(2));
    t.take_events();
    t.advance(Duration::from_millis(2_000));
    assert_eq!(
        t.take_events(),
        vec![CpEvent::StatusTimedOut {
            edge_id: "edge-1".into(),
            request: a
        }]
    );
    t.send(conn, status_response(a.correlation_id, "edge-1", 1));
    assert!(!t.is_closed(conn), "late is not an error");
    assert!(t.take_events().is_empty());
    let stats = t.cp.stats();
    assert_eq!((stats.late_status_responses, stats.status_timeouts), (1, 1));
}

fn closes_with(resp: Envelope, expected: ProtocolViolation) {
    let mut t = harness_with(no_auto(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol("edge-1", &[]);
    t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    t.pump();
    t.take_frames(conn);
    t.send(conn, resp);
    assert_eq!(
        go_away(&t.take_frames(conn)),
        Some((GoAwayReason::ProtocolError as i32, 0))
    );
    assert!(t.is_closed(conn));
    assert!(t.cp_events.iter().any(|e| matches!(e,
        CpEvent::Closed { reason: CloseReason::ProtocolError(v), .. } if *v == expected)));
}

#[test]
fn a_never_issued_correlation_id_is_a_protocol_error() {
    closes_with(
        status_response(0, "edge-1", 1),
        ProtocolViolation::NeverIssuedCorrelationId(0),
    );
    closes_with(
        status_response(2, "edge-1", 1),
        ProtocolViolation::NeverIssuedCorrelationId(2),
    );
}

#[test]
fn a_response_for_another_edge_is_a_protocol_error() {
    closes_with(
        status_response(1, "edge-2", 1),
        ProtocolViolation::StatusEdgeIdMismatch,
    );
}

#[test]
fn in_flight_requests_are_limited_per_session() {
    let mut t = harness_with(no_auto(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol("edge-1", &[]);
    for _ in 0..64 {
        t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    }
    let busy = t.cp.request_status(t.now, "edge-1", vec![]);
    assert_eq!(busy, Err(StatusError::TooManyInFlight { limit: 64 }));
    assert_eq!(busy.unwrap_err().fault(), Fault::Busy);
    t.pump();
    t.send(conn, status_response(5, "edge-1", 1));
    assert!(t.cp.request_status(t.now, "edge-1", vec![]).is_ok());
}

#[test]
fn a_refused_request_is_an_error_not_a_frame_and_says_who_it_is_down_to() {
    let mut t = harness_with(no_auto(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let unknown = t.cp.request_status(t.now, "edge-1", vec![]).unwrap_err();
    assert_eq!(unknown, StatusError::Absent(EdgeAbsent::unknown("edge-1")));
    assert_eq!(unknown.fault(), Fault::Absent);
    assert_eq!(unknown.absent().map(|a| a.absence), Some(Absence::Unknown));
    let (conn, _) = t.enrol("edge-1", &[]);
    let bad = t.cp.request_status(t.now, "edge-1", vec!["bad id".into()]);
    assert!(matches!(bad, Err(StatusError::InvalidNodeId(_))));
    assert_eq!(bad.unwrap_err().fault(), Fault::Caller);
    t.pump();
    assert!(t.take_frames(conn).is_empty(), "nothing was sent");
    // Known but gone: told apart from never seen, and the message says so.
    t.drop_transport(conn);
    let refused = t.cp.request_status(t.now, "edge-1", vec![]).unwrap_err();
    assert_eq!(
        refused,
        StatusError::Absent(EdgeAbsent::not_connected("edge-1"))
    );
    assert_eq!(refused.fault(), Fault::Absent);
    assert_eq!(
        refused.to_string(),
        "edge edge-1 is known but not connected now (it redials on its own; wait for its session)"
    );
    assert_eq!(
        EdgeAbsent::unknown("edge-9").to_string(),
        "edge edge-9 is unknown: it has never connected to this control plane (or was forgotten)"
    );
}

#[test]
fn pending_requests_are_abandoned_when_the_session_ends() {
    let mut t = harness_with(no_auto(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol("edge-1", &[]);
    let a = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    t.drop_transport(conn);
    assert!(t.take_events().contains(&CpEvent::StatusAbandoned {
        edge_id: "edge-1".into(),
        request: a
    }));
    // Its timer is gone with it: what is left is the disconnected view's expiry.
    let ttl = t.cp.config().disconnected_view_ttl;
    assert_eq!(t.cp.poll_timeout(), Some(t.now + ttl));
}

#[test]
fn correlation_ids_restart_per_session() {
    let mut t = harness();
    let (c1, _) = t.hello_with(hello("edge-1", &[]));
    assert_eq!(status_requests(&t.take_frames(c1)), vec![1]);
    let (c2, _) = t.hello_with(hello("edge-1", &[]));
    assert_eq!(status_requests(&t.take_frames(c2)), vec![1]);
}
