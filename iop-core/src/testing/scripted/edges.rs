//! A scripted fake Edge and a harness driving a `ControlPlane` with a fake clock,
//! following the driving contract: after every input, drain every output.

use super::wire::{Reader, frame};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::cp::{
    ConnectionId, ControlPlane, CpConfig, CpEvent, EnrolmentPolicy, RequestId, Transmit,
};
use crate::proto::{
    self, Body, CommandPhase, EdgeCommandEvent, EdgeCommandResponse, EdgeHelloRequest,
    EdgeHelloResponse, EdgeNodeEvent, EdgeStatusResponse, Envelope, Heartbeat, NodeEventKind,
};
use crate::{Instant, drain_transmits};

/// What one fake Edge has received from the CP.
#[derive(Debug)]
pub struct Peer {
    reader: Reader,
    /// Frames received and not yet taken.
    pub frames: Vec<Envelope>,
    /// The CP closed the connection (`Transmit::Close`), or its transport went away.
    pub closed: bool,
    /// Every byte received.
    pub bytes: Vec<u8>,
}

/// Drives one `ControlPlane`.
pub struct Harness {
    /// The Control Plane under test.
    pub cp: ControlPlane,
    /// The fake clock.
    pub now: Instant,
    /// Events emitted and not yet taken.
    pub events: Vec<CpEvent>,
    /// The fake Edges, by connection.
    pub peers: BTreeMap<ConnectionId, Peer>,
    next_conn: u64,
    /// Read split used by `send`: `None` = all at once.
    pub chunk: Option<usize>,
}

/// The Control Plane configuration of these tests: the defaults.
pub fn cfg() -> CpConfig {
    CpConfig::default()
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A Control Plane of [`cfg()`] accepting any Edge.
    pub fn new() -> Self {
        Self::with(cfg(), EnrolmentPolicy::AcceptAny)
    }

    /// A Control Plane of `config` and `policy`, at 1 s.
    pub fn with(config: CpConfig, policy: EnrolmentPolicy) -> Self {
        Self {
            cp: ControlPlane::new(config, policy).unwrap(),
            now: Instant::from_millis(1_000),
            events: Vec::new(),
            peers: BTreeMap::new(),
            next_conn: 1,
            chunk: None,
        }
    }

    /// Opens a new connection.
    pub fn connect(&mut self) -> ConnectionId {
        self.connect_with_identity(None)
    }

    /// Opens a new connection whose transport authenticated the peer as `identity`.
    pub fn connect_with_identity(
        &mut self,
        identity: Option<Box<dyn crate::cp::PeerIdentity>>,
    ) -> ConnectionId {
        let id = ConnectionId(self.next_conn);
        self.next_conn += 1;
        self.peers.insert(
            id,
            Peer {
                reader: Reader::new(u32::MAX),
                frames: Vec::new(),
                closed: false,
                bytes: Vec::new(),
            },
        );
        self.cp
            .handle_connect_with_identity(self.now, id, identity)
            .unwrap();
        self.pump(Some(id));
        id
    }

    /// Sends an envelope from the fake Edge on `conn`.
    pub fn send(&mut self, conn: ConnectionId, env: impl Into<Envelope>) {
        let wire = frame(&env.into());
        // An envelope that encodes to nothing cannot be on the wire.
        if !wire.is_empty() {
            self.send_raw(conn, &wire);
        }
    }

    /// The fake Edge on `conn` sends `bytes` (in reads of [`chunk`](Self::chunk) bytes).
    pub fn send_raw(&mut self, conn: ConnectionId, bytes: &[u8]) {
        match self.chunk {
            None => self.cp.handle_bytes(self.now, conn, bytes),
            Some(n) => {
                for c in bytes.chunks(n.max(1)) {
                    self.cp.handle_bytes(self.now, conn, c);
                }
            }
        }
        self.pump(Some(conn));
    }

    /// The transport of `conn` went away.
    pub fn drop_transport(&mut self, conn: ConnectionId) {
        self.cp.handle_closed(self.now, conn);
        if let Some(p) = self.peers.get_mut(&conn) {
            p.closed = true;
        }
        self.pump(Some(conn));
    }

    /// Lets time pass, firing every timer on the way at its own deadline.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        while let Some(at) = self.cp.poll_timeout() {
            if at > end {
                break;
            }
            self.now = self.now.max(at);
            self.cp.handle_timeout(self.now);
            self.pump(None);
        }
        self.now = end;
        self.cp.handle_timeout(self.now);
        self.pump(None);
    }

    /// Drains every output. A connection that got bytes other than `input` must have
    /// been listed by `poll_wakeup`.
    pub fn pump(&mut self, input: Option<ConnectionId>) {
        let mut woken = BTreeSet::new();
        while let Some(c) = self.cp.poll_wakeup() {
            woken.insert(c);
        }
        let ids: Vec<ConnectionId> = self.peers.keys().copied().collect();
        for id in ids {
            let peer = self.peers.get_mut(&id).unwrap();
            if peer.closed {
                continue;
            }
            let mut buf = Vec::new();
            let cp = &mut self.cp;
            let poll = |b: &mut Vec<u8>| non_empty(cp.poll_transmit(id, b));
            if drain_transmits(&mut buf, usize::MAX, poll) == Transmit::Close {
                peer.closed = true;
            }
            if (!buf.is_empty() || peer.closed) && Some(id) != input {
                assert!(woken.contains(&id), "{id} got output without a wakeup");
            }
            peer.bytes.extend_from_slice(&buf);
            let frames = peer.reader.read(&buf);
            peer.frames.extend(frames);
        }
        while let Some(e) = self.cp.poll_event() {
            self.events.push(e);
        }
    }

    /// Takes the frames the fake Edge on `conn` received.
    pub fn take_frames(&mut self, conn: ConnectionId) -> Vec<Envelope> {
        std::mem::take(&mut self.peers.get_mut(&conn).unwrap().frames)
    }

    /// Takes every event emitted so far.
    pub fn take_events(&mut self) -> Vec<CpEvent> {
        std::mem::take(&mut self.events)
    }

    /// The connection `conn` is closed.
    pub fn is_closed(&self, conn: ConnectionId) -> bool {
        self.peers[&conn].closed
    }

    /// Connects and sends `hello`; returns the connection and the hello response.
    /// Other frames sent at once (status request, re-sent commands) stay queued.
    pub fn hello_with(&mut self, hello: EdgeHelloRequest) -> (ConnectionId, EdgeHelloResponse) {
        let conn = self.connect();
        self.send(conn, hello);
        let frames = self.take_frames(conn);
        let mut rest = Vec::new();
        let mut resp = None;
        for f in frames {
            match f.body {
                Some(Body::HelloResponse(r)) if resp.is_none() => resp = Some(r),
                _ => rest.push(f),
            }
        }
        self.peers.get_mut(&conn).unwrap().frames = rest;
        (conn, resp.expect("a hello response"))
    }

    /// An accepted session for `edge_id` advertising `ops`; the automatic status
    /// request is answered and all events so far are discarded.
    pub fn enrol(&mut self, edge_id: &str, ops: &[&str]) -> (ConnectionId, u64) {
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

    /// The `Closed` events not yet taken.
    pub fn closed_events(&self) -> Vec<&CpEvent> {
        self.events
            .iter()
            .filter(|e| matches!(e, CpEvent::Closed { .. }))
            .collect()
    }
}

/// `transmit`, checked: `Bytes` always hands out at least one byte.
pub(super) fn non_empty(transmit: Transmit) -> Transmit {
    assert_ne!(
        transmit,
        Transmit::Bytes(0),
        "poll_transmit handed out no bytes"
    );
    transmit
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

/// The status request of the first resync point among `events`.
pub fn request_of(events: &[CpEvent]) -> Option<RequestId> {
    events.iter().find_map(|e| match e {
        CpEvent::ResyncNeeded { request, .. } => *request,
        _ => None,
    })
}
