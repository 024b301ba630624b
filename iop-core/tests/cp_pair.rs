//! The Control Plane and an Edge wired together in memory with a fake clock (a
//! quinn-style `Pair`): whole flows end to end, deterministically, in milliseconds.

use std::time::Duration;

use proptest::prelude::*;

use iop_core::Instant;
use iop_core::cp::{
    self, CommandOutcome, CommandSpec, ConnectionId, ControlPlane, CpConfig, CpEvent,
    EnrolmentPolicy, Reachability,
};
use iop_core::edge::{self, Edge, EdgeConfig, EdgeEvent, Outcome, TargetLevel};
use iop_core::proto::{CommandPhase, NodeEventKind};
use iop_core::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};

const EDGE: &str = "edge-1";

struct Pair {
    cp: ControlPlane,
    edge: Edge<NodeRegistry>,
    now: Instant,
    conn: Option<ConnectionId>,
    next_conn: u64,
    /// Bytes from the Edge are lost (a one-way partition).
    edge_to_cp_blocked: bool,
    /// A connection that lost Edge bytes: TCP never delivers later bytes past a lost
    /// one, so nothing more from the Edge arrives on it, even once the partition heals.
    broken: Option<ConnectionId>,
    cp_events: Vec<CpEvent>,
    edge_events: Vec<EdgeEvent>,
}

impl Pair {
    fn new() -> Self {
        let config = EdgeConfig::new(EDGE).with_operation("edge.ping", TargetLevel::Edge);
        let mut registry = NodeRegistry::new();
        let node = NodeConfig::new("gpu-1").with_provider(ProviderConfig::new(
            "llama",
            ProviderCategory::LocalInference,
            2,
            1,
        ));
        let _ = registry.configure(node, 0).unwrap();
        Pair {
            cp: ControlPlane::new(CpConfig::default(), EnrolmentPolicy::AcceptAny).unwrap(),
            edge: Edge::new(config, registry).unwrap(),
            now: Instant::ZERO,
            conn: None,
            next_conn: 0,
            edge_to_cp_blocked: false,
            broken: None,
            cp_events: Vec::new(),
            edge_events: Vec::new(),
        }
    }

    /// Both ends see the transport go away.
    fn drop_transport(&mut self) {
        if let Some(c) = self.conn.take() {
            self.cp.handle_closed(self.now, c);
            self.edge.handle_closed(self.now);
        }
    }

    /// Moves bytes both ways and collects events until nothing moves.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            if self.conn.is_none() && self.edge.poll_connect_at().is_some_and(|at| at <= self.now) {
                self.next_conn += 1;
                let c = ConnectionId(self.next_conn);
                self.cp.handle_connect(self.now, c).unwrap();
                self.edge.handle_connected(self.now).unwrap();
                self.conn = Some(c);
                moved = true;
            }
            if let Some(c) = self.conn {
                let mut close = false;
                let mut buf = Vec::new();
                loop {
                    match self.edge.poll_transmit(&mut buf) {
                        edge::Transmit::Bytes(_) => {}
                        edge::Transmit::Idle => break,
                        edge::Transmit::Close => {
                            close = true;
                            break;
                        }
                    }
                }
                if !buf.is_empty() {
                    if self.edge_to_cp_blocked || self.broken == Some(c) {
                        self.broken = Some(c);
                    } else {
                        self.cp.handle_bytes(self.now, c, &buf);
                        moved = true;
                    }
                }
                let mut buf = Vec::new();
                loop {
                    match self.cp.poll_transmit(c, &mut buf) {
                        cp::Transmit::Bytes(_) => {}
                        cp::Transmit::Idle => break,
                        cp::Transmit::Close => {
                            close = true;
                            break;
                        }
                    }
                }
                if !buf.is_empty() {
                    self.edge.handle_bytes(self.now, &buf);
                    moved = true;
                }
                if close {
                    self.drop_transport();
                    moved = true;
                }
            }
            while self.cp.poll_wakeup().is_some() {}
            while let Some(e) = self.cp.poll_event() {
                self.cp_events.push(e);
                moved = true;
            }
            while let Some(e) = self.edge.poll_event() {
                self.edge_events.push(e);
                moved = true;
            }
            if !moved {
                break;
            }
        }
    }

    /// Lets `d` pass, firing both ends' timers (and the Edge's dials) on the way.
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
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

    fn view(&self) -> cp::EdgeView {
        self.cp.edge(EDGE).unwrap().clone()
    }

    fn node_ready(&mut self) {
        let reg = self.edge.registry_mut();
        let generation = reg.connect("gpu-1", 1).unwrap();
        assert_eq!(
            reg.mark_ready("gpu-1", generation, 2),
            iop_core::registry::ReadyOutcome::Ready
        );
        self.advance(Duration::from_millis(1));
    }
}

#[test]
fn an_edge_enrols_and_the_view_becomes_fresh() {
    let mut p = Pair::new();
    p.advance(Duration::from_millis(10));
    let v = p.view();
    assert_eq!(v.reachability, Reachability::Connected);
    assert!(v.fresh, "the automatic status answered");
    let s = v.last_status.unwrap();
    assert_eq!((s.node_count, s.connected_nodes), (1, 0));
    assert!(p.cp_events.iter().any(|e| matches!(e,
        CpEvent::NodeEvent { event, .. } if event.sequence == 1 && event.kind == NodeEventKind::EdgeReady as i32)));

    p.node_ready();
    assert!(p.cp_events.iter().any(|e| matches!(e,
        CpEvent::NodeEvent { event, .. } if event.node_id == "gpu-1" && event.kind == NodeEventKind::NodeReady as i32)));
    let req = p.cp.request_status(p.now, EDGE, vec![]).unwrap();
    p.advance(Duration::from_millis(1));
    assert!(
        p.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::StatusReceived { request, .. } if *request == req))
    );
    assert_eq!(p.view().last_status.unwrap().connected_nodes, 1);
    assert_eq!(p.cp.stats().protocol_errors, 0);
}

#[test]
fn a_quiet_session_stays_up_on_heartbeats_alone() {
    let mut p = Pair::new();
    p.advance(Duration::from_millis(10));
    p.cp_events.clear();
    p.edge_events.clear();
    p.advance(Duration::from_secs(300));
    assert!(p.cp_events.is_empty(), "{:#?}", p.cp_events);
    assert!(p.edge_events.is_empty(), "{:#?}", p.edge_events);
}

#[test]
fn a_command_outcome_survives_a_dropped_connection() {
    let mut p = Pair::new();
    p.advance(Duration::from_millis(10));
    let spec = CommandSpec {
        operation: "edge.ping".into(),
        ..Default::default()
    };
    let id = p.cp.send_command(p.now, EDGE, spec, None).unwrap();
    p.advance(Duration::from_millis(1));
    assert!(
        p.edge_events.iter().any(
            |e| matches!(e, EdgeEvent::CommandReceived { command_id, .. } if *command_id == id)
        )
    );
    p.edge
        .report_running(p.now, &id, "half way", Default::default())
        .unwrap();
    p.advance(Duration::from_millis(1));
    // The connection drops; the command finishes while the Edge is away.
    p.drop_transport();
    p.edge
        .report_outcome(p.now, &id, Outcome::Succeeded, "done", Default::default())
        .unwrap();
    p.advance(Duration::from_secs(40));
    let st = p.cp.command(EDGE, &id).unwrap();
    assert_eq!(
        st.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
    let phases: Vec<i32> = p
        .cp_events
        .iter()
        .filter_map(|e| match e {
            CpEvent::CommandEvent { event, .. } => Some(event.phase),
            _ => None,
        })
        .collect();
    assert_eq!(
        phases,
        vec![
            CommandPhase::Accepted as i32,
            CommandPhase::Running as i32,
            CommandPhase::Succeeded as i32
        ]
    );
    assert_eq!(p.view().reachability, Reachability::Connected);
    assert_eq!(p.cp.stats().protocol_errors, 0);
}

#[test]
fn a_half_open_connection_is_superseded_by_the_reconnect() {
    let mut p = Pair::new();
    p.advance(Duration::from_millis(10));
    let old = p.conn.take().unwrap();
    // Only the Edge notices: the CP still holds the old session.
    p.edge.handle_closed(p.now);
    p.cp_events.clear();
    p.advance(Duration::from_secs(30));
    assert_eq!(p.cp.stats().supersessions, 1);
    assert!(
        !p.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::EdgeDisconnected { .. }))
    );
    assert_eq!(p.view().reachability, Reachability::Connected);
    // The old connection's task pulls its GoAway, then Close.
    let mut buf = Vec::new();
    while let cp::Transmit::Bytes(_) = p.cp.poll_transmit(old, &mut buf) {}
    assert_eq!(p.cp.connection_count(), 1);
}

#[test]
fn unreachable_is_the_cps_verdict_and_never_a_node_state() {
    let mut p = Pair::new();
    p.advance(Duration::from_millis(10));
    p.node_ready();
    p.cp.request_status(p.now, EDGE, vec![]).unwrap();
    p.advance(Duration::from_millis(1));
    assert_eq!(p.view().last_status.unwrap().connected_nodes, 1);

    p.edge_to_cp_blocked = true;
    p.advance(Duration::from_secs(11));
    let v = p.view();
    assert_eq!(v.reachability, Reachability::Unreachable);
    assert_eq!(
        v.last_status.unwrap().connected_nodes,
        1,
        "the Edge's word on its nodes is untouched"
    );
    p.advance(Duration::from_secs(5));
    assert!(p.cp_events.iter().any(|e| matches!(
        e,
        CpEvent::EdgeDisconnected {
            reason: cp::CloseReason::HeartbeatTimeout,
            ..
        }
    )));
    // The partition heals: the Edge comes back and the view is fresh again.
    p.edge_to_cp_blocked = false;
    p.advance(Duration::from_secs(60));
    let v = p.view();
    assert_eq!(v.reachability, Reachability::Connected);
    assert!(v.fresh);
}

#[test]
fn a_restarted_cp_drops_replays_of_commands_it_never_knew() {
    let mut p = Pair::new();
    p.advance(Duration::from_millis(10));
    let spec = CommandSpec {
        operation: "edge.ping".into(),
        ..Default::default()
    };
    let id = p.cp.send_command(p.now, EDGE, spec, None).unwrap();
    p.advance(Duration::from_millis(1));
    // The CP restarts (a new endpoint; session ids must stay above the old ones).
    p.drop_transport();
    let mut config = CpConfig::default();
    config.session_id_floor = 1_000;
    p.cp = ControlPlane::new(config, EnrolmentPolicy::AcceptAny).unwrap();
    p.cp_events.clear();
    p.advance(Duration::from_secs(40));
    assert_eq!(p.view().reachability, Reachability::Connected);
    assert!(p.view().session_id > 1_000);
    assert!(p.cp.command(EDGE, &id).is_none());
    let stats = p.cp.stats();
    assert_eq!(stats.protocol_errors, 0);
    assert_eq!(stats.unknown_command_ids, 1, "the replayed ACCEPTED event");
}

// ----- random weather: drops, half-open links, partitions, restarts ------------------

#[derive(Debug, Clone)]
enum Weather {
    Wait(u32),
    Send,
    Report(usize, bool),
    Status,
    Drop,
    HalfOpen,
    Partition(bool),
    EdgeRestart,
}

fn weather() -> impl Strategy<Value = Weather> {
    prop_oneof![
        4 => (1u32..20_000).prop_map(Weather::Wait),
        3 => Just(Weather::Send),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(i, f)| Weather::Report(i, f)),
        1 => Just(Weather::Status),
        1 => Just(Weather::Drop),
        1 => Just(Weather::HalfOpen),
        1 => any::<bool>().prop_map(Weather::Partition),
        1 => Just(Weather::EdgeRestart),
    ]
}

fn received(p: &Pair) -> Vec<String> {
    p.edge_events
        .iter()
        .filter_map(|e| match e {
            EdgeEvent::CommandReceived { command_id, .. } => Some(command_id.clone()),
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever the weather, neither end sees a protocol error from the other, and
    /// once it clears every command the CP sent has exactly one final outcome.
    #[test]
    fn every_command_ends_whatever_the_weather(steps in prop::collection::vec(weather(), 1..40)) {
        let mut p = Pair::new();
        p.advance(Duration::from_millis(10));
        let mut sent = Vec::new();
        for step in steps {
            match step {
                Weather::Wait(ms) => p.advance(Duration::from_millis(u64::from(ms))),
                Weather::Send => {
                    let spec = CommandSpec { operation: "edge.ping".into(), ..Default::default() };
                    if let Ok(id) = p.cp.send_command(p.now, EDGE, spec, None) {
                        sent.push(id);
                    }
                    p.advance(Duration::from_millis(1));
                }
                Weather::Report(i, finish) => {
                    let ids = received(&p);
                    if !ids.is_empty() {
                        let id = &ids[i % ids.len()];
                        let _ = if finish {
                            p.edge.report_outcome(p.now, id, Outcome::Succeeded, "", Default::default())
                        } else {
                            p.edge.report_running(p.now, id, "", Default::default())
                        };
                        p.advance(Duration::from_millis(1));
                    }
                }
                Weather::Status => {
                    let _ = p.cp.request_status(p.now, EDGE, vec![]);
                    p.advance(Duration::from_millis(1));
                }
                Weather::Drop => p.drop_transport(),
                Weather::HalfOpen => {
                    if p.conn.take().is_some() {
                        p.edge.handle_closed(p.now);
                    }
                }
                Weather::Partition(on) => p.edge_to_cp_blocked = on,
                Weather::EdgeRestart => {
                    p.drop_transport();
                    let fresh = Pair::new();
                    p.edge = fresh.edge;
                    p.edge_events.clear();
                }
            }
        }
        // The weather clears: every command the Edge holds finishes.
        p.edge_to_cp_blocked = false;
        p.advance(Duration::from_secs(40));
        for id in received(&p) {
            let _ = p.edge.report_outcome(p.now, &id, Outcome::Succeeded, "", Default::default());
        }
        p.advance(Duration::from_secs(90));
        prop_assert_eq!(p.cp.stats().protocol_errors, 0, "{:#?}", p.cp_events);
        let edge_saw_protocol_error = p.edge_events.iter().any(|e| matches!(e,
            EdgeEvent::Closed { reason: edge::CloseReason::ProtocolError(_), .. }));
        prop_assert!(!edge_saw_protocol_error, "{:#?}", p.edge_events);
        prop_assert_eq!(p.view().reachability, Reachability::Connected);
        for id in &sent {
            let st = p.cp.command(EDGE, id).unwrap();
            prop_assert!(st.outcome.is_some(), "{}: {:?}", id, st);
        }
    }
}
