//! Session rules that are not one flow: the view, the peer's GoAway, frames only the
//! CP sends, the runtime's own mistakes.

use std::time::Duration;

use iop_core::cp::{
    CloseReason, ConnectionId, ConnectionIdInUse, CpEvent, ProtocolViolation, Reachability,
    RequestId, Transmit,
};
use iop_core::proto::{
    BodyKind, EdgeCommandRequest, EdgeHelloResponse, EdgeStatusRequest, Envelope, GoAway,
    GoAwayReason,
};
use iop_core::testing::scripted::edges::*;

#[test]
fn the_view_reflects_the_latest_hello() {
    let mut c = cfg();
    c.wall_clock = iop_core::WallClock::new(1_700_000_000_000);
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    let mut h = hello("edge-1", &["edge.ping", "node.drain"]);
    h.metadata.insert("iop.instance_id".into(), "p1".into());
    let (_, resp) = t.hello_with(h);
    let view = t.cp.edge("edge-1").unwrap().clone();
    let conn = t.cp.live_conn("edge-1").unwrap();
    assert_eq!(t.cp.session_of(conn), Some(("edge-1", resp.session_id)));
    assert_eq!(view.reachability, Reachability::Connected);
    assert_eq!(view.session_id, resp.session_id);
    assert_eq!(view.software_version, "test/1");
    assert_eq!(view.operations, vec!["edge.ping", "node.drain"]);
    assert_eq!(view.metadata("iop.instance_id"), Some("p1"));
    assert_eq!(view.metadata("other"), None);
    assert_eq!(view.connected_since_unix_ms, 1_700_000_000_000 + 1_000);
    assert!(!view.fresh, "unknown until a fresh status");
    assert_eq!(t.cp.edges().count(), 1);
}

#[test]
fn a_go_away_from_the_edge_ends_its_session() {
    let mut t = harness();
    let (conn, sid) = t.enrol("edge-1", &[]);
    t.send(
        conn,
        Envelope::new(GoAway {
            reason: GoAwayReason::Shutdown.into(),
            message: "bye".into(),
            retry_after_ms: 0,
        }),
    );
    assert!(t.is_closed(conn));
    assert!(t.take_frames(conn).is_empty(), "nothing is sent back");
    assert!(t.cp_events.contains(&CpEvent::EdgeDisconnected {
        edge_id: "edge-1".into(),
        session_id: sid,
        reason: CloseReason::PeerGoAway {
            reason: GoAwayReason::Shutdown.into(),
            message: "bye".into()
        }
    }));
}

#[test]
fn frames_only_the_cp_sends_are_protocol_errors() {
    let frames = [
        Envelope::new(EdgeHelloResponse::default()),
        Envelope::new(EdgeStatusRequest::default()),
        Envelope::new(EdgeCommandRequest::default()),
    ];
    for f in frames {
        let mut t = harness();
        let (conn, _) = t.enrol("edge-1", &[]);
        let kind = f.kind();
        assert_ne!(kind, BodyKind::Empty);
        t.send(conn, f);
        assert!(t.is_closed(conn));
        assert!(t.cp_events.iter().any(|e| matches!(e,
            CpEvent::Closed { reason: CloseReason::ProtocolError(ProtocolViolation::WrongDirection(k)), .. } if *k == kind)));
    }
}

#[test]
fn heartbeat_acks_from_the_edge_are_harmless() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    t.send(
        conn,
        Envelope::new(iop_core::proto::HeartbeatAck { sequence: 3 }),
    );
    assert!(!t.is_closed(conn));
    assert!(t.take_events().is_empty());
}

#[test]
fn runtime_mistakes_are_errors_or_harmless() {
    let mut t = harness();
    let conn = t.connect();
    assert_eq!(
        t.cp.handle_connect(t.now, conn),
        Err(ConnectionIdInUse(conn))
    );
    // Input for connections the CP does not hold is dropped.
    let ghost = ConnectionId(999);
    t.cp.handle_bytes(t.now, ghost, &[0, 0, 0, 1, 0]);
    t.cp.handle_closed(t.now, ghost);
    let mut buf = Vec::new();
    assert_eq!(t.cp.poll_transmit(ghost, &mut buf), Transmit::Close);
    // Empty reads are not proof of life.
    let (c2, _) = t.enrol("edge-1", &[]);
    t.advance(Duration::from_secs(14));
    t.cp.handle_bytes(t.now, c2, &[]);
    t.advance(Duration::from_secs(1));
    assert!(t.is_closed(c2));
}

#[test]
fn a_superseded_session_abandons_its_pending_status_requests() {
    let mut t = harness();
    let (old, sid) = t.enrol("edge-1", &[]);
    let req = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    assert_eq!(
        req,
        RequestId {
            session_id: sid,
            correlation_id: 2
        }
    );
    t.hello_with(hello("edge-1", &[]));
    assert!(t.is_closed(old));
    assert!(t.cp_events.contains(&CpEvent::StatusAbandoned {
        edge_id: "edge-1".into(),
        request: req
    }));
}

#[test]
fn forgetting_an_edge_needs_it_disconnected() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    assert!(!t.cp.forget_edge("edge-1"));
    t.drop_transport(conn);
    assert!(t.cp.forget_edge("edge-1"));
    assert!(t.cp.edge("edge-1").is_none());
}

#[test]
fn a_forgotten_edges_place_goes_to_another_edge_without_mixing_their_views() {
    // Sessions reach their Edge's view by a slot the Control Plane reuses once an
    // Edge is forgotten: the new Edge's statuses, unreachability and disconnection
    // must land on its own view, never on a neighbour's or a forgotten one's.
    let mut t = harness();
    let (a, _) = t.enrol("edge-a", &[]);
    let (b, _) = t.enrol("edge-b", &[]);
    t.drop_transport(a);
    assert!(t.cp.forget_edge("edge-a"));
    let (c, sid_c) = t.enrol("edge-c", &[]);

    let req = t.cp.request_status(t.now, "edge-c", vec![]).unwrap();
    t.pump();
    t.send(c, status_response(req.correlation_id, "edge-c", 77));
    let view_c = t.cp.edge("edge-c").expect("edge-c is known");
    assert_eq!(
        view_c.last_status.as_ref().map(|s| s.registry_revision),
        Some(77)
    );
    assert_eq!(view_c.session_id, sid_c);
    let view_b = t.cp.edge("edge-b").expect("edge-b is known");
    assert_eq!(
        view_b.last_status.as_ref().map(|s| s.registry_revision),
        Some(1)
    );
    assert!(t.cp.edge("edge-a").is_none());

    t.drop_transport(c);
    assert_eq!(
        t.cp.edge("edge-c").map(|v| v.reachability),
        Some(Reachability::Disconnected)
    );
    assert_eq!(
        t.cp.edge("edge-b").map(|v| v.reachability),
        Some(Reachability::Connected)
    );
    assert_eq!(t.cp.live_conn("edge-b"), Some(b));
    let ids: Vec<&str> = t.cp.edges().map(|v| v.edge_id.as_str()).collect();
    assert_eq!(ids, ["edge-b", "edge-c"], "views in id order");
}

#[test]
fn the_endpoint_can_live_behind_a_mutex_shared_by_tasks() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<iop_core::cp::ControlPlane>();
    send_sync::<CpEvent>();
}
