//! PROTOCOL.md §8 "Command records": a Control Plane that takes an Edge over adopts the
//! commands another one sent it, and PROTOCOL.md §4.4's rules go on from there — a
//! command never answered is re-sent, one believed accepted that the Edge no longer
//! holds is lost, and replays of one it holds are de-duplicated against the adopted copy.

use iop_core::cp::Ending;
use iop_core::cp::{
    ClaimAnswer, ClaimError, CommandAnswer, CommandOutcome, CommandSpec, CommandState,
    ConnectionId, CpEvent, EnrolmentPolicy, ExternalDirectory,
};
use iop_core::proto::{Body, CommandPhase, EdgeCommandRequest, EdgeHelloRequest, NodeEventKind};
use iop_core::testing::scripted::edges::*;

const EDGE: &str = "edge-1";

fn external() -> Pair {
    harness_with_directory(
        cfg(),
        EnrolmentPolicy::AcceptAny,
        Box::new(ExternalDirectory),
    )
}

/// A hello on a fresh connection of `t`, waiting for its claim.
fn claiming(t: &mut Pair, hello: EdgeHelloRequest) -> ConnectionId {
    let conn = t.connect();
    t.send(conn, hello);
    assert!(
        t.take_events()
            .iter()
            .any(|e| matches!(e, CpEvent::OwnershipClaim(_)))
    );
    conn
}

fn grant(t: &mut Pair, conn: ConnectionId, session_id: u64) {
    t.cp.handle_claim(t.now, conn, ClaimAnswer::Granted { session_id })
        .unwrap();
    t.pump();
}

fn send(t: &mut Pair, id: &str) {
    t.cp.send_command(t.now, EDGE, CommandSpec::new("op").with_id(id))
        .unwrap();
}

/// Replica A's commands of the Edge: `running` accepted and at RUNNING (seq 2),
/// `unanswered` never answered, `forgotten` accepted (seq 1), `done` SUCCEEDED.
fn replica_a() -> Vec<CommandState> {
    let mut a = external();
    let conn = claiming(&mut a, hello(EDGE, &["op"]));
    grant(&mut a, conn, 5);
    a.send(conn, node_event(EDGE, NodeEventKind::EdgeReady, 1));
    for id in ["running", "unanswered", "forgotten", "done"] {
        send(&mut a, id);
    }
    a.pump();
    for (id, seqs) in [
        (
            "running",
            &[(CommandPhase::Accepted, 1), (CommandPhase::Running, 2)][..],
        ),
        ("forgotten", &[(CommandPhase::Accepted, 1)][..]),
        (
            "done",
            &[(CommandPhase::Accepted, 1), (CommandPhase::Succeeded, 2)][..],
        ),
    ] {
        a.send(conn, cmd_response(id, true));
        for (phase, seq) in seqs {
            a.send(conn, cmd_event(id, *phase, *seq));
        }
    }
    ["running", "unanswered", "forgotten", "done"]
        .iter()
        .map(|id| a.cp.command(EDGE, id).expect("kept"))
        .collect()
}

#[test]
fn a_handover_says_what_the_sending_control_plane_knew() {
    let h = replica_a();
    let by_id = |id: &str| h.iter().find(|c| c.request.command_id == id).unwrap();
    let running = by_id("running");
    assert_eq!(running.request.operation, "op");
    assert_eq!(running.answer, CommandAnswer::Accepted);
    assert_eq!(
        (running.phase, running.last_sequence),
        (CommandPhase::Running, 2)
    );
    assert_eq!(running.outcome, None);
    assert_eq!(by_id("unanswered").answer, CommandAnswer::Pending);
    assert_eq!(
        by_id("done").outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
}

#[test]
fn the_adopting_control_plane_resends_marks_lost_and_deduplicates() {
    let handed = replica_a();
    // Replica A is gone; the Edge, which still holds `running` and `done` (it forgot
    // `forgotten` in a restart and never got `unanswered`), says hello to replica B.
    let mut b = external();
    let mut h = hello(EDGE, &["op"]);
    h.inflight_command_ids = vec!["running".into(), "done".into()];
    let conn = claiming(&mut b, h);
    assert_eq!(b.cp.adopt_commands(conn, handed).unwrap().len(), 4);
    grant(&mut b, conn, 9);

    let resent: Vec<String> = b
        .take_frames(conn)
        .into_iter()
        .filter_map(|f| match f.body {
            Some(Body::CommandRequest(r)) => Some(r.command_id),
            _ => None,
        })
        .collect();
    assert_eq!(
        resent,
        ["unanswered"],
        "only the unanswered command is re-sent"
    );
    let events = b.take_events();
    assert!(events.iter().any(|e| matches!(
        e,
        CpEvent::CommandEnded { command_id, ending: Ending::Lost, .. } if command_id == "forgotten"
    )));
    assert_eq!(
        b.cp.command(EDGE, "forgotten").unwrap().outcome,
        Some(CommandOutcome::Ended(Ending::Lost))
    );

    // The Edge replays the latest event of each command it holds: both already seen.
    b.send(conn, node_event(EDGE, NodeEventKind::EdgeReady, 1));
    b.send(conn, cmd_event("running", CommandPhase::Running, 2));
    b.send(conn, cmd_event("done", CommandPhase::Succeeded, 2));
    assert!(
        !b.take_events()
            .iter()
            .any(|e| matches!(e, CpEvent::CommandEvent { .. })),
        "replays of adopted events are duplicates"
    );
    // What happens next is new, and the session stays up.
    b.send(conn, cmd_event("running", CommandPhase::Succeeded, 3));
    assert!(b.take_events().iter().any(|e| matches!(
        e,
        CpEvent::CommandEvent { event, .. } if event.command_id == "running" && event.sequence == 3
    )));
    assert_eq!(
        b.cp.command(EDGE, "running").unwrap().outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
    b.send(conn, cmd_response("unanswered", true));
    assert_eq!(
        b.cp.command(EDGE, "unanswered").unwrap().answer,
        CommandAnswer::Accepted
    );
    assert!(!b.is_closed(conn));
}

#[test]
fn the_further_advanced_copy_of_a_command_wins() {
    let handed = replica_a();
    let mut b = external();
    // B sent `running` itself earlier and saw less of it than A did.
    let conn = claiming(&mut b, hello(EDGE, &["op"]));
    grant(&mut b, conn, 3);
    b.send(conn, node_event(EDGE, NodeEventKind::EdgeReady, 1));
    send(&mut b, "running");
    b.pump();
    b.send(conn, cmd_response("running", true));
    b.drop_transport(conn);

    let mut h = hello(EDGE, &["op"]);
    h.inflight_command_ids = vec!["running".into()];
    let conn = claiming(&mut b, h);
    b.cp.adopt_commands(conn, handed).unwrap();
    grant(&mut b, conn, 9);
    let state = b.cp.command(EDGE, "running").unwrap();
    assert_eq!(
        (state.phase, state.last_sequence),
        (CommandPhase::Running, 2)
    );
}

#[test]
fn commands_this_control_plane_could_not_have_sent_are_left_out() {
    let mut b = external();
    let conn = claiming(&mut b, hello(EDGE, &["op"]));
    let empty_id = CommandState::new(EdgeCommandRequest {
        operation: "op".into(),
        ..Default::default()
    });
    let huge = CommandState::new(EdgeCommandRequest {
        command_id: "huge".into(),
        operation: "op".into(),
        metadata: [("k".to_string(), "x".repeat(5_000))].into(),
        ..Default::default()
    });
    let fine = CommandState::new(EdgeCommandRequest {
        command_id: "fine".into(),
        operation: "op".into(),
        ..Default::default()
    });
    assert_eq!(
        b.cp.adopt_commands(conn, vec![empty_id, huge, fine])
            .unwrap(),
        ["fine"]
    );
    // Not while no claim waits.
    grant(&mut b, conn, 2);
    assert_eq!(
        b.cp.adopt_commands(conn, Vec::new()),
        Err(ClaimError::NotWaiting)
    );
    assert_eq!(
        b.cp.adopt_commands(ConnectionId(999), Vec::new()),
        Err(ClaimError::NotWaiting)
    );
    // The one kept was re-sent on the new session.
    assert!(
        b.take_frames(conn)
            .iter()
            .any(|f| matches!(&f.body, Some(Body::CommandRequest(r)) if r.command_id == "fine"))
    );
}
