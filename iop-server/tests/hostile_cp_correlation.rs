//! Hostile Edges answering what was never asked: status responses with forged
//! correlation ids or another Edge's id, command responses and events for unknown
//! ids, and frames from a superseded session. Each test checks the typed outcome
//! (protocol error, or counted and dropped with the session kept) and that a good
//! Edge connected beforehand is undisturbed.

mod hostile_support;
// The runtime tests' helpers, shared with iop-tokio's own tests.
#[path = "../../iop-tokio/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use hostile_support::*;
use iop_tokio::core::cp::{CloseReason, CpEvent, ProtocolViolation};
use iop_tokio::core::proto::{
    Body, CommandPhase, EdgeCommandEvent, EdgeCommandResponse, EdgeStatusResponse, Envelope,
    GoAwayReason,
};
use iop_tokio::{ControlPlaneHandle, ControlPlaneServer, StatusRequestError, Subscription};
use support::*;

struct Setup {
    server: ControlPlaneServer,
    cp: ControlPlaneHandle,
    events: Subscription<CpEvent>,
    good: GoodEdge,
}

async fn setup() -> Setup {
    let mut config = fast_server();
    config.cp.status_timeout = Duration::from_millis(300);
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let good = good_edge(server.local_addr(), "good").await;
    let events = cp.subscribe();
    Setup {
        server,
        cp,
        events,
        good,
    }
}

impl Setup {
    /// A hostile Edge with an accepted session, and the correlation id of the status
    /// request the Control Plane sent it at once (resync).
    async fn attacker(&self, edge_id: &str) -> (Attacker, u64) {
        let mut attacker = Attacker::connect(self.server.local_addr()).await;
        attacker.hello(edge_id).await;
        let correlation = attacker.next_status_request().await;
        assert!(correlation > 0);
        (attacker, correlation)
    }

    async fn closed(&mut self, edge: &str) -> CloseReason {
        next_cp(&mut self.events, "attacker closed", |e| match e {
            CpEvent::Closed {
                edge_id, reason, ..
            } if edge_id.as_deref() == Some(edge) => Some(reason.clone()),
            _ => None,
        })
        .await
    }

    async fn finish(self) {
        self.good.assert_undisturbed(&self.cp).await;
        self.good.edge.shutdown().await;
        self.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_status_response_for_a_correlation_id_never_issued_is_a_protocol_error() {
    let mut s = setup().await;
    let (mut attacker, issued) = s.attacker("attacker").await;
    attacker
        .write(&status_response(issued + 1, "attacker"))
        .await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    assert_eq!(
        s.closed("attacker").await,
        CloseReason::ProtocolError(ProtocolViolation::NeverIssuedCorrelationId(issued + 1))
    );
    s.finish().await;
}

#[tokio::test]
async fn a_status_response_with_correlation_id_zero_is_a_protocol_error() {
    let mut s = setup().await;
    let (mut attacker, _) = s.attacker("attacker").await;
    attacker.write(&status_response(0, "attacker")).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    assert_eq!(
        s.closed("attacker").await,
        CloseReason::ProtocolError(ProtocolViolation::NeverIssuedCorrelationId(0))
    );
    s.finish().await;
}

#[tokio::test]
async fn a_status_response_with_another_edges_id_is_a_protocol_error() {
    let mut s = setup().await;
    let (mut attacker, issued) = s.attacker("attacker").await;
    // Claims to be the good Edge.
    attacker.write(&status_response(issued, "good")).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    assert_eq!(
        s.closed("attacker").await,
        CloseReason::ProtocolError(ProtocolViolation::StatusEdgeIdMismatch)
    );
    // The good Edge's view was not touched by it.
    assert_eq!(s.cp.edge("good").unwrap().session_id, s.good.session_id);
    s.finish().await;
}

#[tokio::test]
async fn a_late_status_response_is_counted_and_dropped() {
    let s = setup().await;
    let (mut attacker, resync) = s.attacker("attacker").await;
    // Let the CP's own request time out.
    let outcome = bounded("status timeout", s.cp.request_status("attacker", vec![])).await;
    assert!(
        matches!(outcome, Err(StatusRequestError::TimedOut)),
        "{outcome:?}"
    );
    let late = s.cp.stats().late_status_responses;
    // Both issued requests have timed out by now; answer both.
    let second = attacker.next_status_request().await;
    assert!(second > resync);
    attacker.write(&status_response(resync, "attacker")).await;
    attacker.write(&status_response(second, "attacker")).await;
    attacker.ping(1).await;
    assert_eq!(s.cp.stats().late_status_responses, late + 2);
    assert!(s.cp.edge("attacker").unwrap().last_status.is_none());
    s.finish().await;
}

#[tokio::test]
async fn command_responses_and_events_for_unknown_ids_are_counted_and_dropped() {
    let s = setup().await;
    let (mut attacker, _) = s.attacker("attacker").await;
    let before = s.cp.stats().unknown_command_ids;
    for i in 0..50 {
        // Half of them with control characters (NUL, newline, an ANSI escape).
        let id = if i % 2 == 0 {
            format!("cmd-never-sent-{i}")
        } else {
            format!("cmd\u{0}\n\u{1b}[31m{i}")
        };
        attacker
            .write(&envelope_frame(&Envelope::new(EdgeCommandResponse {
                command_id: id.clone(),
                accepted: true,
                ..Default::default()
            })))
            .await;
        attacker
            .write(&envelope_frame(&Envelope::new(EdgeCommandEvent {
                command_id: id,
                sequence: 1,
                phase: CommandPhase::Succeeded as i32,
                ..Default::default()
            })))
            .await;
    }
    // The session carries on.
    attacker.ping(1).await;
    assert_eq!(s.cp.stats().unknown_command_ids, before + 100);
    assert!(s.cp.command("cmd-never-sent-0").is_none());
    assert_eq!(s.cp.stats().live_sessions, 2);
    s.finish().await;
}

#[tokio::test]
async fn frames_from_a_superseded_session_do_not_touch_the_live_sessions_view() {
    let mut s = setup().await;
    let (mut old, old_request) = s.attacker("twin").await;
    let old_session = s.cp.edge("twin").unwrap().session_id;
    let (mut new, new_request) = s.attacker("twin").await;
    let new_session = s.cp.edge("twin").unwrap().session_id;
    assert!(new_session > old_session);
    // The live session answers its status: 7 ms after the epoch.
    new.write(&envelope_frame(&Envelope::correlated(
        new_request,
        EdgeStatusResponse {
            edge_id: "twin".into(),
            observed_at_unix_ms: 7,
            ..Default::default()
        },
    )))
    .await;
    new.ping(1).await;
    // The old one, told it is superseded, keeps talking as if it were live.
    old.write(&envelope_frame(&Envelope::correlated(
        old_request,
        EdgeStatusResponse {
            edge_id: "twin".into(),
            observed_at_unix_ms: 99_999,
            truncated: true,
            ..Default::default()
        },
    )))
    .await;
    old.write(&envelope_frame(&Envelope::new(EdgeCommandEvent {
        command_id: "cmd-from-the-past".into(),
        sequence: 1,
        phase: CommandPhase::Failed as i32,
        ..Default::default()
    })))
    .await;
    let bodies = old.expect_go_away(GoAwayReason::Superseded).await;
    let Some(Body::GoAway(g)) = bodies.last() else {
        unreachable!()
    };
    assert_eq!(g.retry_after_ms, 5_000);
    assert!(matches!(
        s.closed("twin").await,
        CloseReason::Superseded { by_session_id } if by_session_id == new_session
    ));
    // The live session is untouched: same id, the status it sent, still answering.
    new.ping(2).await;
    let view = s.cp.edge("twin").unwrap();
    assert_eq!(view.session_id, new_session);
    let status = view.last_status.expect("the live session's status");
    assert_eq!(status.session_id, new_session);
    assert_eq!(status.observed_at_unix_ms, 7);
    assert!(!status.truncated);
    assert!(s.cp.command("cmd-from-the-past").is_none());
    s.finish().await;
}

#[tokio::test]
async fn an_edge_that_never_answers_status_holds_at_most_64_requests() {
    let s = setup().await;
    let (_attacker, _resync) = s.attacker("mute").await;
    // The resync request is the first of the 64; 100 more are asked at once.
    let asks: Vec<_> = (0..100)
        .map(|_| {
            let cp = s.cp.clone();
            tokio::spawn(async move { cp.request_status("mute", vec![]).await })
        })
        .collect();
    let (mut refused, mut timed_out) = (0, 0);
    for ask in asks {
        match bounded("status outcome", ask).await.unwrap() {
            Err(StatusRequestError::Refused(
                iop_tokio::core::cp::StatusError::TooManyInFlight { .. },
            )) => refused += 1,
            Err(StatusRequestError::TimedOut) => timed_out += 1,
            other => panic!("{other:?}"),
        }
    }
    // 63 beside the resync request (64 if that one had already timed out).
    assert_eq!(timed_out + refused, 100);
    assert!(
        (63..=64).contains(&timed_out),
        "{timed_out} timed out, {refused} refused"
    );
    // Timed-out requests free their slots.
    let again = bounded("status again", s.cp.request_status("mute", vec![])).await;
    assert!(
        matches!(again, Err(StatusRequestError::TimedOut)),
        "{again:?}"
    );
    s.finish().await;
}
