//! Properties: any read split gives the same outputs; same inputs twice give the same
//! outputs; arbitrary bytes or envelopes never panic and end a connection at most once.

use std::time::Duration;

use iop_core::Instant;
use iop_core::cp::{CommandSpec, ConnectionId, ControlPlane, CpEvent, EnrolmentPolicy, Transmit};
use iop_core::proto::{
    self, Body, CommandPhase, EdgeCommandRequest, EdgeHelloResponse, EdgeStatusRequest, Envelope,
    GoAway, HeartbeatAck, NodeEventKind,
};
use iop_core::testing::scripted::edges::*;
use proptest::prelude::*;

/// A whole Edge session as one byte stream.
fn script() -> Vec<u8> {
    let mut h = hello("edge-1", &["op"]);
    h.metadata.insert("iop.instance_id".into(), "p1".into());
    let frames = vec![
        Envelope::new(h),
        heartbeat(1),
        node_event("edge-1", NodeEventKind::EdgeReady, 1),
        status_response(1, "edge-1", 4),
        node_event("edge-1", NodeEventKind::NodeReady, 3),
        Envelope {
            correlation_id: 3,
            body: None,
        },
        cmd_response("ghost", true),
        heartbeat(2),
        status_response(2, "edge-1", 5),
        heartbeat(3),
    ];
    let mut wire = Vec::new();
    for f in &frames {
        proto::encode_frame(f, u32::MAX, &mut wire).unwrap();
    }
    wire
}

/// Feeds `wire` cut at `cuts`, draining after every read; returns events and bytes out.
fn run_split(wire: &[u8], cuts: &[usize]) -> (Vec<CpEvent>, Vec<u8>) {
    let mut cp = ControlPlane::new(cfg(), EnrolmentPolicy::AcceptAny).unwrap();
    let conn = ConnectionId(1);
    let now = Instant::from_millis(5);
    cp.handle_connect(now, conn).unwrap();
    let mut events = Vec::new();
    let mut out = Vec::new();
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
    points.push(0);
    points.push(wire.len());
    points.sort();
    for w in points.windows(2) {
        cp.handle_bytes(now, conn, &wire[w[0]..w[1]]);
        let _ = iop_core::drain_transmits(&mut out, usize::MAX, |b| cp.poll_transmit(conn, b));
        while let Some(e) = cp.poll_event() {
            events.push(e);
        }
    }
    (events, out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_read_split_gives_the_same_outputs(cuts in prop::collection::vec(any::<usize>(), 0..40)) {
        let wire = script();
        let whole = run_split(&wire, &[]);
        let received = whole.0.iter().any(|e| matches!(e, CpEvent::StatusReceived { .. }));
        prop_assert!(received);
        let split = run_split(&wire, &cuts);
        prop_assert_eq!(&split, &whole);
        let bytewise: Vec<usize> = (0..wire.len()).collect();
        prop_assert_eq!(run_split(&wire, &bytewise), whole);
    }
}

// ----- random sessions: determinism and robustness --------------------------------

#[derive(Debug, Clone)]
enum Action {
    Connect,
    Frame(u8, Envelope),
    Bytes(u8, Vec<u8>),
    Closed(u8),
    Advance(u32),
    Status(u8),
    Command(u8),
    Revoke(u8),
    Drain,
}

const EDGES: [&str; 3] = ["edge-1", "edge-2", ""];
const CMDS: [&str; 3] = ["cmd-0-1", "cmd-0-2", "c9"];

fn envelope() -> impl Strategy<Value = Envelope> {
    (
        0u8..12,
        0u64..5,
        0usize..3,
        0usize..3,
        0i32..9,
        0u64..6,
        any::<bool>(),
    )
        .prop_map(|(kind, corr, e, c, phase, seq, flag)| {
            let edge = EDGES[e];
            let cmd = CMDS[c];
            let mut env = match kind {
                0 => {
                    let mut h = hello(edge, &["op"]);
                    if flag {
                        h.inflight_command_ids = vec![cmd.into()];
                    }
                    h.protocol_version = seq as u32;
                    Envelope::new(h)
                }
                1 => heartbeat(seq),
                2 => status_response(corr, edge, seq),
                3 => cmd_response(cmd, flag),
                4 => {
                    let mut ev = cmd_event(cmd, CommandPhase::Accepted, seq as u32);
                    if let Some(Body::CommandEvent(x)) = &mut ev.body {
                        x.phase = phase;
                    }
                    ev
                }
                5 => {
                    let mut ev = node_event(edge, NodeEventKind::NodeReady, seq);
                    if let Some(Body::NodeEvent(x)) = &mut ev.body {
                        x.kind = phase;
                    }
                    ev
                }
                6 => Envelope::new(GoAway::default()),
                7 => Envelope::new(HeartbeatAck { sequence: seq }),
                8 => Envelope::new(EdgeHelloResponse::default()),
                9 => Envelope::new(EdgeStatusRequest::default()),
                10 => Envelope::new(EdgeCommandRequest::default()),
                _ => Envelope {
                    correlation_id: 1,
                    body: None,
                },
            };
            env.correlation_id = corr;
            env
        })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        1 => Just(Action::Connect),
        6 => (0u8..3, envelope()).prop_map(|(c, e)| Action::Frame(c, e)),
        1 => (0u8..3, prop::collection::vec(any::<u8>(), 0..24)).prop_map(|(c, b)| Action::Bytes(c, b)),
        1 => (0u8..3).prop_map(Action::Closed),
        2 => (0u32..20_000).prop_map(Action::Advance),
        1 => (0u8..2).prop_map(Action::Status),
        1 => (0u8..2).prop_map(Action::Command),
        1 => (0u8..2).prop_map(Action::Revoke),
        1 => Just(Action::Drain),
    ]
}

/// Runs `actions` on a fresh CP (three connection slots, reused after close).
/// Returns everything observable.
fn run(actions: &[Action]) -> (Vec<CpEvent>, Vec<Vec<u8>>, Vec<Option<Instant>>) {
    let mut cp = ControlPlane::new(cfg(), EnrolmentPolicy::AcceptAny).unwrap();
    let mut now = Instant::from_millis(1);
    let mut next = 0u64;
    let mut slots: [Option<ConnectionId>; 3] = [None, None, None];
    let mut events = Vec::new();
    let mut out = Vec::new();
    let mut timeouts = Vec::new();
    let mut issued = Vec::new();
    for a in actions {
        match a {
            Action::Connect => {
                if let Some(slot) = slots.iter_mut().find(|s| s.is_none()) {
                    next += 1;
                    let id = ConnectionId(next);
                    cp.handle_connect(now, id).unwrap();
                    *slot = Some(id);
                }
            }
            Action::Frame(i, env) => {
                if let Some(id) = slots[*i as usize] {
                    let mut wire = Vec::new();
                    if proto::encode_frame(env, u32::MAX, &mut wire).is_ok() {
                        cp.handle_bytes(now, id, &wire);
                    }
                }
            }
            Action::Bytes(i, b) => {
                if let Some(id) = slots[*i as usize] {
                    cp.handle_bytes(now, id, b);
                }
            }
            Action::Closed(i) => {
                if let Some(id) = slots[*i as usize].take() {
                    cp.handle_closed(now, id);
                }
            }
            Action::Advance(ms) => {
                now = now + Duration::from_millis(u64::from(*ms));
                cp.handle_timeout(now);
            }
            Action::Status(e) => {
                if let Ok(r) = cp.request_status(now, EDGES[*e as usize], vec![]) {
                    issued.push(r);
                }
            }
            Action::Command(e) => {
                let spec = CommandSpec::new("op");
                let _ = cp.send_command(now, EDGES[*e as usize], spec);
            }
            Action::Revoke(e) => {
                let _ = cp.revoke(now, EDGES[*e as usize]);
            }
            Action::Drain => cp.drain(),
        }
        // Drain every output.
        while cp.poll_wakeup().is_some() {}
        for slot in slots.iter_mut() {
            if let Some(id) = *slot {
                let mut buf = Vec::new();
                loop {
                    match cp.poll_transmit(id, &mut buf) {
                        Transmit::Bytes(_) => {}
                        Transmit::Idle => break,
                        Transmit::Close => {
                            *slot = None;
                            break;
                        }
                    }
                }
                out.push(buf);
            }
        }
        while let Some(e) = cp.poll_event() {
            events.push(e);
        }
        timeouts.push(cp.poll_timeout());
    }
    // Shut down: every status request issued (by the app or automatically) has
    // exactly one outcome.
    cp.shutdown(now);
    for slot in slots.iter_mut() {
        if let Some(id) = slot.take() {
            let mut buf = Vec::new();
            let _ = iop_core::drain_transmits(&mut buf, usize::MAX, |b| cp.poll_transmit(id, b));
            out.push(buf);
        }
    }
    assert_eq!(cp.connection_count(), 0);
    while let Some(e) = cp.poll_event() {
        events.push(e);
    }
    issued.extend(events.iter().filter_map(|e| match e {
        CpEvent::ResyncNeeded { request, .. } => *request,
        _ => None,
    }));
    for r in &issued {
        let outcomes = events
            .iter()
            .filter(|e| match e {
                CpEvent::StatusReceived { request, .. }
                | CpEvent::StatusTimedOut { request, .. }
                | CpEvent::StatusAbandoned { request, .. } => request == r,
                _ => false,
            })
            .count();
        assert_eq!(outcomes, 1, "{r:?}");
    }
    // Every connection ends at most once.
    let mut closed: Vec<ConnectionId> = events
        .iter()
        .filter_map(|e| match e {
            CpEvent::Closed { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect();
    let n = closed.len();
    closed.sort();
    closed.dedup();
    assert_eq!(closed.len(), n, "a connection closed twice");
    // Once drained, a closed connection has been told `Close` and is forgotten.
    for id in &closed {
        assert!(cp.connection_buffers(*id).is_none());
        assert!(!slots.contains(&Some(*id)));
    }
    (events, out, timeouts)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_sessions_never_panic_and_are_deterministic(
        actions in prop::collection::vec(action(), 1..60)
    ) {
        let first = run(&actions);
        let second = run(&actions);
        prop_assert_eq!(first, second);
    }

    #[test]
    fn arbitrary_bytes_after_the_hello_end_fine_or_in_one_close(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        split in 1usize..64,
    ) {
        let mut t = harness();
        let (conn, _) = t.enrol("edge-1", &[]);
        for chunk in bytes.chunks(split) {
            t.send_raw(conn, chunk);
        }
        let closes = t.cp_events.iter().filter(|e| matches!(e, CpEvent::Closed { .. })).count();
        prop_assert!(closes <= 1);
        prop_assert_eq!(closes == 1, t.is_closed(conn));
    }

    #[test]
    fn arbitrary_envelopes_end_fine_or_in_one_close(
        envs in prop::collection::vec(envelope(), 0..30),
        before_hello in any::<bool>(),
    ) {
        let mut t = harness();
        let conn = if before_hello { t.connect() } else { t.enrol("edge-1", &["op"]).0 };
        for e in envs {
            t.send(conn, e);
        }
        let closes: Vec<_> = t.cp_events.iter().filter(|e| matches!(e, CpEvent::Closed { conn: c, .. } if *c == conn)).collect();
        prop_assert!(closes.len() <= 1);
        prop_assert_eq!(closes.len() == 1, t.is_closed(conn));
    }
}
