//! A scripted fake CP and a fake node registry for driving an `Edge` in tests.

use super::wire::{Reader, frame};

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::edge::{
    Edge, EdgeConfig, EdgeEvent, EdgeRegistry, LifecycleEvent, Selector, StatusScope, Target,
    TargetLevel, Transmit,
};
use crate::proto::{
    self, Body, EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse, EdgeHelloRequest,
    EdgeHelloResponse, EdgeNodeEvent, EdgeNodeSnapshot, EdgeStatusResponse, Envelope, GoAwayReason,
    Message, NodeEventKind, NodeState,
};
use crate::registry::ResolveError;
use crate::{Instant, WallClock, drain_transmits};

/// The wall-clock time of `Instant::ZERO` in [`config`]: Unix milliseconds.
pub const ORIGIN_UNIX_MS: u64 = 1_800_000_000_000;

/// A registry with configured nodes (id → labels) and a queue of lifecycle events.
#[derive(Debug, Default)]
pub struct FakeRegistry {
    /// The configured nodes, by id, with their labels.
    pub nodes: BTreeMap<String, BTreeMap<String, String>>,
    /// Lifecycle events not yet taken by the Edge.
    pub pending: VecDeque<LifecycleEvent>,
    /// The registry revision, moved on by every transition.
    pub revision: u64,
    /// Transitions "lost" by the registry's own queue.
    pub dropped: u64,
}

impl FakeRegistry {
    /// A registry configured with `ids`, none connected.
    pub fn with_nodes(ids: &[&str]) -> Self {
        let mut r = Self::default();
        for id in ids {
            r.nodes.insert((*id).to_owned(), BTreeMap::new());
        }
        r
    }

    /// A transition: bumps the revision and queues an event.
    pub fn transition(&mut self, node_id: &str, kind: NodeEventKind) {
        self.revision += 1;
        self.pending.push_back(LifecycleEvent::new(
            node_id,
            kind,
            self.revision,
            ORIGIN_UNIX_MS,
            "",
        ));
    }
}

impl EdgeRegistry for FakeRegistry {
    fn snapshot(
        &self,
        edge_id: &str,
        scope: StatusScope<'_>,
        observed_at_unix_ms: u64,
        max_encoded_len: usize,
    ) -> EdgeStatusResponse {
        let mut response = EdgeStatusResponse {
            edge_id: edge_id.to_owned(),
            nodes: Vec::new(),
            observed_at_unix_ms,
            registry_revision: self.revision,
            truncated: false,
        };
        for (id, labels) in &self.nodes {
            if !scope.includes(id) {
                continue;
            }
            response.nodes.push(EdgeNodeSnapshot {
                node_id: id.clone(),
                connected: false,
                state: NodeState::Configured as i32,
                labels: labels.clone(),
                ..Default::default()
            });
            if response.encoded_len() > max_encoded_len {
                response.nodes.pop();
                response.truncated = true;
                break;
            }
        }
        response
    }

    fn resolve(&self, selector: &Selector) -> Result<Target, ResolveError> {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .filter(|(id, labels)| match selector {
                Selector::All => true,
                Selector::Node(n) => *id == n,
                Selector::Provider { node_id, .. } => *id == node_id,
                Selector::Label { key, value } => labels.get(key) == Some(value),
                Selector::Edge => false,
            })
            .map(|(id, _)| id.clone())
            .collect();
        match selector {
            Selector::Edge => Ok(Target::Edge),
            _ if nodes.is_empty() => Err(ResolveError::NoMatchingTarget),
            _ => Ok(Target::Nodes(nodes)),
        }
    }

    fn poll_lifecycle_event(&mut self) -> Option<LifecycleEvent> {
        self.pending.pop_front()
    }

    fn take_dropped_events(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }
}

/// The Edge configuration of these tests: `edge-1`, operations `edge.ping` (Edge level) and
/// `node.restart` (node level), a credential, the wall clock at [`ORIGIN_UNIX_MS`].
pub fn config() -> EdgeConfig {
    let mut c = EdgeConfig::new("edge-1", 42)
        .with_operation("edge.ping", TargetLevel::Edge)
        .with_operation("node.restart", TargetLevel::Node);
    c.credential = "s3cret-credential".into();
    c.software_version = "test/1.0".into();
    c.wall_clock = WallClock::new(ORIGIN_UNIX_MS);
    c
}

/// An Edge wired to a scripted CP: the test plays the CP.
pub struct Harness<R: EdgeRegistry = FakeRegistry> {
    /// The Edge under test.
    pub edge: Edge<R>,
    /// The fake clock.
    pub now: Instant,
    cp: Reader,
    /// Set when the Edge asked the driver to close the transport.
    pub close_requested: bool,
}

impl Harness<FakeRegistry> {
    /// An Edge of [`config`] with nodes `n1` and `n2`.
    pub fn default_edge() -> Self {
        Self::new(config(), FakeRegistry::with_nodes(&["n1", "n2"]))
    }
}

impl<R: EdgeRegistry> Harness<R> {
    /// An Edge of `config` over `registry`, at `Instant::ZERO`.
    pub fn new(config: EdgeConfig, registry: R) -> Self {
        Self {
            edge: Edge::new(config, registry).unwrap(),
            now: Instant::ZERO,
            cp: Reader::new(proto::DEFAULT_MAX_FRAME_LEN),
            close_requested: false,
        }
    }

    /// Sets the clock to `ms` milliseconds after `Instant::ZERO`.
    pub fn at(&mut self, ms: u64) -> Instant {
        self.now = Instant::from_millis(ms);
        self.now
    }

    /// Every frame the Edge wants to write, decoded as the CP would.
    pub fn flush(&mut self) -> Vec<Envelope> {
        let mut wire = Vec::new();
        let edge = &mut self.edge;
        let poll = |b: &mut Vec<u8>| super::wire::non_empty(edge.poll_transmit(b));
        if drain_transmits(&mut wire, usize::MAX, poll) == Transmit::Close {
            self.close_requested = true;
        }
        self.cp.read(&wire)
    }

    /// Takes every event the Edge emitted.
    pub fn events(&mut self) -> Vec<EdgeEvent> {
        std::iter::from_fn(|| self.edge.poll_event()).collect()
    }

    /// Dials at the current time and returns the hello.
    pub fn connect(&mut self) -> EdgeHelloRequest {
        self.cp = Reader::new(proto::DEFAULT_MAX_FRAME_LEN);
        self.close_requested = false;
        self.edge.handle_connected(self.now).unwrap();
        let frames = self.flush();
        assert_eq!(frames.len(), 1, "only the hello goes first: {frames:?}");
        match frames.into_iter().next().unwrap().body {
            Some(Body::HelloRequest(h)) => h,
            other => panic!("expected hello, got {other:?}"),
        }
    }

    /// The fake CP sends `envelope`.
    pub fn deliver(&mut self, envelope: Envelope) {
        self.edge.handle_bytes(self.now, &frame(&envelope));
    }

    /// The fake CP answers the hello with `response`; the frames the Edge writes then.
    pub fn accept_with(&mut self, response: EdgeHelloResponse) -> Vec<Envelope> {
        self.deliver(Envelope::new(response));
        self.flush()
    }

    /// Connects and accepts with a 1 s heartbeat interval; returns what followed.
    pub fn connect_and_accept(&mut self, session_id: u64) -> Vec<Envelope> {
        self.connect();
        self.accept_with(accepted(session_id, 1_000))
    }

    /// Moves the clock to `ms` and fires the Edge's timers.
    pub fn timeout(&mut self, ms: u64) {
        self.at(ms);
        self.edge.handle_timeout(self.now);
    }

    /// Transport gone (the driver closed it or it dropped).
    pub fn transport_closed(&mut self) {
        self.edge.handle_closed(self.now);
    }

    /// The fake CP sends the command `req`; the frames the Edge writes then.
    pub fn command(&mut self, req: EdgeCommandRequest) -> Vec<Envelope> {
        self.deliver(Envelope::new(req));
        self.flush()
    }
}

/// An accepting hello response for `session_id`, with that heartbeat interval.
pub fn accepted(session_id: u64, heartbeat_interval_ms: u32) -> EdgeHelloResponse {
    EdgeHelloResponse {
        accepted: true,
        protocol_version: 1,
        heartbeat_interval_ms,
        session_id,
        ..Default::default()
    }
}

/// A command request.
pub fn cmd(id: &str, operation: &str, selector: &str) -> EdgeCommandRequest {
    EdgeCommandRequest {
        command_id: id.to_owned(),
        operation: operation.to_owned(),
        target_selector: selector.to_owned(),
        metadata: BTreeMap::new(),
        timeout_ms: 0,
    }
}

/// The command response `e` carries; panics on any other body.
pub fn as_command_response(e: &Envelope) -> &EdgeCommandResponse {
    match &e.body {
        Some(Body::CommandResponse(r)) => r,
        other => panic!("expected command_response, got {other:?}"),
    }
}

/// The command event `e` carries; panics on any other body.
pub fn as_command_event(e: &Envelope) -> &EdgeCommandEvent {
    match &e.body {
        Some(Body::CommandEvent(r)) => r,
        other => panic!("expected command_event, got {other:?}"),
    }
}

/// The node event `e` carries; panics on any other body.
pub fn as_node_event(e: &Envelope) -> &EdgeNodeEvent {
    match &e.body {
        Some(Body::NodeEvent(r)) => r,
        other => panic!("expected node_event, got {other:?}"),
    }
}

/// The reason of the `GoAway` `e` carries; panics on any other body.
pub fn go_away_reason(e: &Envelope) -> GoAwayReason {
    match &e.body {
        Some(Body::GoAway(g)) => GoAwayReason::try_from(g.reason).unwrap(),
        other => panic!("expected go_away, got {other:?}"),
    }
}

/// `d` in whole milliseconds.
pub fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}
