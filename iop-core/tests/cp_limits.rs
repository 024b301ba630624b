//! PROTOCOL.md §7: outbound cap (slow peers), idle memory.

use iop_core::cp::{CloseReason, CpEvent};
use iop_core::proto::{self, Envelope};
use iop_core::testing::scripted::edges::*;

#[test]
fn a_peer_that_does_not_read_is_dropped_as_slow() {
    let mut c = cfg();
    c.outbound_cap = 256;
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, sid) = t.enrol("edge-1", &[]);
    // 200 heartbeats in one read, and the runtime does not pull in between.
    let mut wire = Vec::new();
    for seq in 1..=200 {
        proto::encode_frame(&heartbeat(seq), u32::MAX, &mut wire).unwrap();
    }
    let before = t.scripted(conn).unwrap().bytes.len();
    t.send_raw(conn, &wire);
    assert!(t.is_closed(conn));
    assert_eq!(
        t.scripted(conn).unwrap().bytes.len(),
        before,
        "nothing more is sent to a slow peer"
    );
    let events = t.take_events();
    assert!(events.contains(&CpEvent::EdgeDisconnected {
        edge_id: "edge-1".into(),
        session_id: sid,
        reason: CloseReason::SlowPeer
    }));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, CpEvent::Closed { .. }))
            .count(),
        1
    );
    assert_eq!(t.cp.stats().slow_peers, 1);
}

#[test]
fn a_status_request_a_slow_peer_cannot_take_is_abandoned_not_an_error() {
    // The peer's slowness is its fault, not the application's: the request is issued
    // (an id the application can wait on), and the session's end abandons it.
    let mut c = cfg();
    c.outbound_cap = 256;
    c.max_inflight_status = 1_000;
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (_, sid) = t.enrol("edge-1", &[]);
    t.take_events();
    // The runtime does not pull: requests pile up in the outbound buffer.
    let ids: Vec<_> = (0..100)
        .map_while(|_| t.cp.request_status(t.now, "edge-1", Vec::new()).ok())
        .collect();
    let last = *ids.last().unwrap();
    assert!(
        ids.len() < 100,
        "the 256-byte buffer filled: {} requests",
        ids.len()
    );
    assert_eq!(
        t.cp.request_status(t.now, "edge-1", Vec::new()),
        Err(iop_core::cp::EdgeAbsent::not_connected("edge-1").into()),
        "the session ended with the request it could not take"
    );
    t.pump();
    let events = t.take_events();
    let abandoned: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            CpEvent::StatusAbandoned { request, .. } => Some(*request),
            _ => None,
        })
        .collect();
    assert_eq!(
        abandoned, ids,
        "every issued request is abandoned, the last included"
    );
    assert_eq!(last.session_id, sid);
    assert!(events.iter().any(|e| matches!(
        e,
        CpEvent::Closed {
            reason: CloseReason::SlowPeer,
            ..
        }
    )));
}

#[test]
fn an_idle_session_keeps_no_large_receive_buffer() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    // A 100 KiB status response arriving in two reads is buffered, then released.
    let req = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    t.pump();
    t.take_frames(conn);
    let ev = big_status_response(req.correlation_id, "edge-1", 100 * 1024);
    let mut wire = Vec::new();
    proto::encode_frame(&ev, u32::MAX, &mut wire).unwrap();
    let (head, tail) = wire.split_at(50 * 1024);
    t.send_raw(conn, head);
    assert!(t.cp.connection_buffers(conn).unwrap().decoder_capacity > 40 * 1024);
    t.send_raw(conn, tail);
    assert!(!t.is_closed(conn));
    let b = t.cp.connection_buffers(conn).unwrap();
    assert_eq!((b.decoder_capacity, b.outbound_queued), (0, 0));
    assert!(
        t.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::StatusReceived { .. }))
    );
}

#[test]
fn frames_and_bytes_are_counted() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    let before = t.cp.stats();
    let env: Envelope = heartbeat(1);
    let mut wire = Vec::new();
    proto::encode_frame(&env, u32::MAX, &mut wire).unwrap();
    t.send_raw(conn, &wire);
    let after = t.cp.stats();
    assert_eq!(after.frames_in - before.frames_in, 1);
    assert_eq!(after.bytes_in - before.bytes_in, wire.len() as u64);
    assert_eq!(after.frames_out - before.frames_out, 1);
    assert!(after.bytes_out > before.bytes_out);
    assert_eq!((after.connections, after.live_sessions), (1, 1));
}

#[test]
fn the_gauges_count_connections_live_sessions_and_known_edges() {
    let mut t = harness();
    let (gone, _) = t.enrol("edge-1", &[]);
    t.enrol("edge-2", &[]);
    let both = t.cp.stats();
    assert_eq!(
        (both.connections, both.live_sessions, both.edges_known),
        (2, 2, 2)
    );
    t.cp.handle_closed(t.now, gone);
    let after = t.cp.stats();
    assert_eq!(
        (after.connections, after.live_sessions, after.edges_known),
        (1, 1, 2),
        "a disconnected Edge keeps its view"
    );
}

#[test]
fn requests_that_do_not_fit_a_frame_are_refused_to_the_caller() {
    // The lowest frame limit a CP may have: its pre-hello one, 256 KiB. Requests
    // within every field cap can still be larger.
    let mut c = cfg();
    c.max_frame_len = c.pre_hello_max_frame_len;
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol("edge-1", &["op"]);
    let ids: Vec<String> = (0..10_000).map(|i| format!("node-{i:030}")).collect();
    assert!(matches!(
        t.cp.request_status(t.now, "edge-1", ids),
        Err(iop_core::cp::StatusError::TooLarge(_))
    ));
    let mut spec = iop_core::cp::CommandSpec::new("op");
    for i in 0..64 {
        spec.metadata.insert(format!("blob-{i}"), "x".repeat(4_096));
    }
    assert!(matches!(
        t.cp.send_command(t.now, "edge-1", spec.with_id("c1")),
        Err(iop_core::cp::CommandError::TooLarge(_))
    ));
    assert!(
        t.cp.command("edge-1", "c1").is_none(),
        "a refused command is not tracked"
    );
    // The session is unharmed and the next correlation id is still fresh.
    t.pump();
    assert!(!t.is_closed(conn));
    let next = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    assert_eq!(next.correlation_id, 3);
}
