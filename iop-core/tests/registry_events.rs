//! Lifecycle events on the wire: per-session numbering, EDGE_READY first, drops as gaps.

use iop_core::proto::{EdgeNodeEvent, NodeEventKind};
use iop_core::registry::{
    EdgeEventKind, EventSequencer, MAX_REASON_LEN, NodeConfig, NodeRegistry, ReadyOutcome,
};

fn kind(e: &EdgeNodeEvent) -> NodeEventKind {
    NodeEventKind::try_from(e.kind).expect("known kind")
}

#[test]
fn each_session_numbers_events_from_one_starting_with_edge_ready() {
    let mut reg = NodeRegistry::new();
    let _ = reg.configure(NodeConfig::new("n1"), 10);
    let g = reg.connect("n1", 11).expect("connect");
    assert_eq!(reg.mark_ready("n1", g, 12), ReadyOutcome::Ready);

    let mut seq = EventSequencer::new();
    assert_eq!(seq.peek(), 1);
    let mut sent = vec![seq.edge_event("edge-a", EdgeEventKind::Ready, 13, "session up")];
    while let Some(e) = reg.poll_event() {
        sent.push(seq.next("edge-a", &e));
    }
    let summary: Vec<_> = sent
        .iter()
        .map(|e| (e.sequence, kind(e), e.node_id.as_str(), e.generation))
        .collect();
    assert_eq!(
        summary,
        [
            (1, NodeEventKind::EdgeReady, "", 0),
            (2, NodeEventKind::NodeConfigured, "n1", 0),
            (3, NodeEventKind::NodeReady, "n1", g.get()),
        ]
    );
    assert!(sent.iter().all(|e| e.edge_id == "edge-a"));
    assert_eq!(sent[2].occurred_at_unix_ms, 12);

    // A new session starts again at 1.
    seq.restart();
    let first = seq.edge_event("edge-a", EdgeEventKind::Ready, 20, "");
    assert_eq!(
        (first.sequence, kind(&first)),
        (1, NodeEventKind::EdgeReady)
    );
    let draining = seq.edge_event("edge-a", EdgeEventKind::Draining, 21, "shutdown");
    assert_eq!(
        (
            draining.sequence,
            kind(&draining),
            draining.node_id.as_str()
        ),
        (2, NodeEventKind::EdgeDraining, "")
    );
}

#[test]
fn a_dropped_event_still_consumes_its_sequence_number() {
    let mut seq = EventSequencer::default();
    let _ = seq.edge_event("e", EdgeEventKind::Ready, 1, "");
    assert_eq!(seq.skip(), 2, "the dropped event's number");
    let next = seq.edge_event("e", EdgeEventKind::Draining, 2, "");
    assert_eq!(next.sequence, 3, "the CP sees a gap");
}

#[test]
fn long_reasons_are_cut_at_a_character_boundary() {
    let mut seq = EventSequencer::new();
    let reason = "é".repeat(MAX_REASON_LEN);
    let e = seq.edge_event("e", EdgeEventKind::Draining, 1, &reason);
    assert!(e.reason.len() <= MAX_REASON_LEN);
    assert!(e.reason.chars().all(|c| c == 'é'));

    let mut reg = NodeRegistry::new();
    let _ = reg.configure(NodeConfig::new("n1"), 1);
    let g = reg.connect("n1", 2).expect("connect");
    let _ = reg.mark_ready("n1", g, 3);
    let _ = reg.close("n1", g, &reason, 4);
    let last = std::iter::from_fn(|| reg.poll_event())
        .last()
        .expect("event");
    assert!(last.reason.len() <= MAX_REASON_LEN);
}
