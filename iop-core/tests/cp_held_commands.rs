//! PROTOCOL.md §8 "Command records": a command held back until its record is written
//! (`hold_command`) is neither sent, re-sent nor marked lost until it is released; one
//! whose record could not be written is dropped, never sent.

use iop_core::cp::{CommandError, CommandSpec, ConnectionId, CpEvent};

use iop_core::testing::scripted::edges::*;

const EDGE: &str = "edge-1";

fn held(t: &mut Pair, id: &str) -> String {
    t.cp.hold_command(EDGE, CommandSpec::new("op").with_id(id))
        .unwrap()
}

#[test]
fn a_held_command_goes_out_only_once_released() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    let id = held(&mut t, "c1");
    t.pump();
    assert!(
        command_requests(&t.take_frames(conn)).is_empty(),
        "not before its record"
    );
    // It counts as known: the same id again is a duplicate.
    assert_eq!(
        t.cp.hold_command(EDGE, CommandSpec::new("op").with_id(id.clone())),
        Err(CommandError::DuplicateCommandId(id.clone()))
    );
    assert!(t.cp.release_command(t.now, EDGE, &id));
    t.pump();
    assert_eq!(command_requests(&t.take_frames(conn))[0].command_id, "c1");
    // Released once: a second release or a drop changes nothing.
    assert!(!t.cp.release_command(t.now, EDGE, &id));
    assert!(!t.cp.drop_command(EDGE, &id));
    t.send(conn, cmd_response(&id, true));
    assert!(t.cp_events.iter().any(|e| matches!(e,
        CpEvent::CommandResponded { response, .. } if response.command_id == id)));
}

#[test]
fn a_reconnect_while_held_neither_resends_nor_loses_it_and_release_sends_on_the_new_session() {
    let mut t = harness();
    let (first, _) = t.enrol(EDGE, &["op"]);
    let id = held(&mut t, "c1");
    let _ = t.take_frames(first);
    // The Edge reconnects (a new session supersedes the old) without listing it.
    let (second, resp) = t.hello_with(hello(EDGE, &["op"]));
    assert!(resp.accepted);
    t.pump();
    assert!(command_requests(&t.take_frames(second)).is_empty());
    assert!(
        !t.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::CommandEnded { .. }))
    );
    assert_eq!(t.cp.unfinished_commands(EDGE), vec![id.clone()]);
    assert!(t.cp.release_command(t.now, EDGE, &id));
    t.pump();
    assert_eq!(command_requests(&t.take_frames(second))[0].command_id, id);
}

#[test]
fn a_command_released_while_its_edge_is_away_goes_on_the_next_session() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    let id = held(&mut t, "c1");
    t.close_scripted(conn);
    t.pump();
    assert!(t.cp.release_command(t.now, EDGE, &id));
    let (next, resp) = t.hello_with(hello(EDGE, &["op"]));
    assert!(resp.accepted);
    t.pump();
    assert_eq!(command_requests(&t.take_frames(next))[0].command_id, id);
}

#[test]
fn a_command_whose_record_failed_is_dropped_and_never_sent() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    let id = held(&mut t, "c1");
    assert!(t.cp.drop_command(EDGE, &id));
    assert!(t.cp.unfinished_commands(EDGE).is_empty());
    assert!(!t.cp.release_command(t.now, EDGE, &id));
    t.pump();
    assert!(command_requests(&t.take_frames(conn)).is_empty());
    // The id may be used again.
    assert_eq!(held(&mut t, "c1"), "c1");
    let _: ConnectionId = conn;
}
