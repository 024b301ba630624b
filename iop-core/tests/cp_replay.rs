//! Found by the seeded simulation (`tests/sim.rs`, seed 3 before the fix): while two
//! Edge processes briefly shared one id (PROTOCOL.md §4.1, a duplicate superseding the other),
//! both held one command. The CP had seen sequence 2 from one of them; the other's
//! replay (its latest event, sequence 1) after its next hello was taken for a
//! reordering — a protocol error — on every session, so the surviving, correct
//! process was locked out until its retention window passed. PROTOCOL.md §4.4 de-duplicates
//! events by `(edge_id, command_id, sequence)`: a replayed event already seen (or
//! older than one seen) is a duplicate. Outside the replay, the order rule is strict.

use iop_core::cp::{CommandSpec, CpEvent};
use iop_core::proto::{CommandPhase, NodeEventKind};
use iop_core::testing::scripted::edges::*;

const EDGE: &str = "edge-1";

fn spec() -> CommandSpec {
    CommandSpec::new("op")
}

/// A session of `EDGE` whose hello lists `held`, with EDGE_READY sent.
fn session(t: &mut Pair, held: &[&str]) -> iop_core::cp::ConnectionId {
    let mut h = hello(EDGE, &["op"]);
    h.inflight_command_ids = held.iter().map(|s| s.to_string()).collect();
    let (conn, resp) = t.hello_with(h);
    assert!(resp.accepted);
    t.send(conn, node_event(EDGE, NodeEventKind::EdgeReady, 1));
    conn
}

#[test]
fn a_replay_older_than_what_the_cp_saw_is_a_duplicate() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    let id = t.cp.send_command(t.now, EDGE, spec()).unwrap();
    t.send(conn, cmd_response(&id, true));
    t.send(conn, cmd_event(&id, CommandPhase::Accepted, 1));
    t.send(conn, cmd_event(&id, CommandPhase::Running, 2));

    // Another process with the same id replaces the session; it holds the command
    // and replays its own latest event: sequence 1.
    let conn2 = session(&mut t, &[&id]);
    t.send(conn2, cmd_event(&id, CommandPhase::Accepted, 1));
    assert!(!t.is_closed(conn2), "{:#?}", t.cp_events);
    assert_eq!(t.cp.stats().protocol_errors, 0);
    assert_eq!(t.cp.stats().duplicate_command_events, 1);

    // Later events still count, in order.
    t.send(conn2, cmd_event(&id, CommandPhase::Succeeded, 3));
    assert!(t.cp_events.iter().any(|e| matches!(e,
        CpEvent::CommandEvent { event, .. } if event.sequence == 3)));
    assert_eq!(t.cp.stats().protocol_errors, 0);
}

#[test]
fn a_replay_of_a_finished_command_older_than_its_end_is_a_duplicate() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    let id = t.cp.send_command(t.now, EDGE, spec()).unwrap();
    t.send(conn, cmd_response(&id, true));
    t.send(conn, cmd_event(&id, CommandPhase::Accepted, 1));
    t.send(conn, cmd_event(&id, CommandPhase::Running, 2));
    t.send(conn, cmd_event(&id, CommandPhase::Succeeded, 3));

    let conn2 = session(&mut t, &[&id]);
    t.send(conn2, cmd_event(&id, CommandPhase::Running, 2));
    assert!(!t.is_closed(conn2), "{:#?}", t.cp_events);
    assert_eq!(t.cp.stats().protocol_errors, 0);
}

#[test]
fn outside_the_replay_an_older_sequence_is_still_a_protocol_error() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    let id = t.cp.send_command(t.now, EDGE, spec()).unwrap();
    t.send(conn, cmd_response(&id, true));
    t.send(conn, cmd_event(&id, CommandPhase::Accepted, 1));
    t.send(conn, cmd_event(&id, CommandPhase::Running, 3));

    let conn2 = session(&mut t, &[&id]);
    t.send(conn2, cmd_event(&id, CommandPhase::Running, 3)); // the replay
    assert!(!t.is_closed(conn2));
    t.send(conn2, cmd_event(&id, CommandPhase::Running, 2)); // a reordering
    assert!(t.is_closed(conn2));
    assert_eq!(t.cp.stats().protocol_errors, 1);
}
