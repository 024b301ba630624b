//! The Control Plane and an Edge wired together in memory with a fake clock (the
//! quinn-style [`Pair`] of `iop_core::testing`): whole flows end to end,
//! deterministically, in milliseconds.

use std::time::Duration;

use proptest::prelude::*;

use iop_core::cp::{self, CommandOutcome, CommandSpec, CpConfig, CpEvent, Reachability};
use iop_core::edge::{self, EdgeConfig, EdgeEvent, Outcome, TargetLevel};
use iop_core::proto::{CommandPhase, NodeEventKind};
use iop_core::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};
use iop_core::testing::{NetConfig, Pair, Side};

const EDGE: &str = "edge-1";

fn edge_config() -> EdgeConfig {
    EdgeConfig::new(EDGE, 0).with_operation("edge.ping", TargetLevel::Edge)
}

fn registry() -> NodeRegistry {
    let mut registry = NodeRegistry::new();
    let node = NodeConfig::new("gpu-1").with_provider(ProviderConfig::new(
        "llama",
        ProviderCategory::LocalInference,
        2,
        1,
    ));
    let _ = registry.configure(node, 0).unwrap();
    registry
}

/// A CP and one Edge process (index 0), instant network.
fn pair() -> Pair {
    let mut p = Pair::new(0, CpConfig::default(), NetConfig::default()).unwrap();
    p.add_edge(edge_config(), registry()).unwrap();
    p
}

fn view(p: &Pair) -> cp::EdgeView {
    p.cp.edge(EDGE).unwrap().clone()
}

fn edge_events(p: &Pair) -> &[EdgeEvent] {
    &p.edges[0].events
}

fn node_ready(p: &mut Pair) {
    let mut reg = p.edges[0].edge.registry_mut();
    let generation = reg.connect("gpu-1", 1).unwrap();
    assert_eq!(
        reg.mark_ready("gpu-1", generation, 2),
        iop_core::registry::ReadyOutcome::Ready
    );
    drop(reg);
    p.advance(Duration::from_millis(1));
}

#[test]
fn an_edge_enrols_and_the_view_becomes_fresh() {
    let mut p = pair();
    p.advance(Duration::from_millis(10));
    let v = view(&p);
    assert_eq!(v.reachability, Reachability::Connected);
    assert!(v.fresh, "the automatic status answered");
    let s = v.last_status.unwrap();
    assert_eq!((s.node_count, s.connected_nodes), (1, 0));
    assert!(p.cp_events.iter().any(|e| matches!(e,
        CpEvent::NodeEvent { event, .. } if event.sequence == 1 && event.kind == NodeEventKind::EdgeReady as i32)));

    node_ready(&mut p);
    assert!(p.cp_events.iter().any(|e| matches!(e,
        CpEvent::NodeEvent { event, .. } if event.node_id == "gpu-1" && event.kind == NodeEventKind::NodeReady as i32)));
    let req = p.request_status(EDGE, vec![]).unwrap();
    p.advance(Duration::from_millis(1));
    assert!(
        p.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::StatusReceived { request, .. } if *request == req))
    );
    assert_eq!(view(&p).last_status.unwrap().connected_nodes, 1);
    assert_eq!(p.cp.stats().protocol_errors, 0);
}

#[test]
fn a_quiet_session_stays_up_on_heartbeats_alone() {
    let mut p = pair();
    p.advance(Duration::from_millis(10));
    p.cp_events.clear();
    p.edges[0].events.clear();
    p.advance(Duration::from_secs(300));
    // Nothing but the periodic refreshes confirming the Edge's view.
    p.cp_events.retain(|e| {
        !matches!(
            e,
            CpEvent::LoadView {
                change: iop_core::cp::load::LoadChange::Confirmed,
                ..
            }
        )
    });
    assert!(p.cp_events.is_empty(), "{:#?}", p.cp_events);
    assert!(edge_events(&p).is_empty(), "{:#?}", edge_events(&p));
}

#[test]
fn a_command_outcome_survives_a_dropped_connection() {
    let mut p = pair();
    p.advance(Duration::from_millis(10));
    let spec = CommandSpec::new("edge.ping");
    let id = p.send_command(EDGE, spec).unwrap();
    p.advance(Duration::from_millis(1));
    assert!(
        edge_events(&p).iter().any(
            |e| matches!(e, EdgeEvent::CommandReceived { command_id, .. } if *command_id == id)
        )
    );
    let now = p.now;
    p.edges[0]
        .edge
        .report_running(now, &id, "half way", Default::default())
        .unwrap();
    p.advance(Duration::from_millis(1));
    // The connection drops; the command finishes while the Edge is away.
    p.disconnect(0);
    let now = p.now;
    p.edges[0]
        .edge
        .report_outcome(now, &id, Outcome::Succeeded, "done", Default::default())
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
    assert_eq!(view(&p).reachability, Reachability::Connected);
    assert_eq!(p.cp.stats().protocol_errors, 0);
}

#[test]
fn a_half_open_connection_is_superseded_by_the_reconnect() {
    let mut p = pair();
    p.advance(Duration::from_millis(10));
    let old = p.conn_of(0).unwrap();
    // Only the Edge notices: the CP still holds the old session.
    p.half_open(0, Side::Edge);
    p.cp_events.clear();
    p.advance(Duration::from_secs(30));
    assert_eq!(p.cp.stats().supersessions, 1);
    assert!(
        !p.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::EdgeDisconnected { .. }))
    );
    assert_eq!(view(&p).reachability, Reachability::Connected);
    // The old connection's task pulls its GoAway, then Close.
    let mut buf = Vec::new();
    let _ = iop_core::drain_transmits(&mut buf, usize::MAX, |b| p.cp.poll_transmit(old, b));
    assert_eq!(p.cp.connection_count(), 1);
}

#[test]
fn unreachable_is_the_cps_verdict_and_never_a_node_state() {
    let mut p = pair();
    p.advance(Duration::from_millis(10));
    node_ready(&mut p);
    p.request_status(EDGE, vec![]).unwrap();
    p.advance(Duration::from_millis(1));
    assert_eq!(view(&p).last_status.unwrap().connected_nodes, 1);

    p.partition(0, true);
    p.advance(Duration::from_secs(11));
    let v = view(&p);
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
    p.partition(0, false);
    p.advance(Duration::from_secs(60));
    let v = view(&p);
    assert_eq!(v.reachability, Reachability::Connected);
    assert!(v.fresh);
}

#[test]
fn a_restarted_cp_drops_replays_of_commands_it_never_knew() {
    let mut p = pair();
    p.advance(Duration::from_millis(10));
    let spec = CommandSpec::new("edge.ping");
    let id = p.send_command(EDGE, spec).unwrap();
    p.advance(Duration::from_millis(1));
    // The CP restarts (a new endpoint; session ids must stay above the old ones).
    p.disconnect(0);
    let mut config = CpConfig::default();
    config.session_id_floor = 1_000;
    p.restart_cp(config).unwrap();
    p.cp_events.clear();
    p.advance(Duration::from_secs(40));
    assert_eq!(view(&p).reachability, Reachability::Connected);
    assert!(view(&p).session_id > 1_000);
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
    edge_events(p)
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
        let mut p = pair();
        p.advance(Duration::from_millis(10));
        let mut sent = Vec::new();
        for step in steps {
            match step {
                Weather::Wait(ms) => p.advance(Duration::from_millis(u64::from(ms))),
                Weather::Send => {
                    let spec = CommandSpec::new("edge.ping");
                    if let Ok(id) = p.send_command(EDGE, spec) {
                        sent.push(id);
                    }
                    p.advance(Duration::from_millis(1));
                }
                Weather::Report(i, finish) => {
                    let ids = received(&p);
                    if !ids.is_empty() {
                        let id = &ids[i % ids.len()];
                        let now = p.now;
                        let edge = &mut p.edges[0].edge;
                        let _ = if finish {
                            edge.report_outcome(now, id, Outcome::Succeeded, "", Default::default())
                        } else {
                            edge.report_running(now, id, "", Default::default())
                        };
                        p.advance(Duration::from_millis(1));
                    }
                }
                Weather::Status => {
                    let _ = p.request_status(EDGE, vec![]);
                    p.advance(Duration::from_millis(1));
                }
                Weather::Drop => p.disconnect(0),
                Weather::HalfOpen => p.half_open(0, Side::Edge),
                Weather::Partition(on) => p.partition(0, on),
                Weather::EdgeRestart => p.restart_edge(0, edge_config(), registry()).unwrap(),
            }
        }
        // The weather clears: every command the Edge holds finishes.
        p.partition(0, false);
        p.advance(Duration::from_secs(40));
        for id in received(&p) {
            let now = p.now;
            let _ = p.edges[0].edge.report_outcome(now, &id, Outcome::Succeeded, "", Default::default());
        }
        p.advance(Duration::from_secs(90));
        prop_assert_eq!(p.cp.stats().protocol_errors, 0, "{:#?}", p.cp_events);
        let edge_saw_protocol_error = edge_events(&p).iter().any(|e| matches!(e,
            EdgeEvent::Closed { reason: edge::CloseReason::ProtocolError(_), .. }));
        prop_assert!(!edge_saw_protocol_error, "{:#?}", edge_events(&p));
        prop_assert!(p.monitor().violations().is_empty(), "{:#?}", p.monitor().violations());
        prop_assert_eq!(view(&p).reachability, Reachability::Connected);
        for id in &sent {
            let st = p.cp.command(EDGE, id).unwrap();
            prop_assert!(st.outcome.is_some(), "{}: {:?}", id, st);
        }
    }
}
