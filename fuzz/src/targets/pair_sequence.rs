//! `pair_sequence`: a real [`ControlPlane`] and a real [`Edge`] wired together in
//! memory (a quinn-style pair with a fake clock), driven by `arbitrary`-derived
//! sequences of application calls, time advances, transport drops and read splits.
//!
//! The network is perfect (nothing lost, only cut into fuzzer-chosen reads), so PROTOCOL.md
//! §4 says exactly what must happen, and after every step and at the end:
//! - neither side ever sees a protocol error, a hello rejection or timeout, a
//!   heartbeat timeout or an unreachable peer: two correct peers never fault each other;
//! - every status request ends in exactly one `StatusReceived` / `StatusAbandoned`
//!   (never `StatusTimedOut`: the Edge answers at once);
//! - node events never show a gap or a missing EDGE_READY (resync only for a new
//!   session); at most one terminal event per command; no command is ever reported
//!   lost (the Edge process never restarts, and the run stays within its retention);
//! - once a session is up long enough for every command to finish (the Edge's 60 s
//!   default timeout), the CP holds exactly one terminal event for every command it
//!   saw accepted: outcomes are never lost to reconnects (§4.4); its view is
//!   connected and fresh;
//! - one `Closed` per connection on each side.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbitrary::Arbitrary;
use iop_core::cp::{
    CloseReason as CpClose, CommandSpec, ConnectionId, ControlPlane, CpConfig, CpEvent,
    EnrolmentPolicy, Reachability, RequestId, ResyncCause,
};
use iop_core::edge::{CloseReason as EdgeClose, Edge, EdgeConfig, EdgeEvent, Outcome, TargetLevel};
use iop_core::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};
use iop_core::{Instant, Transmit, drain_transmits};
use iop_proto::CommandPhase;

const EDGE: &str = "edge-1";
const NODE: &str = "gpu-1";
const OPERATIONS: [&str; 3] = ["edge.ping", "node.drain", "no.such.op"];
const SELECTORS: [&str; 5] = ["", "*", "node:gpu-1", "node:nope", "bad selector"];

/// A whole fuzz input: at most 32 steps, so the run stays within the Edge's 10 min
/// command retention.
#[derive(Debug, Arbitrary)]
pub struct Input {
    /// The steps, in order.
    pub ops: Vec<Op>,
}

/// One step.
#[derive(Debug, Arbitrary)]
pub enum Op {
    /// Time passes (`ms % 15 000`), timers fire on the way.
    Advance {
        /// Milliseconds.
        ms: u16,
    },
    /// The CP asks for a status.
    RequestStatus {
        /// Of the node only (else all).
        one_node: bool,
    },
    /// The CP sends a command.
    SendCommand {
        /// Index into the operations (one unknown to the Edge).
        operation: u8,
        /// Index into the selectors (some invalid or matching nothing).
        selector: u8,
        /// Command id `cmd-<id % 8>`: repeats happen.
        id: u8,
        /// Timeout in seconds (`% 4`, 0 = the Edge's default).
        timeout_s: u8,
    },
    /// The Edge's application reports progress on a command it was given.
    ReportRunning {
        /// Which command.
        which: u8,
    },
    /// The Edge's application reports an outcome.
    ReportOutcome {
        /// Which command.
        which: u8,
        /// Succeeded, failed or cancelled.
        outcome: u8,
    },
    /// The transport breaks; both ends see it.
    DropTransport,
    /// The node connects and becomes READY (on the Edge).
    NodeUp,
    /// The node's connection closes.
    NodeDown,
    /// The Edge starts draining.
    EdgeDrain,
    /// Bytes are delivered in reads of this many bytes from now on (0: whole).
    SplitReads {
        /// Read size.
        size: u8,
    },
}

/// Runs the target on one input.
pub fn run(input: Input) {
    let _ = run_counting(input);
}

/// What a run went through, for tests that the checks saw real traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Transports the pair opened.
    pub connections: usize,
    /// Commands the CP saw accepted.
    pub accepted: usize,
    /// Terminal command events the CP saw.
    pub terminal: usize,
    /// Status requests that ended (the application's and the CP's own).
    pub status: usize,
}

/// Runs the target on one input and counts what happened.
pub fn run_counting(input: Input) -> Counts {
    let mut p = Pair::new();
    p.advance(Duration::from_millis(10));
    for op in input.ops.into_iter().take(32) {
        p.apply(op);
        p.check();
    }
    p.settle();
    Counts {
        connections: p.edge_connects,
        accepted: p.accepted.len(),
        terminal: p.terminal.values().sum(),
        status: p.status.len(),
    }
}

struct Pair {
    cp: ControlPlane,
    edge: Edge<NodeRegistry>,
    now: Instant,
    conn: Option<ConnectionId>,
    next_conn: u64,
    split: usize,
    /// Connections the CP accepted, and how many `Closed` each got.
    cp_closed: BTreeMap<ConnectionId, usize>,
    edge_connects: usize,
    edge_closed: usize,
    /// Status requests issued (by the application, or by the CP on a new session),
    /// and how many outcomes each got.
    status: BTreeMap<RequestId, usize>,
    /// Commands the Edge's application holds, not yet reported finished.
    running: Vec<String>,
    /// Commands the CP saw accepted.
    accepted: BTreeSet<String>,
    /// Terminal events the CP saw, per command.
    terminal: BTreeMap<String, usize>,
}

impl Pair {
    fn new() -> Self {
        let config = EdgeConfig::new(EDGE, 0)
            .with_operation("edge.ping", TargetLevel::Edge)
            .with_operation("node.drain", TargetLevel::Node);
        let mut registry = NodeRegistry::new();
        let node = NodeConfig::new(NODE).with_provider(ProviderConfig::new(
            "llama",
            ProviderCategory::LocalInference,
            2,
            1,
        ));
        if let Err(err) = registry.configure(node, 0) {
            panic!("node config refused: {err}");
        }
        let cp = match ControlPlane::new(CpConfig::default(), EnrolmentPolicy::AcceptAny) {
            Ok(cp) => cp,
            Err(err) => panic!("CP config refused: {err}"),
        };
        let edge = match Edge::new(config, registry) {
            Ok(edge) => edge,
            Err(err) => panic!("Edge config refused: {err}"),
        };
        Pair {
            cp,
            edge,
            now: Instant::ZERO,
            conn: None,
            next_conn: 0,
            split: 0,
            cp_closed: BTreeMap::new(),
            edge_connects: 0,
            edge_closed: 0,
            status: BTreeMap::new(),
            running: Vec::new(),
            accepted: BTreeSet::new(),
            terminal: BTreeMap::new(),
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Advance { ms } => self.advance(Duration::from_millis(u64::from(ms % 15_000))),
            Op::RequestStatus { one_node } => {
                let nodes = if one_node { vec![NODE.into()] } else { vec![] };
                if let Ok(id) = self.cp.request_status(self.now, EDGE, nodes) {
                    assert!(self.status.insert(id, 0).is_none(), "request id reused");
                }
                self.pump();
            }
            Op::SendCommand {
                operation,
                selector,
                id,
                timeout_s,
            } => {
                let spec = CommandSpec::new(OPERATIONS[usize::from(operation) % OPERATIONS.len()])
                    .with_target(SELECTORS[usize::from(selector) % SELECTORS.len()])
                    .with_timeout_ms(u32::from(timeout_s % 4) * 1_000);
                let _ =
                    self.cp
                        .send_command(self.now, EDGE, spec.with_id(format!("cmd-{}", id % 8)));
                self.pump();
            }
            Op::ReportRunning { which } => {
                if let Some(id) = self.pick(which) {
                    let _ = self
                        .edge
                        .report_running(self.now, &id, "working", BTreeMap::new());
                }
                self.pump();
            }
            Op::ReportOutcome { which, outcome } => {
                if let Some(id) = self.pick(which) {
                    self.running.retain(|r| *r != id);
                    let outcome = match outcome % 3 {
                        0 => Outcome::Succeeded,
                        1 => Outcome::Failed,
                        _ => Outcome::Cancelled,
                    };
                    let _ =
                        self.edge
                            .report_outcome(self.now, &id, outcome, "done", BTreeMap::new());
                }
                self.pump();
            }
            Op::DropTransport => {
                self.drop_transport();
                self.pump();
            }
            Op::NodeUp => {
                let mut reg = self.edge.registry_mut();
                if let Ok(generation) = reg.connect(NODE, 1) {
                    let _ = reg.mark_ready(NODE, generation, 2);
                }
                drop(reg);
                self.pump();
            }
            Op::NodeDown => {
                let mut reg = self.edge.registry_mut();
                if let Some((_, generation)) = reg.node_state(NODE) {
                    let _ = reg.close(NODE, generation, "gone", 3);
                }
                drop(reg);
                self.pump();
            }
            Op::EdgeDrain => {
                self.edge.drain(self.now);
                self.pump();
            }
            Op::SplitReads { size } => self.split = usize::from(size),
        }
    }

    fn pick(&self, which: u8) -> Option<String> {
        let n = self.running.len();
        (n > 0).then(|| self.running[usize::from(which) % n].clone())
    }

    /// Every command the CP saw accepted reaches its one terminal event once a
    /// session stays up past every deadline; then the transport closes for good.
    fn settle(&mut self) {
        self.advance(Duration::from_secs(61));
        self.check();
        if self.conn.is_some() {
            for id in &self.accepted {
                assert_eq!(
                    self.terminal.get(id).copied().unwrap_or(0),
                    1,
                    "command {id}: outcome lost or repeated"
                );
            }
            let view = self.cp.edge(EDGE);
            assert!(
                view.is_some_and(|v| v.reachability == Reachability::Connected && v.fresh),
                "view after a quiet minute: {view:?}"
            );
        }
        for (id, outcomes) in &self.status {
            assert!(*outcomes <= 1, "status {id:?} ended {outcomes} times");
        }
        self.drop_transport();
        self.pump();
        for (id, outcomes) in &self.status {
            assert_eq!(*outcomes, 1, "status {id:?} never ended");
        }
        for (conn, closed) in &self.cp_closed {
            assert_eq!(*closed, 1, "CP connection {conn:?} closed {closed} times");
        }
        assert_eq!(
            self.edge_closed, self.edge_connects,
            "Edge Closed per transport"
        );
    }

    fn check(&self) {
        for (id, outcomes) in &self.status {
            assert!(*outcomes <= 1, "status {id:?} ended {outcomes} times");
        }
        for (id, n) in &self.terminal {
            assert!(*n <= 1, "command {id}: {n} terminal events");
        }
    }

    fn drop_transport(&mut self) {
        if let Some(c) = self.conn.take() {
            self.cp.handle_closed(self.now, c);
            self.edge.handle_closed(self.now);
        }
    }

    fn deliver_to_cp(&mut self, conn: ConnectionId, bytes: &[u8]) {
        for chunk in bytes.chunks(if self.split == 0 {
            bytes.len().max(1)
        } else {
            self.split
        }) {
            self.cp.handle_bytes(self.now, conn, chunk);
        }
    }

    fn deliver_to_edge(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(if self.split == 0 {
            bytes.len().max(1)
        } else {
            self.split
        }) {
            self.edge.handle_bytes(self.now, chunk);
        }
    }

    /// Moves bytes both ways and collects events until nothing moves.
    fn pump(&mut self) {
        for _ in 0..1_000 {
            let mut moved = false;
            if self.conn.is_none() && self.edge.poll_connect_at().is_some_and(|at| at <= self.now) {
                self.next_conn += 1;
                let c = ConnectionId(self.next_conn);
                if let Err(err) = self.cp.handle_connect(self.now, c) {
                    panic!("CP refused a connection: {err}");
                }
                if let Err(err) = self.edge.handle_connected(self.now) {
                    panic!("Edge refused to connect when told to: {err}");
                }
                self.cp_closed.insert(c, 0);
                self.edge_connects += 1;
                self.conn = Some(c);
                moved = true;
            }
            if let Some(c) = self.conn {
                let mut buf = Vec::new();
                let edge = &mut self.edge;
                let mut close = drain_transmits(&mut buf, usize::MAX, |b| edge.poll_transmit(b))
                    == Transmit::Close;
                if !buf.is_empty() {
                    self.deliver_to_cp(c, &buf);
                    moved = true;
                }
                let mut buf = Vec::new();
                let cp = &mut self.cp;
                close |= drain_transmits(&mut buf, usize::MAX, |b| cp.poll_transmit(c, b))
                    == Transmit::Close;
                if !buf.is_empty() {
                    self.deliver_to_edge(&buf);
                    moved = true;
                }
                if close {
                    self.drop_transport();
                    moved = true;
                }
            }
            while self.cp.poll_wakeup().is_some() {}
            while let Some(e) = self.cp.poll_event() {
                self.on_cp_event(e);
                moved = true;
            }
            while let Some(e) = self.edge.poll_event() {
                self.on_edge_event(e);
                moved = true;
            }
            if !moved {
                return;
            }
        }
        panic!("the pair never went quiet");
    }

    fn on_cp_event(&mut self, event: CpEvent) {
        match event {
            CpEvent::Closed { conn, reason, .. } => {
                assert!(
                    matches!(
                        reason,
                        CpClose::TransportClosed | CpClose::PeerGoAway { .. }
                    ),
                    "CP closed {conn:?} for {reason:?}"
                );
                *self.cp_closed.entry(conn).or_default() += 1;
            }
            CpEvent::EdgeDisconnected { reason, .. } => assert!(
                matches!(
                    reason,
                    CpClose::TransportClosed | CpClose::PeerGoAway { .. }
                ),
                "Edge disconnected for {reason:?}"
            ),
            CpEvent::EdgeUnreachable { silent_for, .. } => {
                panic!("a perfect network, yet unreachable after {silent_for:?}")
            }
            CpEvent::ResyncNeeded { cause, .. } => {
                assert_eq!(
                    cause,
                    ResyncCause::NewSession,
                    "events lost on a perfect network"
                )
            }
            CpEvent::StatusReceived { request, .. } | CpEvent::StatusAbandoned { request, .. } => {
                *self.status.entry(request).or_default() += 1;
            }
            CpEvent::StatusTimedOut { request, .. } => {
                panic!("status {request:?} timed out on a perfect network")
            }
            CpEvent::CommandResponded { response, .. } if response.accepted => {
                self.accepted.insert(response.command_id);
            }
            CpEvent::CommandEvent { event, .. } => {
                let phase = event.phase();
                if matches!(
                    phase,
                    CommandPhase::Succeeded
                        | CommandPhase::Failed
                        | CommandPhase::Cancelled
                        | CommandPhase::TimedOut
                ) {
                    *self.terminal.entry(event.command_id).or_default() += 1;
                }
            }
            CpEvent::CommandEnded {
                command_id,
                ending: iop_core::cp::Ending::Lost,
                ..
            } => {
                panic!("command {command_id} lost, though the Edge never restarted")
            }
            _ => {}
        }
    }

    fn on_edge_event(&mut self, event: EdgeEvent) {
        match event {
            EdgeEvent::CommandReceived { command_id, .. }
                if !self.running.contains(&command_id) =>
            {
                self.running.push(command_id);
            }
            EdgeEvent::Closed { reason, .. } => {
                assert!(
                    matches!(
                        reason,
                        EdgeClose::TransportClosed | EdgeClose::GoAway { .. }
                    ),
                    "Edge closed for {reason:?}"
                );
                self.edge_closed += 1;
            }
            EdgeEvent::HelloRejected { reason, .. } => panic!("hello rejected: {reason:?}"),
            _ => {}
        }
    }

    /// Lets `d` pass, firing both ends' timers (and the Edge's dials) on the way.
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..10_000 {
            self.pump();
            let dial = if self.conn.is_none() {
                self.edge.poll_connect_at()
            } else {
                None
            };
            let next = [self.cp.poll_timeout(), self.edge.poll_timeout(), dial]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(at) if at <= end => {
                    self.now = self.now.max(at);
                    self.cp.handle_timeout(self.now);
                    self.edge.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.now = end;
        self.cp.handle_timeout(self.now);
        self.edge.handle_timeout(self.now);
        self.pump();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(operation: u8, selector: u8, id: u8) -> Op {
        Op::SendCommand {
            operation,
            selector,
            id,
            timeout_s: 0,
        }
    }

    /// Commands that finish before, across and after a reconnect, with split reads:
    /// the pair agrees with PROTOCOL.md §4 and the checks saw the traffic.
    #[test]
    fn commands_survive_a_reconnect_with_split_reads() {
        let ops = vec![
            Op::SplitReads { size: 3 },
            command(0, 0, 1), // edge.ping on the Edge
            command(1, 2, 2), // node.drain on node:gpu-1
            command(2, 1, 3), // unknown operation: rejected
            command(0, 3, 4), // edge-level operation, node selector: rejected
            Op::RequestStatus { one_node: false },
            Op::ReportRunning { which: 0 },
            Op::DropTransport,
            Op::ReportOutcome {
                which: 0,
                outcome: 0,
            }, // finished while disconnected
            Op::Advance { ms: 2_000 }, // the Edge reconnects
            Op::NodeUp,
            Op::RequestStatus { one_node: true },
            Op::ReportOutcome {
                which: 0,
                outcome: 1,
            },
            command(0, 0, 5),
            Op::NodeDown,
            Op::EdgeDrain,
            command(0, 0, 6), // draining: rejected
        ];
        let counts = run_counting(Input { ops });
        assert!(counts.connections >= 2, "{counts:?}");
        assert_eq!(counts.accepted, 3, "{counts:?}");
        assert_eq!(counts.terminal, 3, "{counts:?}");
        // Two asked here, one asked by the CP itself on each new session.
        assert_eq!(counts.status, 4, "{counts:?}");
    }
}
