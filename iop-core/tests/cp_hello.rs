//! PROTOCOL.md §4.1: the hello, its checks in order, duplicates, stale closes, hello timeout.

use std::time::Duration;

use iop_core::cp::{
    AllowList, CloseReason, CpEvent, Credential, DuplicatePolicy, EnrolmentPolicy,
    ProtocolViolation, Reachability,
};
use iop_core::proto::{self, BodyKind, Envelope, GoAwayReason, HelloRejectReason, Message};
use iop_core::testing::scripted::edges::*;

fn policy() -> EnrolmentPolicy {
    EnrolmentPolicy::AllowList(AllowList::new().with("edge-1", &Credential::new("right")))
}

fn with_cred(mut h: proto::EdgeHelloRequest, c: &str) -> proto::EdgeHelloRequest {
    h.credential = c.as_bytes().to_vec();
    h
}

/// Sends `h` on a fresh connection of a draining CP with an allow list, and returns the
/// reject reason (or UNSPECIFIED when accepted).
fn verdict(h: proto::EdgeHelloRequest) -> (HelloRejectReason, proto::EdgeHelloResponse, Pair) {
    let mut t = harness_with(cfg(), policy());
    t.cp.drain();
    let (conn, resp) = t.hello_with(h);
    if !resp.accepted {
        assert!(t.is_closed(conn), "a rejection closes after the response");
    }
    (resp.reject_reason(), resp, t)
}

#[test]
fn rejections_follow_the_spec_order() {
    // Every later check would also fail; the earliest in PROTOCOL.md §4.1.2 order wins.
    let mut h = with_cred(hello("   ", &[]), "wrong");
    h.protocol_version = 0;
    assert_eq!(verdict(h).0, HelloRejectReason::EmptyEdgeId);
    let mut h = with_cred(hello("", &[]), "wrong");
    h.protocol_version = 99;
    assert_eq!(verdict(h).0, HelloRejectReason::EmptyEdgeId);

    let mut h = with_cred(hello("bad id/with slash", &[]), "wrong");
    h.protocol_version = 99;
    assert_eq!(verdict(h).0, HelloRejectReason::InvalidHello);
    let mut h = with_cred(hello("edge-1", &[]), "wrong");
    h.protocol_version = 0;
    assert_eq!(verdict(h).0, HelloRejectReason::InvalidHello);
    let h = with_cred(hello(&"é".repeat(64), &[]), "right");
    assert_eq!(verdict(h).0, HelloRejectReason::InvalidHello);

    let mut cfg2 = cfg();
    cfg2.min_protocol_version = 2;
    cfg2.max_protocol_version = 3;
    let mut t = harness_with(cfg2, policy());
    t.cp.drain();
    let (_, resp) = t.hello_with(with_cred(hello("unknown-edge", &[]), "wrong"));
    assert_eq!(
        resp.reject_reason(),
        HelloRejectReason::UnsupportedProtocolVersion
    );
    assert_eq!(
        (resp.min_protocol_version, resp.max_protocol_version),
        (2, 3)
    );

    assert_eq!(
        verdict(with_cred(hello("unknown-edge", &[]), "right")).0,
        HelloRejectReason::UnknownEdge
    );
    assert_eq!(
        verdict(with_cred(hello("edge-1", &[]), "wrong")).0,
        HelloRejectReason::BadCredential
    );
    let (reason, resp, _) = verdict(with_cred(hello("edge-1", &[]), "right"));
    assert_eq!(reason, HelloRejectReason::Draining);
    assert_eq!(resp.retry_after_ms, 10_000);
}

#[test]
fn a_newer_edge_version_negotiates_down() {
    let mut t = harness();
    let mut h = hello("edge-1", &[]);
    h.protocol_version = 7;
    let (_, resp) = t.hello_with(h);
    assert!(resp.accepted);
    assert_eq!(resp.protocol_version, proto::PROTOCOL_VERSION);
    assert_eq!(resp.max_frame_len, proto::DEFAULT_MAX_FRAME_LEN);
    assert_eq!(resp.heartbeat_interval_ms, 5_000);
}

#[test]
fn accepted_hello_with_the_right_credential() {
    let mut t = harness_with(cfg(), policy());
    let (_, resp) = t.hello_with(with_cred(hello("edge-1", &[]), "right"));
    assert!(resp.accepted);
    assert_eq!(resp.reject_reason(), HelloRejectReason::Unspecified);
}

#[test]
fn credentials_never_leak_into_events_or_frames() {
    let secret = "S3CRET-do-not-log";
    let mut t = harness_with(
        cfg(),
        EnrolmentPolicy::AllowList(AllowList::new().with("edge-1", &Credential::new(secret))),
    );
    let (ok, _) = t.hello_with(with_cred(hello("edge-1", &[]), secret));
    let (bad, _) = t.hello_with(with_cred(hello("edge-1", &[]), "S3CRET-wrong"));
    t.drop_transport(ok);
    let dump = format!("{:?} {:?} {:?}", t.cp_events, t.cp.enrolment_policy(), t.cp);
    assert!(!dump.contains("S3CRET"), "{dump}");
    for conn in [ok, bad] {
        let bytes = &t.scripted(conn).unwrap().bytes;
        assert!(!bytes.windows(6).any(|w| w == b"S3CRET"));
    }
}

#[test]
fn session_ids_strictly_increase_from_the_floor() {
    let mut c = cfg();
    c.session_id_floor = 1_000;
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    let mut last = 1_000;
    for i in 0..5 {
        let (_, resp) = t.hello_with(hello(&format!("edge-{}", i % 2), &[]));
        assert!(resp.session_id > last);
        last = resp.session_id;
    }
    assert_eq!(last, 1_005);
}

#[test]
fn replace_supersedes_the_old_session_and_its_close_is_stale() {
    let mut t = harness();
    let (old, old_sid) = t.enrol("edge-1", &[]);
    let (new, resp) = t.hello_with(hello("edge-1", &[]));
    assert!(resp.accepted);
    assert!(resp.session_id > old_sid);
    let frames = t.take_frames(old);
    assert_eq!(
        go_away(&frames),
        Some((GoAwayReason::Superseded as i32, 5_000))
    );
    assert!(t.is_closed(old));
    let events = t.take_events();
    assert!(events.iter().any(|e| matches!(e,
        CpEvent::Closed { conn, reason: CloseReason::Superseded { by_session_id }, .. }
            if *conn == old && *by_session_id == resp.session_id)));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, CpEvent::EdgeDisconnected { .. })),
        "a superseded session's close never disconnects the live edge"
    );
    // The old transport's EOF arrives later: still stale.
    t.drop_transport(old);
    assert!(t.take_events().is_empty());
    let view = t.cp.edge("edge-1").unwrap();
    assert_eq!(view.reachability, Reachability::Connected);
    assert_eq!(view.session_id, resp.session_id);
    assert_eq!(t.cp.live_conn("edge-1"), Some(new));
    assert_eq!(t.cp.stats().supersessions, 1);
    assert_eq!(view_supersessions(&t), 1);
}

#[test]
fn frames_on_a_superseded_session_are_dropped() {
    let mut t = harness();
    let (old, _) = t.enrol("edge-1", &[]);
    t.hello_with(hello("edge-1", &[]));
    t.take_events();
    t.send(
        old,
        node_event("edge-1", proto::NodeEventKind::NodeReady, 2),
    );
    t.send(old, heartbeat(1));
    assert!(t.take_events().is_empty());
}

#[test]
fn flapping_is_surfaced_with_both_instance_ids() {
    let mut t = harness();
    let mut events = Vec::new();
    for i in 0..4 {
        let mut h = hello("edge-1", &[]);
        h.metadata
            .insert("iop.instance_id".into(), format!("proc-{}", i % 2));
        t.hello_with(h);
        events.extend(t.take_events());
    }
    let sup: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            CpEvent::EdgeSuperseded {
                old_instance_id,
                new_instance_id,
                total_supersessions,
                flapping,
                ..
            } => Some((
                old_instance_id.clone(),
                new_instance_id.clone(),
                *total_supersessions,
                *flapping,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(sup.len(), 3);
    assert_eq!(
        sup[0],
        (Some("proc-0".into()), Some("proc-1".into()), 1, false)
    );
    assert_eq!(sup[2].2, 3);
    assert!(sup[2].3, "3 supersessions within a minute is flapping");
}

#[test]
fn reject_policy_refuses_the_duplicate_and_keeps_the_live_session() {
    let mut c = cfg();
    c.duplicate_policy = DuplicatePolicy::Reject;
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    let (live, sid) = t.enrol("edge-1", &[]);
    let (dup, resp) = t.hello_with(hello("edge-1", &[]));
    assert!(!resp.accepted);
    assert_eq!(resp.reject_reason(), HelloRejectReason::DuplicateEdge);
    assert_eq!(resp.retry_after_ms, 5_000);
    assert!(t.is_closed(dup));
    assert!(!t.is_closed(live));
    assert!(t.take_frames(live).is_empty());
    let events = t.take_events();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, CpEvent::EdgeDisconnected { .. }))
    );
    assert_eq!(t.cp.edge("edge-1").unwrap().session_id, sid);
    // DRAINING comes before the duplicate check.
    t.cp.drain();
    let (_, resp) = t.hello_with(hello("edge-1", &[]));
    assert_eq!(resp.reject_reason(), HelloRejectReason::Draining);
    let mut t = {
        let mut c = cfg();
        c.duplicate_policy = DuplicatePolicy::Reject;
        harness_with(c, EnrolmentPolicy::AcceptAny)
    };
    let (live, _) = t.enrol("edge-1", &[]);
    // Once the live one ends, the Edge may come back.
    t.drop_transport(live);
    assert!(t.hello_with(hello("edge-1", &[])).1.accepted);
}

#[test]
fn a_live_sessions_transport_close_disconnects_the_edge() {
    let mut t = harness();
    let (conn, sid) = t.enrol("edge-1", &[]);
    t.drop_transport(conn);
    let events = t.take_events();
    assert!(events.contains(&CpEvent::EdgeDisconnected {
        edge_id: "edge-1".into(),
        session_id: sid,
        reason: CloseReason::TransportClosed
    }));
    assert_eq!(
        t.cp.edge("edge-1").unwrap().reachability,
        Reachability::Disconnected
    );
    assert_eq!(t.cp.connection_count(), 0);
}

#[test]
fn hello_timeout_sends_go_away_and_closes() {
    let mut t = harness();
    let conn = t.connect();
    t.advance(Duration::from_millis(9_999));
    assert!(!t.is_closed(conn));
    t.advance(Duration::from_millis(1));
    assert_eq!(
        go_away(&t.take_frames(conn)),
        Some((GoAwayReason::HelloTimeout as i32, 0))
    );
    assert!(t.is_closed(conn));
    assert!(matches!(
        t.closed_events()[..],
        [CpEvent::Closed {
            reason: CloseReason::HelloTimeout,
            ..
        }]
    ));
}

#[test]
fn other_frames_before_the_hello_are_protocol_errors() {
    for env in [
        heartbeat(1),
        Envelope::default_with_corr(),
        status_response(1, "e", 1),
    ] {
        let mut t = harness();
        let conn = t.connect();
        let kind = env.kind();
        t.send(conn, env);
        assert_eq!(
            go_away(&t.take_frames(conn)),
            Some((GoAwayReason::ProtocolError as i32, 0))
        );
        assert!(t.is_closed(conn));
        assert!(t.cp_events.iter().any(|e| matches!(e,
            CpEvent::Closed { reason: CloseReason::ProtocolError(ProtocolViolation::BeforeHello(k)), .. } if *k == kind)));
    }
}

trait DefaultWithCorr {
    fn default_with_corr() -> Envelope;
}
impl DefaultWithCorr for Envelope {
    /// An envelope with no body (encodable thanks to a correlation id).
    fn default_with_corr() -> Envelope {
        Envelope {
            correlation_id: 9,
            body: None,
        }
    }
}

#[test]
fn unknown_bodies_after_the_hello_are_counted_and_ignored() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    t.send(conn, Envelope::default_with_corr());
    assert!(!t.is_closed(conn));
    assert_eq!(t.cp.stats().unknown_bodies, 1);
    assert_eq!(BodyKind::Empty, Envelope::default_with_corr().kind());
}

#[test]
fn a_second_hello_is_a_protocol_error() {
    let mut t = harness();
    let (conn, _) = t.enrol("edge-1", &[]);
    t.send(conn, hello("edge-1", &[]));
    assert!(t.is_closed(conn));
    assert!(t.cp_events.iter().any(|e| matches!(
        e,
        CpEvent::Closed {
            reason: CloseReason::ProtocolError(ProtocolViolation::SecondHello),
            ..
        }
    )));
}

#[test]
fn pre_hello_frames_are_capped_at_256_kib() {
    let mut t = harness();
    let conn = t.connect();
    // Only the length prefix is needed: the decoder refuses it at once.
    t.send_raw(conn, &(256 * 1024 + 1u32).to_be_bytes());
    assert!(t.is_closed(conn));
    assert!(t.cp_events.iter().any(|e| matches!(
        e,
        CpEvent::Closed {
            reason: CloseReason::ProtocolError(ProtocolViolation::Frame(
                proto::FrameError::TooLarge { max: 262_144, .. }
            )),
            ..
        }
    )));
    // After acceptance the configured limit applies.
    let (conn, _) = t.enrol("edge-1", &[]);
    let req = t.cp.request_status(t.now, "edge-1", vec![]).unwrap();
    t.pump();
    let big = big_status_response(req.correlation_id, "edge-1", 300 * 1024);
    assert!(big.encoded_len() > 256 * 1024);
    t.send(conn, big);
    assert!(
        !t.is_closed(conn),
        "a 300 KiB frame is fine after the hello"
    );
    assert!(
        t.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::StatusReceived { .. }))
    );
}

#[test]
fn drain_refuses_new_hellos_but_keeps_sessions() {
    let mut t = harness();
    let (live, _) = t.enrol("edge-1", &[]);
    t.cp.drain();
    assert!(t.cp.is_draining());
    let (c, resp) = t.hello_with(hello("edge-2", &[]));
    assert_eq!(resp.reject_reason(), HelloRejectReason::Draining);
    assert_eq!(resp.retry_after_ms, 10_000);
    assert!(t.is_closed(c));
    assert!(!t.is_closed(live));
}

#[test]
fn shutdown_sends_go_away_to_every_connection() {
    let mut t = harness();
    let (a, _) = t.enrol("edge-1", &[]);
    let b = t.connect();
    t.cp.shutdown(t.now);
    t.pump();
    for conn in [a, b] {
        assert_eq!(
            go_away(&t.take_frames(conn)),
            Some((GoAwayReason::Shutdown as i32, 0))
        );
        assert!(t.is_closed(conn));
    }
    assert_eq!(t.closed_events().len(), 2);
    let late = t.connect();
    assert_eq!(
        go_away(&t.take_frames(late)),
        Some((GoAwayReason::Shutdown as i32, 0))
    );
    assert!(t.is_closed(late));
}

#[test]
fn revoke_ends_the_session_and_the_enrolment() {
    let mut t = harness_with(cfg(), policy());
    let (conn, _) = t.hello_with(with_cred(hello("edge-1", &[]), "right"));
    t.take_events();
    t.cp.revoke(t.now, "edge-1").unwrap();
    t.pump();
    assert_eq!(
        go_away(&t.take_frames(conn)),
        Some((GoAwayReason::CredentialRevoked as i32, 0))
    );
    assert!(t.is_closed(conn));
    assert!(t.cp_events.iter().any(|e| matches!(
        e,
        CpEvent::EdgeDisconnected {
            reason: CloseReason::CredentialRevoked,
            ..
        }
    )));
    let (_, resp) = t.hello_with(with_cred(hello("edge-1", &[]), "right"));
    assert_eq!(resp.reject_reason(), HelloRejectReason::UnknownEdge);
    assert!(t.cp.revoke(t.now, "edge-9").is_err());
}

#[test]
fn a_new_policy_revokes_sessions_it_no_longer_admits() {
    let mut t = harness();
    let mut h1 = hello("edge-1", &[]);
    h1.credential = b"one".to_vec();
    let (c1, _) = t.hello_with(h1);
    let mut h2 = hello("edge-2", &[]);
    h2.credential = b"two".to_vec();
    let (c2, _) = t.hello_with(h2);
    let (c3, _) = t.hello_with(hello("edge-3", &[]));
    let list = AllowList::new()
        .with("edge-1", &Credential::new("one"))
        .with("edge-2", &Credential::new("rotated"));
    t.cp.set_enrolment_policy(t.now, EnrolmentPolicy::AllowList(list));
    t.pump();
    assert!(!t.is_closed(c1));
    for c in [c2, c3] {
        assert_eq!(
            go_away(&t.take_frames(c)),
            Some((GoAwayReason::CredentialRevoked as i32, 0))
        );
        assert!(t.is_closed(c));
    }
}

#[test]
fn the_connection_cap_refuses_with_overloaded() {
    let mut c = cfg();
    c.max_connections = 2;
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    let a = t.connect();
    let _b = t.connect();
    let over = t.connect();
    assert_eq!(
        go_away(&t.take_frames(over)),
        Some((GoAwayReason::Overloaded as i32, 10_000))
    );
    assert!(t.is_closed(over));
    assert_eq!(t.cp.stats().overloaded, 1);
    // A slot frees up: the next one is served.
    t.drop_transport(a);
    let d = t.connect();
    assert!(!t.is_closed(d));
}

fn view_supersessions(t: &Pair) -> u64 {
    t.cp.edge("edge-1").unwrap().supersessions
}

#[test]
fn an_over_long_edge_id_is_refused_by_the_decoder_as_a_protocol_error() {
    // iop-proto enforces the 128-byte id cap before decoding (its decode limits), so
    // such a hello never reaches the INVALID_HELLO check.
    let mut t = harness();
    let conn = t.connect();
    t.send(conn, hello(&"x".repeat(129), &[]));
    assert!(t.is_closed(conn));
    assert!(t.cp_events.iter().any(|e| matches!(
        e,
        CpEvent::Closed {
            reason: CloseReason::ProtocolError(ProtocolViolation::Frame(
                proto::FrameError::LimitExceeded(_)
            )),
            ..
        }
    )));
}
