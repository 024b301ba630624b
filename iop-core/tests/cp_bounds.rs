//! The Control Plane's bounds against requests and peers that never end (PROTOCOL.md §4.4,
//! §4.1, §7): the poison bound on a command no session survives, the pending-hello
//! cap, the bounded views of disconnected Edges, and a truncated status that is not
//! a fresh view.

use std::time::Duration;

use iop_core::cp::Ending;
use iop_core::cp::{CommandOutcome, CommandSpec, CpEvent, EnrolmentPolicy, ForgetReason};
use iop_core::proto::{Body, EdgeStatusResponse, Envelope, GoAwayReason};
use iop_core::testing::scripted::edges::*;

fn command_requests(frames: &[Envelope]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| match &f.body {
            Some(Body::CommandRequest(r)) => Some(r.command_id.clone()),
            _ => None,
        })
        .collect()
}

/// A peer that closes every session the command is sent on: after the third such
/// session the command is FAILED "undeliverable" and the fourth never gets it.
#[test]
fn a_command_no_session_survives_is_failed_undeliverable_after_three() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &["op"]);
    let id =
        t.cp.send_command(t.now, "edge-1", CommandSpec::new("op"))
            .unwrap();
    t.pump();
    let mut conn = conn;
    for session in 1..=3 {
        assert_eq!(
            command_requests(&t.take_frames(conn)),
            std::slice::from_ref(&id),
            "sent on session {session}"
        );
        // The peer closes on it, without an answer.
        t.drop_transport(conn);
        let undeliverable = t.take_events().into_iter().find_map(|e| match e {
            CpEvent::CommandEnded {
                command_id,
                ending: Ending::Undeliverable { sessions, .. },
                ..
            } => Some((command_id, sessions)),
            _ => None,
        });
        if session < 3 {
            assert_eq!(undeliverable, None);
            assert!(t.cp.command("edge-1", &id).unwrap().outcome.is_none());
            conn = t.hello_with(hello("edge-1", &["op"])).0;
        } else {
            assert_eq!(undeliverable, Some((id.clone(), 3)));
        }
    }
    assert_eq!(
        t.cp.command("edge-1", &id).unwrap().outcome,
        Some(CommandOutcome::Ended(Ending::Undeliverable {
            sessions: 3,
            session_ids: (1..=3)
                .map(|n| n + t.cp.config().session_id_floor)
                .collect()
        }))
    );
    assert_eq!(t.cp.stats().commands_undeliverable, 1);
    // Never sent again: the next session gets none, and keeps going.
    let (conn, _) = t.hello_with(hello("edge-1", &["op"]));
    assert!(command_requests(&t.take_frames(conn)).is_empty());
    assert!(!t.is_closed(conn));
    // And if the Edge had it after all (its answer lost with a session), what it
    // replays is dropped, not a protocol error.
    t.send(
        conn,
        cmd_event(&id, iop_core::proto::CommandPhase::Accepted, 1),
    );
    assert!(!t.is_closed(conn));
    assert_eq!(t.cp.stats().unknown_command_ids, 1);
}

/// A session superseded by a new hello (its Edge restarted behind a half-open
/// connection, say) ended as surely as a closed one: each that carried the request
/// unanswered counts, and the failure names the sessions.
#[test]
fn superseded_sessions_count_toward_undeliverable() {
    let mut t = harness();
    let (mut conn, mut session_id) = t.enrol("edge-1", &["op"]);
    let id =
        t.cp.send_command(t.now, "edge-1", CommandSpec::new("op"))
            .unwrap();
    t.pump();
    let mut sessions = Vec::new();
    for _ in 0..3 {
        assert_eq!(
            command_requests(&t.take_frames(conn)),
            std::slice::from_ref(&id)
        );
        sessions.push(session_id);
        // A new hello while the old connection is still open.
        let (next, resp) = t.hello_with(hello("edge-1", &["op"]));
        assert!(resp.accepted);
        (conn, session_id) = (next, resp.session_id);
    }
    let undeliverable = t.take_events().into_iter().find_map(|e| match e {
        CpEvent::CommandEnded {
            command_id,
            ending:
                Ending::Undeliverable {
                    sessions,
                    session_ids,
                },
            ..
        } => Some((command_id, sessions, session_ids)),
        _ => None,
    });
    assert_eq!(undeliverable, Some((id.clone(), 3, sessions)));
    assert!(command_requests(&t.take_frames(conn)).is_empty());
}

/// Answered sessions do not count: a command answered before its session ended is
/// never undeliverable, whatever happens to later sessions.
#[test]
fn only_sessions_that_end_unanswered_count() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &["op"]);
    let id =
        t.cp.send_command(t.now, "edge-1", CommandSpec::new("op"))
            .unwrap();
    t.pump();
    t.take_frames(conn);
    t.drop_transport(conn);
    let (conn, _) = t.hello_with(hello("edge-1", &["op"]));
    t.take_frames(conn);
    t.send(conn, cmd_response(&id, true));
    for _ in 0..4 {
        let mut h = hello("edge-1", &["op"]);
        h.inflight_command_ids = vec![id.clone()];
        let (c, _) = t.hello_with(h);
        t.drop_transport(c);
    }
    assert!(t.cp.command("edge-1", &id).unwrap().outcome.is_none());
    assert_eq!(t.cp.stats().commands_undeliverable, 0);
}

#[test]
fn past_the_pending_hello_cap_a_connection_is_told_overloaded() {
    let mut c = cfg();
    c.max_pending_hellos = 2;
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    let (a, b) = (t.connect(), t.connect());
    let over = t.connect();
    assert!(t.is_closed(over));
    // The first moments of a burst: back soon (200 ms, spread over up to twice that).
    let (reason, retry) = go_away(&t.take_frames(over)).unwrap();
    assert_eq!(reason, GoAwayReason::Overloaded as i32);
    assert!((200..400).contains(&retry), "{retry}");
    assert_eq!(t.cp.stats().pending_hellos_refused, 1);
    // 100 ms on, the burst's first hellos still unanswered (each waiting on a durable
    // claim, say): no rate yet, but no stall either — still back soon.
    t.advance(Duration::from_millis(100));
    let slow = t.connect();
    let (_, retry) = go_away(&t.take_frames(slow)).unwrap();
    assert!((200..1_000).contains(&retry), "{retry}");
    // Nothing accepted for over a second: whatever holds the hellos is no burst, and
    // the refusal names the full `retry_after_overloaded`.
    t.advance(Duration::from_millis(1_100));
    t.connect();
    t.advance(Duration::from_millis(50));
    let stuck = t.connect();
    assert_eq!(
        go_away(&t.take_frames(stuck)),
        Some((GoAwayReason::Overloaded as i32, 10_000))
    );
    // An accepted hello frees its place.
    t.send(a, hello("edge-1", &[]));
    assert!(!t.is_closed(a));
    let next = t.connect();
    assert!(!t.is_closed(next) && !t.is_closed(b));
}

#[test]
fn a_burst_past_the_pending_hello_cap_is_told_to_come_back_when_it_will_have_drained() {
    let mut c = cfg();
    c.max_pending_hellos = 1_000;
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    // 500 hellos accepted in half a second: about 1 000 a second.
    for i in 0..500 {
        t.enrol(&format!("edge-{i}"), &[]);
        t.advance(Duration::from_millis(1));
    }
    for _ in 0..1_000 {
        t.connect();
    }
    // 1 000 pending at ~1 000/s, turns at half as fast again: about 0.67 s to drain,
    // the next twenty after it, each spread by up to an eighth.
    let retries: Vec<u32> = (0..20)
        .map(|_| {
            let over = t.connect();
            assert!(t.is_closed(over));
            let (reason, retry) = go_away(&t.take_frames(over)).unwrap();
            assert_eq!(reason, GoAwayReason::Overloaded as i32);
            retry
        })
        .collect();
    assert!(
        retries.iter().all(|r| (600..900).contains(r)),
        "{retries:?}"
    );
    let distinct: std::collections::BTreeSet<_> = retries.iter().collect();
    assert!(distinct.len() > 10, "retries are spread: {retries:?}");
}

fn forgotten(events: &[CpEvent]) -> Vec<(String, ForgetReason)> {
    events
        .iter()
        .filter_map(|e| match e {
            CpEvent::EdgeForgotten {
                edge_id, reason, ..
            } => Some((edge_id.clone(), *reason)),
            _ => None,
        })
        .collect()
}

/// Under accept-any every new id makes a view: a peer cycling ids grows the CP by at
/// most `max_disconnected_views`, oldest forgotten first, and every view goes
/// `disconnected_view_ttl` after its last session.
#[test]
fn views_of_disconnected_edges_are_bounded_in_number_and_age() {
    let mut c = cfg();
    c.max_disconnected_views = 3;
    c.disconnected_view_ttl = Duration::from_secs(3_600);
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    let mut events = Vec::new();
    for i in 0..5 {
        let (conn, _) = t.enrol(&format!("edge-{i}"), &["op"]);
        if i == 0 {
            t.cp.send_command(t.now, "edge-0", CommandSpec::new("op").with_id("c0"))
                .unwrap();
            t.pump();
        }
        t.advance(Duration::from_secs(1));
        t.drop_transport(conn);
        events.extend(t.take_events());
    }
    assert_eq!(
        forgotten(&events),
        [
            ("edge-0".to_owned(), ForgetReason::Evicted),
            ("edge-1".to_owned(), ForgetReason::Evicted)
        ]
    );
    // Its unfinished command ends with it.
    assert!(events.iter().any(|e| matches!(e,
        CpEvent::EdgeForgotten { edge_id, unfinished_commands, .. }
            if edge_id == "edge-0" && unfinished_commands == &["c0".to_owned()])));
    let known: Vec<String> = t.cp.edges().map(|v| v.edge_id.clone()).collect();
    assert_eq!(known, ["edge-2", "edge-3", "edge-4"]);

    // edge-3 comes back and leaves again: its age restarts from its new last session.
    // (Disconnected at 1..=5 s; edge-3 again at 15 s.)
    t.advance(Duration::from_secs(10));
    let (conn, _) = t.enrol("edge-3", &["op"]);
    t.drop_transport(conn);
    t.take_events();
    t.advance(Duration::from_secs(3_590));
    assert_eq!(
        forgotten(&t.take_events()),
        [
            ("edge-2".to_owned(), ForgetReason::Expired),
            ("edge-4".to_owned(), ForgetReason::Expired)
        ]
    );
    t.advance(Duration::from_secs(9));
    assert!(t.cp.edge("edge-3").is_some());
    t.advance(Duration::from_secs(1));
    assert!(t.cp.edge("edge-3").is_none());
    assert_eq!(t.cp.stats().views_forgotten, 5);
    assert_eq!(t.cp.stats().edges_known, 0);
}

#[test]
fn a_truncated_status_is_not_a_fresh_view() {
    let mut c = cfg();
    c.auto_status_on_resync = false;
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol("edge-1", &[]);
    let req = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    let truncated = EdgeStatusResponse {
        edge_id: "edge-1".into(),
        truncated: true,
        ..Default::default()
    };
    t.send(conn, Envelope::correlated(req.correlation_id, truncated));
    let view = t.cp.edge("edge-1").unwrap();
    assert!(!view.fresh, "a partial answer is not the fresh view");
    assert!(view.last_status.as_ref().unwrap().truncated);
    // A complete one is.
    let req = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    t.send(conn, status_response(req.correlation_id, "edge-1", 2));
    assert!(t.cp.edge("edge-1").unwrap().fresh);
}

/// An Edge away for longer than it remembers a command (the longest timeout of its
/// open commands, then its finished-id retention) can never tell their outcome: they
/// are FAILED as abandoned, once, and never sent again. An Edge back before then
/// keeps them.
#[test]
fn commands_of_an_edge_away_longer_than_it_remembers_are_abandoned() {
    let mut c = cfg();
    c.edge_command_retention = Some(Duration::from_secs(600));
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol("edge-1", &["op"]);
    let accepted =
        t.cp.send_command(t.now, "edge-1", CommandSpec::new("op").with_id("a"))
            .unwrap();
    let long = CommandSpec::new("op").with_timeout_ms(300_000);
    let pending =
        t.cp.send_command(t.now, "edge-1", long.with_id("p"))
            .unwrap();
    t.pump();
    t.send(conn, cmd_response(&accepted, true));
    t.drop_transport(conn);
    t.take_events();

    // Back within the window: nothing is abandoned, even after it.
    t.advance(Duration::from_secs(800));
    let (conn, _) = t.hello_with(hello_holding("edge-1", &["op"], &[&accepted]));
    t.take_frames(conn);
    // Past the deadline it had, heard from all along.
    for sequence in 1..=40 {
        t.advance(Duration::from_secs(5));
        t.send(conn, heartbeat(sequence));
    }
    assert!(!t.is_closed(conn));
    assert_eq!(t.cp.stats().commands_abandoned, 0);
    t.drop_transport(conn);
    t.take_events();

    // Away for good: the longest open timeout (300 s) plus the retention (600 s).
    t.advance(Duration::from_secs(899));
    assert!(t.take_events().is_empty());
    assert_eq!(t.cp.poll_timeout(), Some(t.now + Duration::from_secs(1)));
    t.advance(Duration::from_secs(1));
    let abandoned: Vec<(String, Duration)> = t
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            CpEvent::CommandEnded {
                command_id,
                ending: Ending::Abandoned { disconnected_for },
                ..
            } => Some((command_id, disconnected_for)),
            _ => None,
        })
        .collect();
    let away = Duration::from_secs(900);
    assert_eq!(
        abandoned,
        [(accepted.clone(), away), (pending.clone(), away)]
    );
    for id in [&accepted, &pending] {
        assert_eq!(
            t.cp.command("edge-1", id).unwrap().outcome,
            Some(CommandOutcome::Ended(Ending::Abandoned {
                disconnected_for: away
            }))
        );
    }
    assert_eq!(t.cp.stats().commands_abandoned, 2);
    // Back at last: neither is sent again, and what the Edge says of them is dropped.
    let (conn, _) = t.hello_with(hello_holding("edge-1", &["op"], &[&accepted]));
    assert!(command_requests(&t.take_frames(conn)).is_empty());
    t.send(
        conn,
        cmd_event(&accepted, iop_core::proto::CommandPhase::Succeeded, 2),
    );
    assert!(!t.is_closed(conn));
    assert_eq!(t.cp.stats().unknown_command_ids, 1);
    assert_eq!(t.cp.stats().commands_abandoned, 2);
}

/// A hello of `edge_id` that holds `inflight`.
fn hello_holding(
    edge_id: &str,
    ops: &[&str],
    inflight: &[&str],
) -> iop_core::proto::EdgeHelloRequest {
    let mut h = hello(edge_id, ops);
    h.inflight_command_ids = inflight.iter().map(|s| (*s).to_owned()).collect();
    h
}
