//! A real `ControlPlane` and scripted fake Edges on a [`Pair`]: the test opens
//! connections, sends frames, lets time pass. Everything goes through the pair — its
//! clock, its links, its drain of every output after every input, and its
//! [`Monitor`](crate::testing::Monitor), strict here: the first rule the CP breaks
//! panics where it happens.

use super::wire::frame;

use crate::Instant;
use crate::cp::{ConnectionId, CpConfig, CpEvent, EnrolmentPolicy, PeerIdentity, RequestId};
use crate::proto::{
    self, Body, CommandPhase, EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse,
    EdgeHelloRequest, EdgeHelloResponse, EdgeNodeEvent, EdgeStatusResponse, Envelope, Heartbeat,
    NodeEventKind,
};
use crate::testing::NetConfig;
pub use crate::testing::Pair;

/// The Control Plane configuration of these tests: the defaults.
pub fn cfg() -> CpConfig {
    CpConfig::default()
}

/// A pair of a Control Plane of [`cfg()`] accepting any Edge, and no Edge yet.
pub fn harness() -> Pair {
    harness_with(cfg(), EnrolmentPolicy::AcceptAny)
}

/// A pair of a Control Plane of `config` and `policy`, at 1 s, on an instant network,
/// its monitor strict.
pub fn harness_with(config: CpConfig, policy: EnrolmentPolicy) -> Pair {
    let directory = Box::new(crate::cp::LocalDirectory::new(config.session_id_floor));
    harness_with_directory(config, policy, directory)
}

/// [`harness_with`], with ownership claims put to `directory`.
pub fn harness_with_directory(
    config: CpConfig,
    policy: EnrolmentPolicy,
    directory: Box<dyn crate::cp::Directory>,
) -> Pair {
    let mut pair =
        Pair::with_directory(0, config, policy, directory, NetConfig::default()).unwrap();
    pair.now = Instant::from_millis(1_000);
    pair.monitor_mut().set_strict(true);
    pair
}

/// What a test does with the fake Edges of a [`Pair`] (see the [module docs](self)).
pub trait ScriptedEdges {
    /// Opens a new connection.
    fn connect(&mut self) -> ConnectionId;
    /// Opens a new connection whose transport authenticated the peer as `identity`.
    fn connect_with_identity(&mut self, identity: Option<Box<dyn PeerIdentity>>) -> ConnectionId;
    /// Sends an envelope from the fake Edge on `conn`.
    fn send(&mut self, conn: ConnectionId, env: impl Into<Envelope>);
    /// The fake Edge on `conn` sends `bytes`.
    fn send_raw(&mut self, conn: ConnectionId, bytes: &[u8]);
    /// The fake Edge on `conn` closes its transport.
    fn drop_transport(&mut self, conn: ConnectionId);
    /// Takes the frames the fake Edge on `conn` received.
    fn take_frames(&mut self, conn: ConnectionId) -> Vec<Envelope>;
    /// Takes every CP event emitted so far.
    fn take_events(&mut self) -> Vec<CpEvent>;
    /// The connection `conn` is closed.
    fn is_closed(&self, conn: ConnectionId) -> bool;
    /// Connects and sends `hello`; returns the connection and the hello response.
    /// Other frames sent at once (status request, re-sent commands) stay queued.
    fn hello_with(&mut self, hello: EdgeHelloRequest) -> (ConnectionId, EdgeHelloResponse);
    /// An accepted session for `edge_id` advertising `ops`; the automatic status
    /// request is answered and all events so far are discarded.
    fn enrol(&mut self, edge_id: &str, ops: &[&str]) -> (ConnectionId, u64);
    /// The `Closed` events not yet taken.
    fn closed_events(&self) -> Vec<&CpEvent>;
}

impl ScriptedEdges for Pair {
    fn connect(&mut self) -> ConnectionId {
        self.connect_scripted(None)
    }

    fn connect_with_identity(&mut self, identity: Option<Box<dyn PeerIdentity>>) -> ConnectionId {
        self.connect_scripted(identity)
    }

    fn send(&mut self, conn: ConnectionId, env: impl Into<Envelope>) {
        let wire = frame(&env.into());
        // An envelope that encodes to nothing cannot be on the wire.
        if !wire.is_empty() {
            self.send_raw(conn, &wire);
        }
    }

    fn send_raw(&mut self, conn: ConnectionId, bytes: &[u8]) {
        self.write_scripted(conn, bytes);
        self.pump();
    }

    fn drop_transport(&mut self, conn: ConnectionId) {
        self.close_scripted(conn);
    }

    fn take_frames(&mut self, conn: ConnectionId) -> Vec<Envelope> {
        self.take_scripted_frames(conn)
    }

    fn take_events(&mut self) -> Vec<CpEvent> {
        std::mem::take(&mut self.cp_events)
    }

    fn is_closed(&self, conn: ConnectionId) -> bool {
        self.scripted(conn).is_none_or(|p| p.closed)
    }

    fn hello_with(&mut self, hello: EdgeHelloRequest) -> (ConnectionId, EdgeHelloResponse) {
        let conn = self.connect();
        self.send(conn, hello);
        let mut resp = None;
        let mut rest = Vec::new();
        for f in self.take_frames(conn) {
            match f.body {
                Some(Body::HelloResponse(r)) if resp.is_none() => resp = Some(r),
                _ => rest.push(f),
            }
        }
        if let Some(peer) = self.scripted.get_mut(&conn) {
            peer.frames = rest;
        }
        (conn, resp.expect("a hello response"))
    }

    fn enrol(&mut self, edge_id: &str, ops: &[&str]) -> (ConnectionId, u64) {
        let (conn, resp) = self.hello_with(hello(edge_id, ops));
        assert!(resp.accepted, "{resp:?}");
        for f in self.take_frames(conn) {
            if let Some(Body::StatusRequest(_)) = f.body {
                self.send(conn, status_response(f.correlation_id, edge_id, 1));
            }
        }
        self.send(conn, node_event(edge_id, NodeEventKind::EdgeReady, 1));
        self.take_frames(conn);
        self.take_events();
        (conn, resp.session_id)
    }

    fn closed_events(&self) -> Vec<&CpEvent> {
        self.cp_events
            .iter()
            .filter(|e| matches!(e, CpEvent::Closed { .. }))
            .collect()
    }
}

// ----- fake Edge frames -------------------------------------------------------------

/// A valid hello of `edge_id` advertising `ops`.
pub fn hello(edge_id: &str, ops: &[&str]) -> EdgeHelloRequest {
    EdgeHelloRequest {
        edge_id: edge_id.into(),
        protocol_version: proto::PROTOCOL_VERSION,
        software_version: "test/1".into(),
        operations: ops.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A heartbeat.
pub fn heartbeat(sequence: u64) -> Envelope {
    Envelope::new(Heartbeat {
        sequence,
        sent_at_unix_ms: 0,
    })
}

/// A full status answer with no nodes.
pub fn status_response(correlation_id: u64, edge_id: &str, revision: u64) -> Envelope {
    Envelope::correlated(
        correlation_id,
        EdgeStatusResponse {
            edge_id: edge_id.into(),
            nodes: Vec::new(),
            observed_at_unix_ms: 42,
            registry_revision: revision,
            truncated: false,
        },
    )
}

/// A legitimate status response of about `approx_len` bytes on the wire.
pub fn big_status_response(correlation_id: u64, edge_id: &str, approx_len: usize) -> Envelope {
    let nodes = (0..approx_len / 40)
        .map(|i| proto::EdgeNodeSnapshot {
            node_id: format!("node-{i:030}"),
            ..Default::default()
        })
        .collect();
    Envelope::correlated(
        correlation_id,
        EdgeStatusResponse {
            edge_id: edge_id.into(),
            nodes,
            observed_at_unix_ms: 42,
            registry_revision: 1,
            truncated: false,
        },
    )
}

/// A command response: accepted, or rejected `BUSY`.
pub fn cmd_response(command_id: &str, accepted: bool) -> Envelope {
    Envelope::new(EdgeCommandResponse {
        command_id: command_id.into(),
        accepted,
        reject_reason: if accepted { 0 } else { 4 },
        message: String::new(),
    })
}

/// A command event.
pub fn cmd_event(command_id: &str, phase: CommandPhase, sequence: u32) -> Envelope {
    Envelope::new(EdgeCommandEvent {
        command_id: command_id.into(),
        phase: phase as i32,
        sequence,
        message: String::new(),
        detail: Default::default(),
        occurred_at_unix_ms: 7,
    })
}

/// A node event of the Edge itself (no node id).
pub fn node_event(edge_id: &str, kind: NodeEventKind, sequence: u64) -> Envelope {
    Envelope::new(EdgeNodeEvent {
        edge_id: edge_id.into(),
        node_id: String::new(),
        kind: kind as i32,
        generation: 0,
        sequence,
        occurred_at_unix_ms: 5,
        reason: String::new(),
    })
}

/// The `GoAway` among `frames`, as (reason, retry_after_ms).
pub fn go_away(frames: &[Envelope]) -> Option<(i32, u32)> {
    frames.iter().find_map(|f| match &f.body {
        Some(Body::GoAway(g)) => Some((g.reason, g.retry_after_ms)),
        _ => None,
    })
}

/// The status requests among `frames`, as correlation ids.
pub fn status_requests(frames: &[Envelope]) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| matches!(f.body, Some(Body::StatusRequest(_))))
        .map(|f| f.correlation_id)
        .collect()
}

/// The command requests among `frames`.
pub fn command_requests(frames: &[Envelope]) -> Vec<EdgeCommandRequest> {
    frames
        .iter()
        .filter_map(|f| match &f.body {
            Some(Body::CommandRequest(r)) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The status request of the first resync point among `events`.
pub fn request_of(events: &[CpEvent]) -> Option<RequestId> {
    events.iter().find_map(|e| match e {
        CpEvent::ResyncNeeded { request, .. } => *request,
        _ => None,
    })
}
