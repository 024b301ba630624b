//! One Edge session driven in memory, following the core's driving contract (after
//! every input, pull every output), and the status exchange the instruction-count
//! bench measures on it: the Edge's side of what [`crate::session`] measures on the
//! Control Plane's.

use std::time::Duration;

use iop_core::edge::{Edge, EdgeConfig, EdgeEvent, TargetLevel};
use iop_core::proto::{self, EdgeHelloResponse, Envelope};
use iop_core::{Instant, NodeRegistry, WallClock};

use crate::fixtures::{EDGE_ID, NOW_UNIX_MS};
use crate::session::OPERATIONS;

/// An Edge with one accepted, idle session (hello answered, `EDGE_READY` pulled).
#[derive(Debug)]
pub struct EdgeSession {
    edge: Edge<NodeRegistry>,
    now: Instant,
    out: Vec<u8>,
}

impl EdgeSession {
    /// Connects an Edge owning `registry` and brings its session to idle: hello sent,
    /// accepted, `EDGE_READY` sent; every output pulled.
    ///
    /// Panics if the core does not accept that exchange (a bug the tests would show).
    pub fn enrolled(registry: NodeRegistry) -> Self {
        let mut config = EdgeConfig::new(EDGE_ID, 0);
        for op in OPERATIONS {
            config = config.with_operation(op, TargetLevel::Edge);
        }
        config.credential = "enrolment-secret".into();
        config.wall_clock = WallClock::new(NOW_UNIX_MS);
        let mut edge = Edge::new(config, registry).expect("valid bench config");
        let now = Instant::ZERO;
        edge.handle_connected(now).expect("first dial");
        let mut s = Self {
            edge,
            now,
            out: Vec::with_capacity(64 * 1024),
        };
        s.pull();
        let accept = EdgeHelloResponse {
            accepted: true,
            protocol_version: proto::PROTOCOL_VERSION,
            session_id: 1,
            heartbeat_interval_ms: 5_000,
            ..Default::default()
        };
        s.edge
            .handle_bytes(now, &crate::session::frame(&Envelope::new(accept)));
        let mut connected = false;
        while let Some(event) = s.edge.poll_event() {
            connected |= matches!(event, EdgeEvent::Connected { .. });
        }
        assert!(connected, "the hello is accepted");
        s.pull();
        s
    }

    /// The Edge.
    pub fn edge(&self) -> &Edge<NodeRegistry> {
        &self.edge
    }

    /// Bytes the last operation sent to the Control Plane.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    fn input(&mut self, bytes: &[u8]) {
        self.out.clear();
        self.edge.handle_bytes(self.now, bytes);
        self.pull();
    }

    /// Pulls every transmit, event and the next timeout, as a driver does.
    fn pull(&mut self) {
        let _ =
            iop_core::drain_transmits(&mut self.out, usize::MAX, |b| self.edge.poll_transmit(b));
        while self.edge.poll_event().is_some() {}
        std::hint::black_box(self.edge.poll_timeout());
    }

    /// One status exchange on the Edge: the request `frame` comes in, the response
    /// goes out. Returns the bytes sent.
    pub fn status_exchange(&mut self, frame: &[u8]) -> usize {
        self.now = self.now + Duration::from_millis(1);
        self.input(frame);
        self.out.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{full_status_request, registry, status_response};
    use crate::session::frame;
    use iop_core::proto::{Body, FrameDecoder};

    #[test]
    fn a_status_request_is_answered_with_the_registry_status() {
        let reg = registry(10, 4);
        let mut expected = status_response(&reg);
        let mut s = EdgeSession::enrolled(reg);
        for id in 2..5u64 {
            let n = s.status_exchange(&frame(&full_status_request(id)));
            assert!(n > 0);
            let mut dec = FrameDecoder::new(u32::MAX);
            let mut input = s.output();
            let sent = dec.decode(&mut input).unwrap().expect("one frame");
            assert!(input.is_empty(), "exactly one frame");
            assert_eq!(sent.correlation_id, id);
            let Some(Body::StatusResponse(got)) = sent.body else {
                panic!("expected a status response, got {sent:?}");
            };
            expected.observed_at_unix_ms = got.observed_at_unix_ms;
            assert_eq!(got, expected);
        }
    }
}
