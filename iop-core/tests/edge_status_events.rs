//! Status answers, lifecycle events, per-session sequences, drain.

use iop_core::edge::EdgeEvent;
use iop_core::proto::{
    Body, CommandRejectReason, EdgeHelloResponse, EdgeStatusRequest, EdgeStatusResponse, Envelope,
    Message, NodeEventKind,
};
use iop_core::testing::scripted::control_plane::*;

fn status(frames: &[Envelope]) -> (u64, &EdgeStatusResponse) {
    let f = frames
        .iter()
        .find(|f| matches!(f.body, Some(Body::StatusResponse(_))))
        .expect("a status response");
    match &f.body {
        Some(Body::StatusResponse(s)) => (f.correlation_id, s),
        _ => unreachable!(),
    }
}

#[test]
fn status_is_answered_with_the_same_correlation_id() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.registry_transition("n1", NodeEventKind::NodeReady);
    h.at(1_234);
    h.deliver(Envelope::correlated(77, EdgeStatusRequest::default()));
    let frames = h.flush();
    let (cid, s) = status(&frames);
    assert_eq!(cid, 77);
    assert_eq!(s.edge_id, "edge-1");
    assert_eq!(s.observed_at_unix_ms, ORIGIN_UNIX_MS + 1_234);
    assert_eq!(s.registry_revision, 1);
    assert!(!s.truncated);
    let ids: Vec<_> = s.nodes.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(ids, ["n1", "n2"]);

    // node_ids filter.
    h.deliver(Envelope::correlated(
        78,
        EdgeStatusRequest {
            node_ids: vec!["n2".into()],
            ..Default::default()
        },
    ));
    let frames = h.flush();
    let (cid, s) = status(&frames);
    assert_eq!(cid, 78);
    assert_eq!(s.nodes.len(), 1);
    assert_eq!(s.nodes[0].node_id, "n2");
}

#[test]
fn status_is_truncated_rather_than_over_the_cps_max_frame_len() {
    // The smallest limit a CP may announce is 64 KiB.
    let names: Vec<String> = (0..8_000).map(|i| format!("node-{i:04}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut h = Harness::new(config(), FakeRegistry::with_nodes(&refs));
    h.connect();
    h.accept_with(EdgeHelloResponse {
        max_frame_len: 65_536,
        ..accepted(1, 1_000)
    });
    h.deliver(Envelope::correlated(5, EdgeStatusRequest::default()));
    let frames = h.flush();
    let (cid, s) = status(&frames);
    assert_eq!(cid, 5);
    assert!(s.truncated);
    assert!(!s.nodes.is_empty() && s.nodes.len() < 8_000);
    let frame = frames
        .iter()
        .find(|f| matches!(f.body, Some(Body::StatusResponse(_))))
        .unwrap();
    assert!(frame.encoded_len() <= 65_536);
}

#[test]
fn a_status_response_reflects_every_event_sent_before_it() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    // The registry changes and a status request arrives before anything was flushed.
    h.registry_transition("n1", NodeEventKind::NodeReady);
    h.deliver(Envelope::correlated(1, EdgeStatusRequest::default()));
    let frames = h.flush();
    assert_eq!(frames.len(), 2);
    assert_eq!(
        as_node_event(&frames[0]).kind,
        NodeEventKind::NodeReady as i32
    );
    assert_eq!(status(&frames).1.registry_revision, 1);
}

#[test]
fn events_start_with_edge_ready_and_sequences_restart_per_session() {
    let mut h = Harness::default_edge();
    let frames = h.connect_and_accept(1);
    assert_eq!(
        as_node_event(&frames[0]).kind,
        NodeEventKind::EdgeReady as i32
    );
    h.registry_transition("n1", NodeEventKind::NodeReady);
    h.registry_transition("n2", NodeEventKind::NodeReady);
    let frames = h.flush();
    let seqs: Vec<_> = frames.iter().map(|f| as_node_event(f).sequence).collect();
    assert_eq!(seqs, [2, 3]);
    assert_eq!(as_node_event(&frames[1]).node_id, "n2");

    // Disconnected: transitions are dropped, not replayed.
    h.transport_closed();
    h.registry_transition("n1", NodeEventKind::NodeDisconnected);
    assert!(h.flush().is_empty());
    h.now = h.edge.poll_connect_at().unwrap();
    let frames = h.connect_and_accept(2);
    assert_eq!(frames.len(), 1, "{frames:?}");
    let ready = as_node_event(&frames[0]);
    assert_eq!(
        (ready.kind, ready.sequence),
        (NodeEventKind::EdgeReady as i32, 1)
    );
    h.registry_transition("n1", NodeEventKind::NodeReady);
    assert_eq!(as_node_event(&h.flush()[0]).sequence, 2);
    assert!(h.edge.stats().dropped_node_events >= 1);
}

#[test]
fn a_full_queue_drops_events_but_consumes_their_sequence() {
    let mut c = config();
    c.outbound_cap = 300;
    let mut h = Harness::new(c, FakeRegistry::with_nodes(&["n1"]));
    h.connect_and_accept(1);
    for _ in 0..30 {
        h.edge
            .registry_mut()
            .transition("n1", NodeEventKind::NodeConfigured);
    }
    // Pumped into the queue by an input, before the driver writes anything.
    h.edge.handle_timeout(h.now);
    let frames = h.flush();
    let seqs: Vec<_> = frames.iter().map(|f| as_node_event(f).sequence).collect();
    assert!(seqs.len() < 30, "{seqs:?}");
    assert_eq!(seqs, (2..2 + seqs.len() as u64).collect::<Vec<_>>());
    assert!(
        h.edge.is_connected(),
        "dropping events does not end the session"
    );
    h.registry_transition("n1", NodeEventKind::NodeReady);
    assert_eq!(
        as_node_event(&h.flush()[0]).sequence,
        32,
        "a gap of the dropped ones"
    );
}

#[test]
fn events_lost_by_the_registry_leave_a_gap() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    {
        // One change: an event queued, then 3 lost after it.
        let mut registry = h.edge.registry_mut();
        registry.transition("n1", NodeEventKind::NodeReady);
        registry.dropped = 3;
    }
    let frames = h.flush();
    // The queued one goes out first (2); the 3 lost after it take 3, 4, 5.
    assert_eq!(as_node_event(&frames[0]).sequence, 2);
    h.registry_transition("n2", NodeEventKind::NodeReady);
    assert_eq!(as_node_event(&h.flush()[0]).sequence, 6);
    assert_eq!(h.edge.stats().dropped_node_events, 3);
}

#[test]
fn drain_rejects_new_commands_and_says_edge_draining_every_session() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.edge.drain(h.now);
    h.edge.drain(h.now);
    let frames = h.flush();
    assert_eq!(frames.len(), 1);
    let e = as_node_event(&frames[0]);
    assert_eq!(
        (e.kind, e.sequence),
        (NodeEventKind::EdgeDraining as i32, 2)
    );
    let frames = h.command(cmd("c1", "edge.ping", ""));
    let r = as_command_response(&frames[0]);
    assert!(!r.accepted);
    assert_eq!(r.reject_reason, CommandRejectReason::Draining as i32);
    assert!(h.edge.is_draining());
    assert!(
        !h.events()
            .iter()
            .any(|e| matches!(e, EdgeEvent::CommandReceived { .. }))
    );

    h.transport_closed();
    h.now = h.edge.poll_connect_at().unwrap();
    let frames = h.connect_and_accept(2);
    let kinds: Vec<_> = frames.iter().map(|f| as_node_event(f).kind).collect();
    assert_eq!(
        kinds,
        [
            NodeEventKind::EdgeReady as i32,
            NodeEventKind::EdgeDraining as i32
        ]
    );
}

trait Transition {
    fn registry_transition(&mut self, node: &str, kind: NodeEventKind);
}

impl Transition for Harness {
    fn registry_transition(&mut self, node: &str, kind: NodeEventKind) {
        self.edge.registry_mut().transition(node, kind);
    }
}
