//! Hello content, acceptance, rejection, GoAway, hello timeout, protocol errors.

use std::time::Duration;

use iop_core::Instant;
use iop_core::edge::{CloseReason, ConnectError, EdgeEvent, INSTANCE_ID_KEY, ProtocolViolation};
use iop_core::proto::{
    self, BodyKind, EdgeHelloResponse, EdgeStatusRequest, EdgeStatusResponse, Envelope,
    GoAwayReason, HeartbeatAck, HelloRejectReason, NodeEventKind, PROTOCOL_VERSION,
};
use iop_core::testing::scripted::control_plane::*;

#[test]
fn hello_carries_identity_operations_credential_and_instance_id() {
    let mut h = Harness::default_edge();
    let hello = h.connect();
    assert_eq!(hello.edge_id, "edge-1");
    assert_eq!(hello.protocol_version, PROTOCOL_VERSION);
    assert_eq!(hello.software_version, "test/1.0");
    assert_eq!(hello.operations, ["edge.ping", "node.restart"]);
    assert_eq!(hello.credential, b"s3cret-credential");
    assert!(hello.inflight_command_ids.is_empty());
    let instance = hello.metadata.get(INSTANCE_ID_KEY).unwrap();
    assert_eq!(instance.len(), 16);
    assert_eq!(instance, h.edge.instance_id());
    // The credential never shows in Debug.
    assert!(!format!("{hello:?}").contains("s3cret"));
    assert!(!format!("{:?}", config()).contains("s3cret"));

    // Another seed, another instance id; same seed, same id.
    let mut other = config();
    other.seed = 43;
    let h2 = Harness::new(other, FakeRegistry::default());
    assert_ne!(h2.edge.instance_id(), h.edge.instance_id());
    let h3 = Harness::default_edge();
    assert_eq!(h3.edge.instance_id(), h.edge.instance_id());
}

#[test]
fn acceptance_negotiates_interval_and_reports_the_session() {
    let mut h = Harness::default_edge();
    h.connect();
    let frames = h.accept_with(accepted(9, 0));
    assert_eq!(
        h.events(),
        [EdgeEvent::Connected {
            session_id: 9,
            heartbeat_interval: Duration::from_secs(5),
            max_frame_len: proto::DEFAULT_MAX_FRAME_LEN,
        }]
    );
    assert!(h.edge.is_connected());
    // EDGE_READY is the first event of the session.
    assert_eq!(frames.len(), 1);
    let ready = as_node_event(&frames[0]);
    assert_eq!(ready.kind, NodeEventKind::EdgeReady as i32);
    assert_eq!(ready.sequence, 1);
    assert_eq!(ready.edge_id, "edge-1");
    // The first heartbeat is one interval later.
    assert_eq!(h.edge.poll_timeout(), Some(Instant::from_millis(5_000)));

    // Interval clamped to the protocol's bounds.
    let mut h = Harness::default_edge();
    h.connect();
    h.accept_with(accepted(1, 10));
    assert!(matches!(
        h.events()[0],
        EdgeEvent::Connected { heartbeat_interval, .. } if heartbeat_interval == Duration::from_secs(1)
    ));
}

#[test]
fn rejection_is_surfaced_and_retry_after_bounds_the_reconnect() {
    let mut h = Harness::default_edge();
    h.at(1_000);
    h.connect();
    h.accept_with(EdgeHelloResponse {
        accepted: false,
        reject_reason: HelloRejectReason::Draining as i32,
        message: "cp draining".into(),
        retry_after_ms: 12_000,
        ..Default::default()
    });
    assert!(h.close_requested, "the Edge closes after a rejection");
    let events = h.events();
    assert_eq!(
        events[0],
        EdgeEvent::HelloRejected {
            reason: HelloRejectReason::Draining,
            message: "cp draining".into(),
            retry_after: Duration::from_secs(12),
        }
    );
    let EdgeEvent::Closed {
        reason,
        reconnect_at,
    } = &events[1]
    else {
        panic!("expected Closed, got {events:?}")
    };
    assert_eq!(
        *reason,
        CloseReason::HelloRejected(HelloRejectReason::Draining)
    );
    let at = reconnect_at.unwrap();
    assert!(at >= Instant::from_millis(13_000), "{at:?}");
    assert_eq!(events.len(), 2);
    h.transport_closed();
    assert_eq!(h.edge.poll_connect_at(), Some(at));
    assert!(h.events().is_empty(), "one Closed per connection");
    // Dialling before the allowed time is refused.
    assert_eq!(
        h.edge.handle_connected(Instant::from_millis(12_999)),
        Err(ConnectError::TooEarly { at })
    );
    h.now = at;
    h.connect();
}

#[test]
fn superseded_go_away_is_log_worthy_and_retry_after_is_honoured() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.events();
    h.at(2_000);
    h.deliver(Envelope::go_away(
        GoAwayReason::Superseded,
        "replaced",
        5_000,
    ));
    let frames = h.flush();
    assert!(frames.is_empty(), "no GoAway back: {frames:?}");
    assert!(h.close_requested);
    let events = h.events();
    assert_eq!(
        events[0],
        EdgeEvent::Superseded {
            message: "replaced".into(),
            retry_after: Duration::from_secs(5)
        }
    );
    match &events[1] {
        EdgeEvent::Closed {
            reason: CloseReason::GoAway { reason, .. },
            reconnect_at: Some(at),
        } => {
            assert_eq!(*reason, GoAwayReason::Superseded);
            assert!(*at >= Instant::from_millis(7_000));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn go_away_instead_of_a_hello_answer_is_accepted() {
    let mut h = Harness::default_edge();
    h.connect();
    h.deliver(Envelope::go_away(GoAwayReason::Overloaded, "busy", 10_000));
    assert!(h.flush().is_empty());
    assert!(h.close_requested);
    let events = h.events();
    assert!(matches!(
        &events[0],
        EdgeEvent::Closed { reason: CloseReason::GoAway { reason: GoAwayReason::Overloaded, .. }, reconnect_at: Some(at) }
            if *at >= Instant::from_millis(10_000)
    ));
}

#[test]
fn hello_timeout_closes_with_a_go_away() {
    let mut h = Harness::default_edge();
    h.connect();
    assert_eq!(h.edge.poll_timeout(), Some(Instant::from_millis(10_000)));
    h.timeout(9_999);
    assert!(h.flush().is_empty());
    h.timeout(10_000);
    let frames = h.flush();
    assert_eq!(go_away_reason(&frames[0]), GoAwayReason::HelloTimeout);
    assert!(h.close_requested);
    assert!(matches!(
        h.events()[..],
        [EdgeEvent::Closed {
            reason: CloseReason::HelloTimeout,
            ..
        }]
    ));
    h.transport_closed();
    // Nothing is left to time out but the dial, which is the one deadline.
    let dial = h.edge.poll_connect_at().expect("a time to dial");
    assert_eq!(h.edge.poll_timeout(), Some(dial));
}

fn assert_protocol_error(h: &mut Harness, expected: ProtocolViolation) {
    let frames = h.flush();
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(go_away_reason(&frames[0]), GoAwayReason::ProtocolError);
    assert!(h.close_requested);
    let events = h.events();
    let closed: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, EdgeEvent::Closed { .. }))
        .collect();
    assert_eq!(closed.len(), 1);
    assert!(
        matches!(closed[0], EdgeEvent::Closed { reason: CloseReason::ProtocolError(e), reconnect_at: Some(_) } if *e == expected),
        "{closed:?}"
    );
    // Nothing more is processed on this connection.
    h.deliver(Envelope::new(EdgeStatusRequest::default()));
    assert!(h.flush().is_empty());
    assert!(h.events().is_empty());
}

#[test]
fn unexpected_messages_are_protocol_errors() {
    // A status request before the hello is answered.
    let mut h = Harness::default_edge();
    h.connect();
    h.deliver(Envelope::correlated(1, EdgeStatusRequest::default()));
    assert_protocol_error(
        &mut h,
        ProtocolViolation::BeforeHelloAnswer(BodyKind::StatusRequest),
    );

    // An empty body before the hello.
    let mut h = Harness::default_edge();
    h.connect();
    h.deliver(Envelope {
        correlation_id: 3,
        body: None,
    });
    assert_protocol_error(&mut h, ProtocolViolation::EmptyBeforeHello);

    // A second hello response.
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.deliver(Envelope::new(accepted(2, 1_000)));
    assert_protocol_error(
        &mut h,
        ProtocolViolation::Unexpected(BodyKind::HelloResponse),
    );

    // A status response from the CP.
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.deliver(Envelope::correlated(1, EdgeStatusResponse::default()));
    assert_protocol_error(
        &mut h,
        ProtocolViolation::Unexpected(BodyKind::StatusResponse),
    );

    // An unsupported protocol version.
    let mut h = Harness::default_edge();
    h.connect();
    let mut resp = accepted(1, 1_000);
    resp.protocol_version = 99;
    h.deliver(Envelope::new(resp));
    assert_protocol_error(&mut h, ProtocolViolation::ProtocolVersion(99));

    // A frame limit below the 64 KiB a CP may announce at least: the session
    // would be mute (found by the hostile-CP tests).
    for tiny in [1, 1_024, 65_535] {
        let mut h = Harness::default_edge();
        h.connect();
        let mut resp = accepted(1, 1_000);
        resp.max_frame_len = tiny;
        h.deliver(Envelope::new(resp));
        assert_protocol_error(&mut h, ProtocolViolation::FrameLimitTooSmall(tiny));
    }
}

#[test]
fn bad_frames_are_protocol_errors() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.events();
    h.edge.handle_bytes(h.now, &[0, 0, 0, 0]);
    let frames = h.flush();
    assert_eq!(go_away_reason(&frames[0]), GoAwayReason::ProtocolError);
    assert!(matches!(
        h.events()[..],
        [EdgeEvent::Closed {
            reason: CloseReason::ProtocolError(ProtocolViolation::Frame(_)),
            ..
        }]
    ));
}

#[test]
fn empty_bodies_after_the_hello_are_counted_and_ignored() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.events();
    h.deliver(Envelope {
        correlation_id: 5,
        body: None,
    });
    h.deliver(Envelope::new(HeartbeatAck { sequence: 1 }));
    assert!(h.flush().is_empty());
    assert!(h.events().is_empty());
    assert!(h.edge.is_connected());
    assert_eq!(h.edge.stats().ignored_frames, 1);
}

#[test]
fn invalid_configs_are_refused() {
    let mut c = config();
    c.edge_id = "bad id".into();
    assert!(iop_core::edge::Edge::new(c, ()).is_err());
    let mut c = config();
    c.metadata.insert(INSTANCE_ID_KEY.into(), "x".into());
    assert!(iop_core::edge::Edge::new(c, ()).is_err());
}

/// A config whose hello would break a hello cap is refused when the Edge is built,
/// naming the field, so no hello the CP must refuse is ever sent (PROTOCOL.md §4.6, §7).
#[test]
fn a_config_over_a_hello_cap_is_refused_naming_the_field() {
    use iop_core::edge::{ConfigError, Edge};
    let over = |f: &dyn Fn(&mut iop_core::edge::EdgeConfig)| {
        let mut c = config();
        f(&mut c);
        match Edge::new(c, ()) {
            Err(ConfigError::ExceedsLimit(e)) => (e.field, e.size, e.limit),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        over(&|c| {
            c.metadata.insert("k".into(), "v".repeat(257));
        }),
        ("EdgeConfig::metadata.value", 257, 256)
    );
    assert_eq!(
        over(&|c| c.software_version = "v".repeat(129)),
        ("EdgeConfig::software_version", 129, 128)
    );
    assert_eq!(
        over(&|c| c.max_retained_commands = 4_096),
        ("EdgeConfig::max_retained_commands", 4_096, 1_024)
    );
    assert_eq!(
        over(&|c| {
            for i in 0..16 {
                c.metadata.insert(format!("k{i}"), String::new());
            }
        }),
        ("EdgeConfig::metadata (with iop.instance_id)", 17, 16)
    );
    let mut c = config();
    c.max_frame_len = 64 * 1024;
    assert!(matches!(
        Edge::new(c, ()),
        Err(ConfigError::MaxFrameLenTooSmall { min: 1_310_015, .. })
    ));
}
