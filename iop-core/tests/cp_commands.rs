//! PROTOCOL.md §4.4: commands — advertised operations, response before events, forward-only
//! phases, de-duplication, and survival across reconnects.

use iop_core::cp::Ending;
use iop_core::cp::{
    CloseReason, CommandAnswer, CommandError, CommandOrderRule, CommandOutcome, CommandSpec,
    ConnectionId, CpEvent, EdgeAbsent, Fault, ProtocolViolation,
};
use iop_core::proto::{CommandPhase::*, CommandRejectReason, Envelope, GoAwayReason};
use iop_core::testing::scripted::edges::*;

fn spec(op: &str) -> CommandSpec {
    CommandSpec::new(op).with_target("*")
}

/// An enrolled edge with command `c1` sent.
fn with_command() -> (Pair, ConnectionId) {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &["node.drain"]);
    let id =
        t.cp.send_command(t.now, "edge-1", spec("node.drain").with_id("c1"))
            .unwrap();
    assert_eq!(id, "c1");
    t.pump();
    assert_eq!(command_requests(&t.take_frames(conn))[0].command_id, "c1");
    (t, conn)
}

fn command_events(t: &Pair) -> Vec<(u32, i32)> {
    t.cp_events
        .iter()
        .filter_map(|e| match e {
            CpEvent::CommandEvent { event, .. } => Some((event.sequence, event.phase)),
            _ => None,
        })
        .collect()
}

#[test]
fn only_advertised_operations_are_sent() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &["node.drain"]);
    let refused = t.cp.send_command(t.now, "edge-1", spec("node.reboot"));
    assert_eq!(
        refused,
        Err(CommandError::OperationNotAdvertised {
            operation: "node.reboot".into(),
            advertised: vec!["node.drain".into()],
        })
    );
    assert_eq!(refused.as_ref().unwrap_err().fault(), Fault::Caller);
    // The message says what to use instead.
    assert_eq!(
        refused.unwrap_err().to_string(),
        r#"edge did not advertise operation "node.reboot"; it advertises ["node.drain"]"#
    );
    let unknown = t.cp.send_command(t.now, "edge-2", spec("node.drain"));
    assert_eq!(unknown, Err(EdgeAbsent::unknown("edge-2").into()));
    assert_eq!(unknown.as_ref().unwrap_err().fault(), Fault::Absent);
    assert!(
        unknown.unwrap_err().to_string().contains("never connected"),
        "an unknown edge is told apart from a disconnected one"
    );
    t.pump();
    assert!(t.take_frames(conn).is_empty());
}

#[test]
fn generated_ids_are_deterministic_and_supplied_ids_unique() {
    let mut c = cfg();
    c.command_id_epoch = 0xabc;
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    t.enrol("edge-1", &["op"]);
    let a = t.cp.send_command(t.now, "edge-1", spec("op")).unwrap();
    let b = t.cp.send_command(t.now, "edge-1", spec("op")).unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("cmd-abc-1", "cmd-abc-2"));
    // An id the application chose itself is skipped by the generator.
    t.cp.send_command(t.now, "edge-1", spec("op").with_id("cmd-abc-3"))
        .unwrap();
    let d = t.cp.send_command(t.now, "edge-1", spec("op")).unwrap();
    assert_eq!(d, "cmd-abc-4");
    let duplicate =
        t.cp.send_command(t.now, "edge-1", spec("op").with_id(a.clone()));
    assert_eq!(duplicate, Err(CommandError::DuplicateCommandId(a)));
    assert_eq!(duplicate.unwrap_err().fault(), Fault::Caller);
    // (An empty id is none: the Control Plane chooses one.)
    for bad in ["x".repeat(129), "a b".into(), "cmd/1".into()] {
        let refused =
            t.cp.send_command(t.now, "edge-1", spec("op").with_id(bad.clone()));
        assert!(
            matches!(refused, Err(CommandError::InvalidCommandId(_))),
            "{bad:?}: {refused:?}"
        );
    }
}

#[test]
fn in_flight_commands_are_limited_per_edge() {
    let mut c = cfg();
    c.max_inflight_commands = 2;
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol("edge-1", &["op"]);
    t.cp.send_command(t.now, "edge-1", spec("op").with_id("a"))
        .unwrap();
    t.cp.send_command(t.now, "edge-1", spec("op").with_id("b"))
        .unwrap();
    let busy = t.cp.send_command(t.now, "edge-1", spec("op"));
    assert_eq!(busy, Err(CommandError::TooManyInFlight { limit: 2 }));
    assert_eq!(busy.unwrap_err().fault(), Fault::Busy);
    t.pump();
    t.send(conn, cmd_response("a", false));
    assert!(t.cp.send_command(t.now, "edge-1", spec("op")).is_ok());
}

#[test]
fn a_full_command_lifecycle_surfaces_in_order() {
    let (mut t, conn) = with_command();
    t.send(conn, cmd_response("c1", true));
    t.send(conn, cmd_event("c1", Accepted, 1));
    t.send(conn, cmd_event("c1", Running, 2));
    t.send(conn, cmd_event("c1", Running, 3));
    t.send(conn, cmd_event("c1", Succeeded, 5));
    assert!(!t.is_closed(conn));
    assert!(matches!(&t.cp_events[0],
        CpEvent::CommandResponded { response, outcome: None, .. }
            if response.command_id == "c1" && response.accepted));
    // Each event says what it did to the command: only the terminal one ends it.
    let outcomes: Vec<_> = (t.cp_events.iter())
        .filter_map(|e| match e {
            CpEvent::CommandEvent { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .collect();
    let done = Some(CommandOutcome::Finished(Succeeded));
    assert_eq!(outcomes, [None, None, None, done]);
    assert_eq!(
        command_events(&t),
        vec![
            (1, Accepted as i32),
            (2, Running as i32),
            (3, Running as i32),
            (5, Succeeded as i32)
        ]
    );
    let st = t.cp.command("edge-1", "c1").unwrap();
    assert_eq!(st.answer, CommandAnswer::Accepted);
    assert_eq!(st.outcome, Some(CommandOutcome::Finished(Succeeded)));
    assert_eq!(st.last_sequence, 5);
    // Counted once, however many events it took.
    let stats = t.cp.stats();
    assert_eq!((stats.commands_issued, stats.commands_succeeded), (1, 1));
    assert_eq!((stats.commands_failed, stats.commands_rejected), (0, 0));
}

#[test]
fn a_rejection_is_final() {
    let (mut t, conn) = with_command();
    t.send(conn, cmd_response("c1", false));
    assert!(t.cp_events.iter().any(|e| matches!(
        e,
        CpEvent::CommandResponded {
            response,
            outcome: Some(CommandOutcome::Rejected(CommandRejectReason::Busy)),
            ..
        } if !response.accepted
    )));
    assert_eq!(
        t.cp.command("edge-1", "c1").unwrap().outcome,
        Some(CommandOutcome::Rejected(CommandRejectReason::Busy))
    );
    assert_eq!(t.cp.stats().commands_rejected, 1);
}

#[test]
fn duplicate_events_are_dropped() {
    let (mut t, conn) = with_command();
    t.send(conn, cmd_response("c1", true));
    t.send(conn, cmd_event("c1", Accepted, 1));
    t.send(conn, cmd_event("c1", Accepted, 1));
    t.send(conn, cmd_event("c1", Failed, 2));
    t.send(conn, cmd_event("c1", Failed, 2));
    assert!(!t.is_closed(conn));
    assert_eq!(
        command_events(&t),
        vec![(1, Accepted as i32), (2, Failed as i32)]
    );
    assert_eq!(t.cp.stats().duplicate_command_events, 2);
}

#[test]
fn unknown_command_ids_are_counted_and_dropped() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &["op"]);
    t.send(conn, cmd_response("ghost", true));
    t.send(conn, cmd_event("ghost", Succeeded, 4));
    assert!(!t.is_closed(conn));
    assert!(t.take_events().is_empty());
    assert_eq!(t.cp.stats().unknown_command_ids, 2);
}

/// Each ordering violation by the Edge closes the session as a protocol error.
fn violation(script: &[Envelope], expected: ProtocolViolation) {
    let (mut t, conn) = with_command();
    for env in script {
        t.send(conn, env.clone());
    }
    assert_eq!(
        go_away(&t.take_frames(conn)),
        Some((GoAwayReason::ProtocolError as i32, 0)),
        "{expected:?}"
    );
    assert!(t.is_closed(conn));
    assert!(
        t.cp_events.iter().any(|e| matches!(e,
        CpEvent::Closed { reason: CloseReason::ProtocolError(v), .. } if *v == expected)),
        "{expected:?}: {:?}",
        t.cp_events
    );
}

fn order(rule: CommandOrderRule) -> ProtocolViolation {
    ProtocolViolation::CommandEventOrder {
        command_id: "c1".into(),
        rule,
    }
}

#[test]
fn ordering_violations_are_protocol_errors() {
    let ok = cmd_response("c1", true);
    violation(
        &[cmd_event("c1", Accepted, 1)],
        ProtocolViolation::CommandEventBeforeResponse {
            command_id: "c1".into(),
        },
    );
    violation(
        &[cmd_response("c1", false), cmd_event("c1", Accepted, 1)],
        ProtocolViolation::CommandEventAfterRejection {
            command_id: "c1".into(),
        },
    );
    violation(
        &[ok.clone(), ok.clone()],
        ProtocolViolation::UnsolicitedCommandResponse {
            command_id: "c1".into(),
        },
    );
    violation(
        &[ok.clone(), cmd_event("c1", Running, 1)],
        order(CommandOrderRule::FirstNotAccepted),
    );
    violation(
        &[ok.clone(), cmd_event("c1", Accepted, 0)],
        order(CommandOrderRule::SequenceOrder),
    );
    violation(
        &[
            ok.clone(),
            cmd_event("c1", Accepted, 1),
            cmd_event("c1", Running, 3),
            cmd_event("c1", Running, 2),
        ],
        order(CommandOrderRule::SequenceOrder),
    );
    violation(
        &[
            ok.clone(),
            cmd_event("c1", Accepted, 1),
            cmd_event("c1", Running, 2),
            cmd_event("c1", Accepted, 3),
        ],
        order(CommandOrderRule::PhaseBackwards),
    );
    violation(
        &[
            ok.clone(),
            cmd_event("c1", Accepted, 1),
            cmd_event("c1", Accepted, 2),
        ],
        order(CommandOrderRule::PhaseBackwards),
    );
    violation(
        &[
            ok.clone(),
            cmd_event("c1", Accepted, 1),
            cmd_event("c1", Succeeded, 2),
            cmd_event("c1", Failed, 3),
        ],
        order(CommandOrderRule::AfterTerminal),
    );
    violation(
        &[ok.clone(), cmd_event("c1", Unspecified, 1)],
        order(CommandOrderRule::UnknownPhase),
    );
}

#[test]
fn unanswered_commands_are_resent_on_the_next_session() {
    let (mut t, conn) = with_command();
    t.cp.send_command(t.now, "edge-1", spec("node.drain").with_id("c2"))
        .unwrap();
    t.pump();
    t.drop_transport(conn);
    let mut h = hello("edge-1", &["node.drain"]);
    h.inflight_command_ids = vec!["c1".into()];
    let (conn2, _) = t.hello_with(h);
    let resent: Vec<String> = command_requests(&t.take_frames(conn2))
        .into_iter()
        .map(|r| r.command_id)
        .collect();
    assert_eq!(resent, vec!["c1", "c2"], "original order, same ids");
    assert_eq!(t.cp.stats().commands_resent, 2);
    // c1 was held by the Edge: its replayed latest event may precede the response.
    t.take_events();
    t.send(conn2, cmd_event("c1", Running, 4));
    t.send(conn2, cmd_response("c1", true));
    t.send(conn2, cmd_event("c1", Succeeded, 5));
    assert!(!t.is_closed(conn2));
    assert_eq!(
        command_events(&t),
        vec![(4, Running as i32), (5, Succeeded as i32)]
    );
    // c2 was not held: it must be answered before its events.
    t.send(conn2, cmd_event("c2", Accepted, 1));
    assert!(t.is_closed(conn2));
}

#[test]
fn accepted_commands_the_edge_no_longer_holds_are_lost() {
    let (mut t, conn) = with_command();
    t.cp.send_command(t.now, "edge-1", spec("node.drain").with_id("c2"))
        .unwrap();
    t.pump();
    for c in ["c1", "c2"] {
        t.send(conn, cmd_response(c, true));
        t.send(conn, cmd_event(c, Accepted, 1));
    }
    t.drop_transport(conn);
    t.take_events();
    let mut h = hello("edge-1", &["node.drain"]);
    h.inflight_command_ids = vec!["c2".into()];
    let (conn2, _) = t.hello_with(h);
    assert!(
        command_requests(&t.take_frames(conn2)).is_empty(),
        "answered: not resent"
    );
    assert!(t.take_events().contains(&CpEvent::CommandEnded {
        edge_id: "edge-1".into(),
        command_id: "c1".into(),
        ending: Ending::Lost,
    }));
    let c1 = t.cp.command("edge-1", "c1").unwrap();
    assert_eq!(c1.outcome, Some(CommandOutcome::Ended(Ending::Lost)));
    assert_eq!(c1.phase, Failed);
    // c2 goes on; its replayed latest event is a duplicate, the next one is new.
    t.send(conn2, cmd_event("c2", Accepted, 1));
    t.send(conn2, cmd_event("c2", Succeeded, 2));
    assert_eq!(command_events(&t), vec![(2, Succeeded as i32)]);
    // Late events of the lost command are dropped, not errors.
    t.send(conn2, cmd_event("c1", Succeeded, 2));
    assert!(!t.is_closed(conn2));
    assert_eq!(t.cp.stats().commands_lost, 1);
}

#[test]
fn a_command_survives_a_superseded_session() {
    let (mut t, old) = with_command();
    // The Edge reconnects while the old connection is half-open.
    let mut h = hello("edge-1", &["node.drain"]);
    h.inflight_command_ids = vec!["c1".into()];
    let (new, _) = t.hello_with(h);
    assert!(t.is_closed(old));
    assert_eq!(command_requests(&t.take_frames(new))[0].command_id, "c1");
    t.send(new, cmd_response("c1", true));
    t.send(new, cmd_event("c1", Accepted, 1));
    t.send(new, cmd_event("c1", Succeeded, 2));
    assert_eq!(
        t.cp.command("edge-1", "c1").unwrap().outcome,
        Some(CommandOutcome::Finished(Succeeded))
    );
}

#[test]
fn a_held_command_may_finish_before_the_answer_to_its_resend() {
    let (mut t, conn) = with_command();
    // The Edge accepted c1 but the response was lost with the connection.
    t.drop_transport(conn);
    let mut h = hello("edge-1", &["node.drain"]);
    h.inflight_command_ids = vec!["c1".into()];
    let (conn2, _) = t.hello_with(h);
    t.send(conn2, cmd_event("c1", Succeeded, 2));
    t.send(conn2, cmd_response("c1", true));
    assert!(!t.is_closed(conn2));
    assert_eq!(
        t.cp.command("edge-1", "c1").unwrap().outcome,
        Some(CommandOutcome::Finished(Succeeded))
    );
}

#[test]
fn a_command_seen_running_but_never_answered_is_lost_when_the_edge_forgets_it() {
    let (mut t, conn) = with_command();
    t.drop_transport(conn);
    let mut h = hello("edge-1", &["node.drain"]);
    h.inflight_command_ids = vec!["c1".into()];
    let (conn2, _) = t.hello_with(h);
    t.send(conn2, cmd_event("c1", Running, 3));
    t.drop_transport(conn2);
    t.take_events();
    // The Edge restarted: it lists nothing. Re-sending c1 would run it again from 1.
    let (conn3, _) = t.hello_with(hello("edge-1", &["node.drain"]));
    assert!(command_requests(&t.take_frames(conn3)).is_empty());
    assert!(t.take_events().contains(&CpEvent::CommandEnded {
        edge_id: "edge-1".into(),
        command_id: "c1".into(),
        ending: Ending::Lost,
    }));
}
