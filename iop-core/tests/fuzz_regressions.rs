//! Inputs the fuzz targets (`fuzz/`) found, replayed as ordinary tests.
//!
//! Each test names the target that found the input and states the rule it broke.

use iop_core::Instant;
use iop_core::edge::{CloseReason, Edge, EdgeConfig, EdgeEvent, ProtocolViolation, Transmit};
use iop_core::proto::{
    self, Body, DEFAULT_MAX_FRAME_LEN, EdgeCommandRequest, EdgeHelloResponse, Envelope,
    FrameDecoder, GoAwayReason,
};

fn frame(envelope: Envelope) -> Vec<u8> {
    let mut wire = Vec::new();
    proto::encode_frame(&envelope, DEFAULT_MAX_FRAME_LEN, &mut wire).unwrap();
    wire
}

/// Everything the Edge writes until it has nothing more, decoded.
fn written(edge: &mut Edge<()>) -> (Vec<Envelope>, Transmit) {
    let mut wire = Vec::new();
    let last = loop {
        match edge.poll_transmit(&mut wire) {
            Transmit::Bytes(_) => {}
            other => break other,
        }
    };
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    let mut input = wire.as_slice();
    let mut frames = Vec::new();
    while let Some(envelope) = decoder.decode(&mut input).unwrap() {
        frames.push(envelope);
    }
    (frames, last)
}

fn accepting(max_frame_len: u32) -> Envelope {
    Envelope::new(EdgeHelloResponse {
        accepted: true,
        protocol_version: 1,
        heartbeat_interval_ms: 1_000,
        session_id: 7,
        max_frame_len,
        ..Default::default()
    })
}

/// `edge_session_bytes`: a hello response accepting with `max_frame_len = 1`. The Edge
/// took the session, then dropped every frame as too large for the CP: no EDGE_READY,
/// no heartbeat, no command answer — a mute session, and the protocol error a later
/// bad frame caused could not be told to the CP either. Now such a limit is itself a
/// protocol error, told with a GoAway under the pre-hello limit.
#[test]
fn a_tiny_frame_limit_in_the_hello_response_is_a_protocol_error() {
    let now = Instant::ZERO;
    let mut edge = Edge::new(EdgeConfig::new("edge-1", 0), ()).unwrap();
    edge.handle_connected(now).unwrap();
    let (hello, _) = written(&mut edge);
    assert!(matches!(hello[0].body, Some(Body::HelloRequest(_))));

    let mut input = frame(accepting(1));
    input.extend(frame(Envelope::new(EdgeCommandRequest {
        command_id: "cmd-1".into(),
        operation: "edge.ping".into(),
        ..Default::default()
    })));
    edge.handle_bytes(now, &input);

    let (frames, last) = written(&mut edge);
    let [go_away] = frames.as_slice() else {
        panic!("expected one GoAway, got {frames:?}");
    };
    assert!(
        matches!(&go_away.body, Some(Body::GoAway(g)) if g.reason() == GoAwayReason::ProtocolError)
    );
    assert_eq!(last, Transmit::Close);
    let events: Vec<_> = std::iter::from_fn(|| edge.poll_event()).collect();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, EdgeEvent::Connected { .. })),
        "{events:?}"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        EdgeEvent::Closed {
            reason: CloseReason::ProtocolError(ProtocolViolation::FrameLimitTooSmall(1)),
            ..
        }
    )));
}

/// The floor is `MIN_PEER_MAX_FRAME_LEN` (64 KiB, PROTOCOL.md §7): a CP that
/// accepts with exactly that still gets its session, and one byte less does not.
#[test]
fn a_frame_limit_at_the_floor_is_accepted() {
    let floor = iop_core::limits::MIN_PEER_MAX_FRAME_LEN;
    let mut below = Edge::new(EdgeConfig::new("edge-1", 0), ()).unwrap();
    below.handle_connected(Instant::ZERO).unwrap();
    let _ = written(&mut below);
    below.handle_bytes(Instant::ZERO, &frame(accepting(floor - 1)));
    assert!(std::iter::from_fn(|| below.poll_event()).any(|e| matches!(
        e,
        EdgeEvent::Closed {
            reason: CloseReason::ProtocolError(ProtocolViolation::FrameLimitTooSmall(_)),
            ..
        }
    )));

    let now = Instant::ZERO;
    let mut edge = Edge::new(EdgeConfig::new("edge-1", 0), ()).unwrap();
    edge.handle_connected(now).unwrap();
    let _ = written(&mut edge);
    edge.handle_bytes(now, &frame(accepting(floor)));
    assert!(matches!(
        edge.poll_event(),
        Some(EdgeEvent::Connected { max_frame_len, .. }) if max_frame_len == floor
    ));
    let (frames, last) = written(&mut edge);
    assert!(
        matches!(frames[0].body, Some(Body::NodeEvent(_))),
        "EDGE_READY"
    );
    assert_eq!(last, Transmit::Idle);
}
