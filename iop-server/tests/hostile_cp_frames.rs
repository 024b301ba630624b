//! Hostile peers against the Control Plane, malformed bytes and hellos: each test
//! attacks an in-process `ControlPlaneServer` over 127.0.0.1, asserts the typed close
//! (the `GoAway` reason read off the wire and the `Closed` reason from a
//! subscription), and that a good Edge connected beforehand keeps its session, its
//! status and its commands.

mod hostile_support;
// The runtime tests' helpers, shared with iop-tokio's own tests.
#[path = "../../iop-tokio/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use hostile_support::*;
use iop_tokio::core::cp::{CloseReason, CpEvent, ProtocolViolation};
use iop_tokio::core::proto::{
    Body, EdgeStatusRequest, Envelope, FrameError, GoAwayReason, Heartbeat, HelloRejectReason,
    LimitError,
};
use iop_tokio::{ControlPlaneHandle, ControlPlaneServer, Subscription};
use support::*;

struct Setup {
    server: ControlPlaneServer,
    cp: ControlPlaneHandle,
    events: Subscription<CpEvent>,
    good: GoodEdge,
}

async fn setup() -> Setup {
    let mut config = fast_server();
    config.cp.hello_timeout = Duration::from_millis(500);
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

/// The close reason of the first connection other than the good Edge's to close.
async fn attacker_closed(events: &mut Subscription<CpEvent>) -> CloseReason {
    next_cp(events, "attacker closed", |e| match e {
        CpEvent::Closed {
            edge_id, reason, ..
        } if edge_id.as_deref() != Some("good") => Some(reason.clone()),
        _ => None,
    })
    .await
}

impl Setup {
    async fn finish(self) {
        self.good.assert_undisturbed(&self.cp).await;
        self.good.edge.shutdown().await;
        self.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_4_gib_length_prefix_before_the_hello_is_refused_from_the_prefix_alone() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    // Only the 4 prefix bytes: the refusal cannot wait for a body.
    attacker.write(&[0xFF; 4]).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::TooLarge {
                len: 0xFFFF_FFFF,
                max: 262_144
            }))
        ),
        "{reason:?}"
    );
    s.finish().await;
}

#[tokio::test]
async fn a_4_gib_length_prefix_after_the_hello_is_refused_from_the_prefix_alone() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker.hello("attacker").await;
    attacker.write(&[0xFF; 4]).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::TooLarge {
                len: 0xFFFF_FFFF,
                ..
            }))
        ),
        "{reason:?}"
    );
    assert!(s.cp.edge("attacker").is_some_and(|v| v.session_id > 0));
    s.finish().await;
}

#[tokio::test]
async fn a_zero_length_frame_is_a_protocol_error() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker.hello("attacker").await;
    attacker.write(&[0, 0, 0, 0]).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::ZeroLength))
        ),
        "{reason:?}"
    );
    s.finish().await;
}

#[tokio::test]
async fn a_body_that_is_not_protobuf_is_a_protocol_error() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    // Wire type 7 does not exist.
    attacker.write(&frame(&[0xFF; 32])).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::Undecodable(_)))
        ),
        "{reason:?}"
    );
    s.finish().await;
}

#[tokio::test]
async fn a_truncated_frame_then_eof_closes_the_connection_quietly() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker.hello("attacker").await;
    // 1000 bytes announced, 10 sent, then the write side is closed.
    let mut partial = 1000u32.to_be_bytes().to_vec();
    partial.extend_from_slice(&[0x08; 10]);
    attacker.write(&partial).await;
    tokio::io::AsyncWriteExt::shutdown(&mut attacker.stream)
        .await
        .unwrap();
    let reason = attacker_closed(&mut s.events).await;
    assert_eq!(reason, CloseReason::TransportClosed);
    // The Control Plane hangs up too (whatever it said before).
    let (_, _) = attacker.go_away_then_eof().await;
    let disconnected = s.cp.edge("attacker").unwrap();
    assert_eq!(
        disconnected.reachability,
        iop_tokio::core::cp::Reachability::Disconnected
    );
    s.finish().await;
}

/// `depth` nested unknown groups (field 100), inside an envelope.
fn nested_groups(depth: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(depth * 4);
    for _ in 0..depth {
        body.extend_from_slice(&[0xA3, 0x06]); // field 100, start group
    }
    for _ in 0..depth {
        body.extend_from_slice(&[0xA4, 0x06]); // field 100, end group
    }
    body
}

/// `depth` nested unknown length-delimited fields (field 100), inside an envelope.
fn nested_length_delimited(depth: usize) -> Vec<u8> {
    let mut body: Vec<u8> = Vec::new();
    for _ in 0..depth {
        let mut outer = vec![0xA2, 0x06]; // field 100, length-delimited
        let mut len = body.len();
        loop {
            let byte = (len & 0x7F) as u8;
            len >>= 7;
            if len == 0 {
                outer.push(byte);
                break;
            }
            outer.push(byte | 0x80);
        }
        outer.extend_from_slice(&body);
        body = outer;
    }
    body
}

#[tokio::test]
async fn ten_thousand_nested_unknown_groups_are_refused_as_too_deep() {
    let mut s = setup().await;
    let body = nested_groups(10_000);
    assert!(body.len() <= 256 * 1024, "within the pre-hello cap");
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker.write(&frame(&body)).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::LimitExceeded(
                LimitError::TooDeep { limit: 16 }
            )))
        ),
        "{reason:?}"
    );
    s.finish().await;
}

#[tokio::test]
async fn ten_thousand_nested_unknown_length_delimited_fields_are_skipped_whole() {
    let s = setup().await;
    let body = nested_length_delimited(10_000);
    assert!(body.len() <= 256 * 1024, "{} bytes", body.len());
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker.hello("attacker").await;
    let before = s.cp.stats().unknown_bodies;
    // After the hello an envelope with no known body is counted and ignored...
    attacker.write(&frame(&body)).await;
    // ...and the session carries on: a heartbeat sent after it is answered.
    attacker
        .write(&envelope_frame(&Envelope::new(Heartbeat {
            sequence: 1,
            sent_at_unix_ms: 0,
        })))
        .await;
    bounded("heartbeat ack", async {
        loop {
            match attacker.next_body().await {
                Some(Body::HeartbeatAck(a)) if a.sequence == 1 => break,
                Some(_) => {}
                None => panic!("closed after an unknown body"),
            }
        }
    })
    .await;
    assert_eq!(s.cp.stats().unknown_bodies, before + 1);
    assert_eq!(s.cp.stats().live_sessions, 2);
    s.finish().await;
}

#[tokio::test]
async fn a_frame_before_the_hello_is_a_protocol_error() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker
        .write(&envelope_frame(
            &Envelope::new(EdgeStatusRequest::default()),
        ))
        .await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::BeforeHello(_))
        ),
        "{reason:?}"
    );
    s.finish().await;
}

#[tokio::test]
async fn a_second_hello_is_a_protocol_error() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker.hello("attacker").await;
    attacker.write(&hello_frame("attacker", b"")).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert_eq!(
        reason,
        CloseReason::ProtocolError(ProtocolViolation::SecondHello)
    );
    s.finish().await;
}

#[tokio::test]
async fn a_hello_with_a_1_mib_edge_id_is_refused_by_the_pre_hello_cap() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    let hello = hello_frame(&"e".repeat(1024 * 1024), b"");
    // Only the prefix and a little of the body: the refusal comes from the prefix.
    attacker.write(&hello[..64]).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::TooLarge {
                max: 262_144,
                ..
            }))
        ),
        "{reason:?}"
    );
    s.finish().await;
}

#[tokio::test]
async fn a_hello_with_a_129_byte_edge_id_is_a_frame_limit_error() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker.write(&hello_frame(&"e".repeat(129), b"")).await;
    attacker.expect_go_away(GoAwayReason::ProtocolError).await;
    let reason = attacker_closed(&mut s.events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::LimitExceeded(
                LimitError::StringTooLong { limit: 128, .. }
            )))
        ),
        "{reason:?}"
    );
    s.finish().await;
}

#[tokio::test]
async fn control_characters_in_the_edge_id_get_invalid_hello() {
    let mut s = setup().await;
    for id in [
        "edge\n1",
        "edge\u{0}1",
        "\u{1b}[31medge",
        "edge 1",
        "edge\u{7f}",
    ] {
        let mut attacker = Attacker::connect(s.server.local_addr()).await;
        attacker.write(&hello_frame(id, b"")).await;
        let (_, bodies) = attacker.go_away_then_eof().await;
        assert!(
            matches!(bodies.as_slice(), [Body::HelloResponse(r)]
                if !r.accepted && r.reject_reason() == HelloRejectReason::InvalidHello),
            "{id:?}: {bodies:?}"
        );
        let reason = attacker_closed(&mut s.events).await;
        assert_eq!(
            reason,
            CloseReason::HelloRejected(HelloRejectReason::InvalidHello)
        );
    }
    // None of them made it into the view.
    assert_eq!(
        s.cp.edges()
            .iter()
            .map(|v| v.edge_id.as_str())
            .collect::<Vec<_>>(),
        ["good"]
    );
    s.finish().await;
}

#[tokio::test]
async fn a_client_that_never_says_hello_gets_hello_timeout() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    attacker.expect_go_away(GoAwayReason::HelloTimeout).await;
    assert_eq!(
        attacker_closed(&mut s.events).await,
        CloseReason::HelloTimeout
    );
    assert_eq!(s.cp.stats().hello_timeouts, 1);
    s.finish().await;
}

#[tokio::test]
async fn a_client_that_sends_half_a_hello_still_gets_hello_timeout() {
    let mut s = setup().await;
    let mut attacker = Attacker::connect(s.server.local_addr()).await;
    let hello = hello_frame("slowloris", b"");
    attacker.write(&hello[..hello.len() - 1]).await;
    attacker.expect_go_away(GoAwayReason::HelloTimeout).await;
    assert_eq!(
        attacker_closed(&mut s.events).await,
        CloseReason::HelloTimeout
    );
    s.finish().await;
}
