//! Commands: validation, idempotency, phases, deadlines, reconnects, retention, shutdown.

use std::collections::BTreeMap;
use std::time::Duration;

use iop_core::Instant;
use iop_core::edge::{CloseReason, EdgeEvent, Outcome, ReportError, Target};
use iop_core::proto::{CommandPhase, CommandRejectReason, Envelope, GoAwayReason};
use iop_core::testing::scripted::control_plane::*;

fn rejected(h: &mut Harness, req: iop_core::proto::EdgeCommandRequest) -> CommandRejectReason {
    let frames = h.command(req);
    assert_eq!(frames.len(), 1, "a rejection is one response: {frames:?}");
    let r = as_command_response(&frames[0]);
    assert!(!r.accepted);
    assert!(
        !h.events()
            .iter()
            .any(|e| matches!(e, EdgeEvent::CommandReceived { .. }))
    );
    CommandRejectReason::try_from(r.reject_reason).unwrap()
}

fn connected() -> Harness {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.events();
    h
}

#[test]
fn every_rejection_reason() {
    use CommandRejectReason::*;
    let mut h = connected();
    assert_eq!(rejected(&mut h, cmd("", "edge.ping", "")), InvalidCommand);
    assert_eq!(
        rejected(&mut h, cmd("c1", "edge.reboot", "")),
        UnknownOperation
    );
    assert_eq!(
        rejected(&mut h, cmd("c1", "node.restart", "host:x")),
        InvalidSelector
    );
    // Wrong level both ways.
    assert_eq!(
        rejected(&mut h, cmd("c1", "node.restart", "")),
        InvalidSelector
    );
    assert_eq!(
        rejected(&mut h, cmd("c1", "edge.ping", "node:n1")),
        InvalidSelector
    );
    assert_eq!(
        rejected(&mut h, cmd("c1", "node.restart", "node:missing")),
        NoMatchingTarget
    );
    // A rejected id is not remembered: the same id can be accepted later.
    let frames = h.command(cmd("c1", "node.restart", "node:n1"));
    assert!(as_command_response(&frames[0]).accepted);

    let mut h = Harness::new(config(), FakeRegistry::default());
    h.connect_and_accept(1);
    assert_eq!(
        rejected(&mut h, cmd("c2", "node.restart", "*")),
        NoMatchingTarget
    );
    // An edge-level operation takes `*` as the Edge.
    let frames = h.command(cmd("c3", "edge.ping", "*"));
    assert!(as_command_response(&frames[0]).accepted);
}

#[test]
fn a_selector_rejection_echoes_the_selector() {
    let mut h = connected();
    let message = |h: &mut Harness, selector: &str| {
        let frames = h.command(cmd("c1", "node.restart", selector));
        as_command_response(&frames[0]).message.clone()
    };
    assert_eq!(
        message(&mut h, "host:x"),
        "selector \"host:x\": unknown selector form: expected empty, `*`, `node:`, `provider:` or `label:`"
    );
    assert_eq!(
        message(&mut h, "node:missing"),
        "selector \"node:missing\": no configured node matches the selector"
    );
    // A selector as long as the Control Plane may send still leaves a message within
    // what the Control Plane accepts.
    let long = format!("node:{}", "y".repeat(iop_core::limits::MAX_TEXT_LEN - 5));
    assert!(message(&mut h, &long).len() <= iop_core::limits::MAX_TEXT_LEN);
}

#[test]
fn an_over_long_command_id_is_invalid_or_a_frame_error() {
    let long = "x".repeat(129);
    // With decode limits raised, the Edge itself rejects it.
    let mut c = config();
    c.decode_limits.max_id_len = 256;
    let mut h = Harness::new(c, FakeRegistry::default());
    h.connect_and_accept(1);
    let frames = h.command(cmd(&long, "edge.ping", ""));
    let r = as_command_response(&frames[0]);
    assert_eq!(r.reject_reason, CommandRejectReason::InvalidCommand as i32);
    assert_eq!(r.command_id, long[..128], "echoed within the id limit");
    // With the protocol's decode limits it never decodes: a protocol error (iop-proto's
    // documented policy for over-long ids).
    let mut h = connected();
    let frames = h.command(cmd(&long, "edge.ping", ""));
    assert_eq!(go_away_reason(&frames[0]), GoAwayReason::ProtocolError);
    assert!(matches!(
        h.events()[..],
        [EdgeEvent::Closed {
            reason: CloseReason::ProtocolError(_),
            ..
        }]
    ));
}

#[test]
fn accepted_commands_answer_then_accepted_event_then_app_event() {
    let mut h = connected();
    let mut req = cmd("c1", "node.restart", "*");
    req.metadata.insert("why".into(), "test".into());
    req.timeout_ms = 2_000;
    h.at(100);
    let frames = h.command(req);
    assert_eq!(frames.len(), 2);
    let r = as_command_response(&frames[0]);
    assert!(r.accepted && r.command_id == "c1");
    let e = as_command_event(&frames[1]);
    assert_eq!((e.phase, e.sequence), (CommandPhase::Accepted as i32, 1));
    assert_eq!(e.occurred_at_unix_ms, ORIGIN_UNIX_MS + 100);
    assert_eq!(
        h.events(),
        [EdgeEvent::CommandReceived {
            command_id: "c1".into(),
            operation: "node.restart".into(),
            target: Target::Nodes(vec!["n1".into(), "n2".into()]),
            metadata: BTreeMap::from([("why".into(), "test".into())]),
            deadline: Instant::from_millis(2_100),
        }]
    );
}

#[test]
fn duplicate_ids_get_the_original_response_or_invalid_command() {
    let mut h = connected();
    h.command(cmd("c1", "edge.ping", ""));
    h.events();
    h.edge
        .report_running(h.now, "c1", "half way", BTreeMap::new())
        .unwrap();
    h.flush();
    // Same content: the original response again (and the latest event), not re-run.
    let frames = h.command(cmd("c1", "edge.ping", ""));
    assert!(as_command_response(&frames[0]).accepted);
    assert_eq!(as_command_event(&frames[1]).sequence, 2);
    assert!(h.events().is_empty(), "not run again");
    // Different content: INVALID_COMMAND.
    assert_eq!(
        rejected(&mut h, cmd("c1", "edge.ping", "*")),
        CommandRejectReason::InvalidCommand
    );
    // Still idempotent after it finished.
    h.edge
        .report_outcome(h.now, "c1", Outcome::Succeeded, "", BTreeMap::new())
        .unwrap();
    h.flush();
    let frames = h.command(cmd("c1", "edge.ping", ""));
    assert!(as_command_response(&frames[0]).accepted);
    assert_eq!(
        as_command_event(&frames[1]).phase,
        CommandPhase::Succeeded as i32
    );
}

#[test]
fn phases_are_ordered_with_exactly_one_terminal() {
    let mut h = connected();
    h.command(cmd("c1", "edge.ping", ""));
    for i in 0..3 {
        h.edge
            .report_running(h.now, "c1", format!("step {i}"), BTreeMap::new())
            .unwrap();
    }
    let detail = BTreeMap::from([("rc".to_owned(), "0".to_owned())]);
    h.edge
        .report_outcome(h.now, "c1", Outcome::Failed, "boom", detail.clone())
        .unwrap();
    let frames = h.flush();
    let phases: Vec<_> = frames
        .iter()
        .map(|f| {
            let e = as_command_event(f);
            (e.sequence, CommandPhase::try_from(e.phase).unwrap())
        })
        .collect();
    assert_eq!(
        phases,
        [
            (2, CommandPhase::Running),
            (3, CommandPhase::Running),
            (4, CommandPhase::Running),
            (5, CommandPhase::Failed)
        ]
    );
    assert_eq!(as_command_event(&frames[3]).detail, detail);
    // Nothing after the terminal phase.
    assert!(matches!(
        h.edge.report_running(h.now, "c1", "", BTreeMap::new()),
        Err(ReportError::AlreadyFinished {
            phase: CommandPhase::Failed,
            ..
        })
    ));
    assert!(matches!(
        h.edge
            .report_outcome(h.now, "c1", Outcome::Succeeded, "", BTreeMap::new()),
        Err(ReportError::AlreadyFinished { .. })
    ));
    assert_eq!(
        h.edge.report_running(h.now, "nope", "", BTreeMap::new()),
        Err(ReportError::UnknownCommand("nope".into()))
    );
    assert!(h.flush().is_empty());
}

#[test]
fn the_edge_emits_timed_out_at_the_deadline() {
    let mut h = connected();
    let mut req = cmd("c1", "edge.ping", "");
    req.timeout_ms = 1_500;
    h.at(200);
    h.command(req);
    h.command(cmd("c2", "edge.ping", "")); // default 60 s
    assert_eq!(h.edge.poll_timeout(), Some(Instant::from_millis(1_000)));
    h.timeout(1_000); // heartbeat
    h.flush();
    h.deliver(Envelope::new(iop_core::proto::HeartbeatAck { sequence: 1 }));
    h.timeout(1_699);
    assert!(h.flush().is_empty());
    h.timeout(1_700);
    let frames = h.flush();
    let e = as_command_event(&frames[0]);
    assert_eq!(
        (e.command_id.as_str(), e.phase, e.sequence),
        ("c1", CommandPhase::TimedOut as i32, 2)
    );
    assert_eq!(
        h.edge
            .report_outcome(h.now, "c1", Outcome::Succeeded, "late", BTreeMap::new()),
        Err(ReportError::TimedOut("c1".into()))
    );
    assert!(h.flush().is_empty());
    // The 60 s default for the other, reached while disconnected.
    h.transport_closed();
    h.timeout(60_199);
    h.timeout(60_200);
    h.now = h.edge.poll_connect_at().unwrap().max(h.now);
    let frames = h.connect_and_accept(2);
    let latest: Vec<_> = frames[1..]
        .iter()
        .map(|f| {
            let e = as_command_event(f);
            (
                e.command_id.as_str(),
                CommandPhase::try_from(e.phase).unwrap(),
                e.occurred_at_unix_ms,
            )
        })
        .collect();
    assert_eq!(
        latest,
        [
            ("c1", CommandPhase::TimedOut, ORIGIN_UNIX_MS + 1_700),
            ("c2", CommandPhase::TimedOut, ORIGIN_UNIX_MS + 60_200)
        ]
    );
}

#[test]
fn a_command_outlives_a_reconnect() {
    let mut h = connected();
    h.command(cmd("c1", "edge.ping", ""));
    h.command(cmd("c0", "edge.ping", ""));
    h.edge
        .report_outcome(h.now, "c0", Outcome::Succeeded, "", BTreeMap::new())
        .unwrap();
    h.flush();
    h.at(100);
    h.transport_closed();
    // Progress while disconnected is kept, not lost.
    h.edge
        .report_running(h.now, "c1", "first", BTreeMap::new())
        .unwrap();
    h.edge
        .report_running(h.now, "c1", "second", BTreeMap::new())
        .unwrap();
    assert!(h.flush().is_empty());
    h.now = h.edge.poll_connect_at().unwrap();
    let hello = h.connect();
    // Running first, then recently finished.
    assert_eq!(hello.inflight_command_ids, ["c1", "c0"]);
    let frames = h.accept_with(accepted(2, 1_000));
    assert_eq!(as_node_event(&frames[0]).sequence, 1);
    let resent: Vec<_> = frames[1..]
        .iter()
        .map(|f| {
            let e = as_command_event(f);
            (e.command_id.as_str(), e.sequence, e.message.as_str())
        })
        .collect();
    assert_eq!(resent, [("c0", 2, ""), ("c1", 3, "second")]);
    // And it goes on in the new session.
    h.edge
        .report_outcome(h.now, "c1", Outcome::Succeeded, "", BTreeMap::new())
        .unwrap();
    assert_eq!(as_command_event(&h.flush()[0]).sequence, 4);
}

#[test]
fn timed_out_while_disconnected_is_resent_on_the_next_session() {
    let mut h = connected();
    let mut req = cmd("c1", "edge.ping", "");
    req.timeout_ms = 500;
    h.command(req);
    h.transport_closed();
    h.timeout(600);
    h.now = h.edge.poll_connect_at().unwrap().max(h.now);
    let frames = h.connect_and_accept(2);
    let e = as_command_event(&frames[1]);
    assert_eq!((e.phase, e.sequence), (CommandPhase::TimedOut as i32, 2));
}

#[test]
fn busy_counts_carried_over_commands() {
    let mut c = config();
    c.max_inflight_commands = 2;
    let mut h = Harness::new(c, FakeRegistry::with_nodes(&["n1"]));
    h.connect_and_accept(1);
    h.command(cmd("a", "edge.ping", ""));
    h.command(cmd("b", "edge.ping", ""));
    h.transport_closed();
    h.now = h.edge.poll_connect_at().unwrap();
    h.connect_and_accept(2);
    h.events();
    assert_eq!(
        rejected(&mut h, cmd("c", "edge.ping", "")),
        CommandRejectReason::Busy
    );
    // A finished one frees a slot.
    h.edge
        .report_outcome(h.now, "a", Outcome::Succeeded, "", BTreeMap::new())
        .unwrap();
    h.flush();
    assert!(as_command_response(&h.command(cmd("c", "edge.ping", ""))[0]).accepted);
}

#[test]
fn finished_ids_are_forgotten_after_retention_or_over_the_cap() {
    let mut c = config();
    c.max_retained_commands = 2;
    c.command_retention = Duration::from_secs(600);
    let mut h = Harness::new(c, FakeRegistry::default());
    h.connect_and_accept(1);
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        h.at(i as u64 * 10);
        h.command(cmd(id, "edge.ping", ""));
        h.edge
            .report_outcome(h.now, id, Outcome::Succeeded, "", BTreeMap::new())
            .unwrap();
    }
    h.flush();
    // "a" was evicted (oldest first): reported as unknown, and a new run is accepted.
    assert_eq!(
        h.edge.report_running(h.now, "a", "", BTreeMap::new()),
        Err(ReportError::UnknownCommand("a".into()))
    );
    h.transport_closed();
    h.now = h.edge.poll_connect_at().unwrap();
    assert_eq!(h.connect().inflight_command_ids, ["c", "b"]);
    h.transport_closed();
    // After the retention window, none are held.
    h.now = h
        .edge
        .poll_connect_at()
        .unwrap()
        .max(Instant::from_millis(600_020));
    h.edge.handle_timeout(h.now);
    assert!(h.connect().inflight_command_ids.is_empty());
    h.accept_with(accepted(3, 1_000));
    h.events();
    let frames = h.command(cmd("b", "edge.ping", ""));
    assert!(as_command_response(&frames[0]).accepted);
    assert!(
        matches!(&h.events()[..], [EdgeEvent::CommandReceived { command_id, .. }] if command_id == "b"),
        "b runs again"
    );
}

#[test]
fn shutdown_cancels_running_commands_and_closes_for_good() {
    let mut h = connected();
    h.command(cmd("c1", "edge.ping", ""));
    h.command(cmd("c2", "edge.ping", ""));
    h.edge
        .report_outcome(h.now, "c2", Outcome::Succeeded, "", BTreeMap::new())
        .unwrap();
    h.flush();
    h.events();
    h.edge.shutdown(h.now);
    h.edge.shutdown(h.now);
    let frames = h.flush();
    assert_eq!(frames.len(), 2, "{frames:?}");
    let e = as_command_event(&frames[0]);
    assert_eq!(
        (e.command_id.as_str(), e.phase),
        ("c1", CommandPhase::Cancelled as i32)
    );
    assert_eq!(go_away_reason(&frames[1]), GoAwayReason::Shutdown);
    assert!(h.close_requested);
    assert_eq!(
        h.events(),
        [EdgeEvent::Closed {
            reason: CloseReason::Shutdown,
            reconnect_at: None
        }]
    );
    h.transport_closed();
    assert!(h.edge.is_shut_down());
    assert_eq!(h.edge.poll_connect_at(), None);
    assert!(h.edge.handle_connected(h.now).is_err());
    assert_eq!(
        h.edge.report_running(h.now, "c1", "", BTreeMap::new()),
        Err(ReportError::ShutDown)
    );
}

#[test]
fn shutdown_while_disconnected_stops_dialling() {
    let mut h = Harness::default_edge();
    h.edge.shutdown(h.now);
    assert!(h.edge.is_shut_down());
    assert_eq!(h.edge.poll_connect_at(), None);
    assert!(h.events().is_empty());
}

#[test]
fn the_hello_lists_every_held_command() {
    let mut h = Harness::new(config(), FakeRegistry::default());
    h.connect_and_accept(1);
    let id = |i: usize| format!("{i:04}-{}", "x".repeat(120));
    for i in 0..600 {
        h.command(cmd(&id(i), "edge.ping", ""));
        if i >= 5 {
            h.edge
                .report_outcome(h.now, &id(i), Outcome::Succeeded, "", BTreeMap::new())
                .unwrap();
        }
    }
    h.flush();
    h.transport_closed();
    h.now = h.edge.poll_connect_at().unwrap();
    let hello = h.connect();
    let listed = &hello.inflight_command_ids;
    assert_eq!(listed.len(), 600, "none is left out");
    // Running commands first, then the most recently finished.
    assert_eq!(listed[..5], (0..5).map(id).collect::<Vec<_>>()[..]);
    assert_eq!(listed[5], id(599));
    // Every listed command gets its latest event replayed.
    let frames = h.accept_with(accepted(2, 1_000));
    let replayed: Vec<String> = frames[1..]
        .iter()
        .map(|f| as_command_event(f).command_id.clone())
        .collect();
    let mut expected = listed.clone();
    expected.sort();
    assert_eq!(replayed, expected);
}
