//! One scenario suite, run over every Control Plane ⇄ Edge runtime pairing (tokio and
//! smol on each side): each scenario below becomes four tests,
//! `{tokio,smol}_cp_{tokio,smol}_edge::<scenario>`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_lite::{StreamExt, future};
use iop_driver::iop_core::cp::{
    AllowList, CloseReason, CommandOutcome, CommandSpec, CpEvent, EnrolmentPolicy, Reachability,
};
use iop_driver::iop_core::edge::{CloseReason as EdgeCloseReason, EdgeEvent, TargetLevel};
use iop_driver::iop_core::proto::{CommandPhase, HelloRejectReason, NodeEventKind};
use iop_driver::iop_core::registry::{NodeConfig, ProviderCategory, ProviderConfig};
use iop_driver::{
    CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient, Notice, ServerConfig,
};
use iop_tests::*;

every_pairing!(
    hello_accepted,
    hello_rejected,
    status,
    command_with_phases,
    node_events,
    heartbeat_timeout_then_reconnect,
    reconnect_after_a_cut,
    reconnect_after_a_control_plane_restart,
    concurrent_requests_on_one_edge,
);

async fn server<C: Host>(config: ServerConfig) -> ControlPlaneServer<C> {
    bounded("bind", ControlPlaneServer::<C>::bind(localhost(), config))
        .await
        .unwrap()
}

fn ping() -> CommandSpec {
    CommandSpec::new("edge.ping")
}

async fn hello_accepted<C: Host, E: Host>() {
    let server = server::<C>(fast_server()).await;
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let mut client = EdgeClient::<E>::new(fast_edge("edge-a"));
    let mut edge_events = client.events();
    let edge = client.connect(server.local_addr()).unwrap();

    let edge_session = edge_connected(&mut edge_events).await;
    let cp_session = session_accepted(&mut cp_events, "edge-a").await;
    assert_eq!(edge_session, cp_session);
    assert!(edge.is_connected());
    assert_eq!(
        cp.edge("edge-a").unwrap().reachability,
        Reachability::Connected
    );
    assert_eq!(cp.edges().len(), 1);
    assert_eq!(cp.stats().live_sessions, 1);

    // A graceful Edge shutdown ends the session with the Edge's GoAway.
    bounded("edge shutdown", edge.shutdown()).await;
    let reason = next_event(&mut cp_events, "disconnected", |e| match e {
        CpEvent::EdgeDisconnected { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        matches!(reason, CloseReason::PeerGoAway { .. }),
        "{reason:?}"
    );
    bounded("server shutdown", server.shutdown()).await;
}

async fn hello_rejected<C: Host, E: Host>() {
    // An allow-list naming nobody: every Edge is unknown.
    let mut config = fast_server();
    config.enrolment = EnrolmentPolicy::AllowList(AllowList::default());
    let server = server::<C>(config).await;
    let cp = server.handle();
    let mut client = EdgeClient::<E>::new(fast_edge("stranger"));
    let mut edge_events = client.events();
    let edge = client.connect(server.local_addr()).unwrap();

    let reason = next_event(&mut edge_events, "hello rejected", |e| match e {
        EdgeEvent::HelloRejected { reason, .. } => Some(*reason),
        _ => None,
    })
    .await;
    assert_eq!(reason, HelloRejectReason::UnknownEdge);
    next_event(&mut edge_events, "closed", |e| {
        matches!(e, EdgeEvent::Closed { .. }).then_some(())
    })
    .await;
    assert!(!edge.is_connected());
    assert!(cp.stats().hello_rejections >= 1);
    assert_eq!(cp.stats().live_sessions, 0);
    assert!(cp.edge("stranger").is_none());
    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", server.shutdown()).await;
}

async fn status<C: Host, E: Host>() {
    let server = server::<C>(fast_server()).await;
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let edge = EdgeClient::<E>::new(fast_edge("edge-s"))
        .connect(server.local_addr())
        .unwrap();
    edge.with_registry(|reg, _now| {
        let node = NodeConfig::new("gpu-1").with_provider(ProviderConfig::new(
            "llama",
            ProviderCategory::LocalInference,
            2,
            1,
        ));
        let _ = reg.configure(node, 1_000).unwrap();
    });
    session_accepted(&mut cp_events, "edge-s").await;

    let status = bounded("status", cp.request_status("edge-s", vec![]))
        .await
        .unwrap();
    assert_eq!(status.edge_id, "edge-s");
    let ids: Vec<_> = status.nodes.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(ids, ["gpu-1"]);
    let err = bounded("status of nobody", cp.request_status("nobody", vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, iop_driver::StatusRequestError::Refused(_)),
        "{err:?}"
    );
    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", server.shutdown()).await;
}

/// Many tasks ask one Edge for statuses and send it commands at once: small requests
/// (which the calling task writes itself when the connection is idle), large ones
/// (which fill the socket buffer and leave the rest to the connection's task) and
/// commands, interleaved. Every answer must match its question: a byte lost,
/// duplicated or reordered on the wire would corrupt a frame and end the session.
async fn concurrent_requests_on_one_edge<C: Host, E: Host>() {
    const NODES: usize = 8;
    const TASKS: usize = 6;
    const ROUNDS: usize = 40;
    let server = server::<C>(fast_server()).await;
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let edge = EdgeClient::<E>::new(fast_edge("edge-m"))
        .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
            let who = ctx.metadata().get("who").cloned().unwrap_or_default();
            CommandResult::succeeded(format!("pong {who}"))
        })
        .connect(server.local_addr())
        .unwrap();
    edge.with_registry(|reg, _now| {
        for n in 0..NODES {
            let node = NodeConfig::new(format!("node-{n}")).with_provider(ProviderConfig::new(
                "llama",
                ProviderCategory::LocalInference,
                2,
                1,
            ));
            let _ = reg.configure(node, 1_000).unwrap();
        }
    });
    session_accepted(&mut cp_events, "edge-m").await;

    let (done_tx, done_rx) = smol::channel::unbounded::<Result<usize, String>>();
    for task in 0..TASKS {
        let cp = cp.clone();
        let done = done_tx.clone();
        C::spawn(async move {
            let mut checked = 0;
            let result = async {
                for round in 0..ROUNDS {
                    let node = format!("node-{}", (task + round) % NODES);
                    let mut ids = vec![node.clone()];
                    if round % 10 == task % 10 {
                        // A large request: ~600 KB of ids the Edge does not know,
                        // more than one pull: left to the connection's task.
                        ids.extend((0..5_000).map(|i| format!("{i:0>120}")));
                    }
                    let status = cp
                        .request_status("edge-m", ids)
                        .await
                        .map_err(|e| format!("task {task} round {round}: {e}"))?;
                    let got: Vec<_> = status.nodes.iter().map(|n| n.node_id.as_str()).collect();
                    if got != [node.as_str()] {
                        return Err(format!(
                            "task {task} round {round}: asked {node}, got {got:?}"
                        ));
                    }
                    checked += 1;
                    if round % 4 == 0 {
                        let who = format!("{task}/{round}");
                        let mut spec = ping();
                        spec.metadata.insert("who".into(), who.clone());
                        let tracker = cp
                            .send_command("edge-m", spec)
                            .map_err(|e| format!("task {task} round {round}: {e}"))?;
                        let record = tracker
                            .finish()
                            .await
                            .ok_or_else(|| format!("command {who} has no record"))?;
                        let last = record.events().last().map(|e| e.message.clone());
                        if last.as_deref() != Some(format!("pong {who}").as_str()) {
                            return Err(format!("command {who} ended with {last:?}"));
                        }
                        checked += 1;
                    }
                }
                Ok(checked)
            }
            .await;
            let _ = done.send(result).await;
        });
    }
    drop(done_tx);
    let mut answers = 0;
    for _ in 0..TASKS {
        let result = bounded("a task's requests", done_rx.recv()).await.unwrap();
        answers += result.unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(answers, TASKS * (ROUNDS + ROUNDS / 4));
    // The session lived through it all.
    assert_eq!(cp.stats().live_sessions, 1);
    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", server.shutdown()).await;
}

async fn command_with_phases<C: Host, E: Host>() {
    let server = server::<C>(fast_server()).await;
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let edge = EdgeClient::<E>::new(fast_edge("edge-c"))
        .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
            let who = ctx.metadata().get("who").cloned().unwrap_or_default();
            ctx.running("step 1", BTreeMap::new()).unwrap();
            future::yield_now().await;
            ctx.running("step 2", BTreeMap::new()).unwrap();
            CommandResult::succeeded(format!("pong {who}")).with_detail("rtt", "1")
        })
        .connect(server.local_addr())
        .unwrap();
    session_accepted(&mut cp_events, "edge-c").await;

    let mut spec = ping();
    spec.metadata.insert("who".into(), "cp".into());
    let tracker = cp.send_command("edge-c", spec).unwrap();
    let id = tracker.command_id().to_owned();
    let updates: Vec<CommandUpdate> = bounded("tracker", tracker.collect()).await;
    assert!(
        matches!(&updates[0], CommandUpdate::Response(r) if r.accepted),
        "{updates:?}"
    );
    let phases: Vec<CommandPhase> = updates
        .iter()
        .filter_map(|u| match u {
            CommandUpdate::Event(e) => Some(e.phase()),
            _ => None,
        })
        .collect();
    assert_eq!(
        phases,
        [
            CommandPhase::Accepted,
            CommandPhase::Running,
            CommandPhase::Running,
            CommandPhase::Succeeded
        ]
    );
    let Some(CommandUpdate::Event(last)) = updates.last() else {
        panic!("ends with an event: {updates:?}")
    };
    assert_eq!(last.message, "pong cp");
    assert_eq!(last.detail.get("rtt").map(String::as_str), Some("1"));
    let record = cp.command(&id).unwrap();
    assert_eq!(record.updates, updates);
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", server.shutdown()).await;
}

async fn node_events<C: Host, E: Host>() {
    let server = server::<C>(fast_server()).await;
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let edge = EdgeClient::<E>::new(fast_edge("edge-n"))
        .connect(server.local_addr())
        .unwrap();
    next_event(&mut cp_events, "EDGE_READY", |e| match e {
        CpEvent::NodeEvent { event, .. } if event.kind() == NodeEventKind::EdgeReady => Some(()),
        _ => None,
    })
    .await;
    edge.with_registry(|reg, _now| {
        let _ = reg.configure(NodeConfig::new("gpu-7"), 1_000).unwrap();
    });
    let (edge_id, node_id) = next_event(&mut cp_events, "NODE_CONFIGURED", |e| match e {
        CpEvent::NodeEvent { edge_id, event, .. }
            if event.kind() == NodeEventKind::NodeConfigured =>
        {
            Some((edge_id.clone(), event.node_id.clone()))
        }
        _ => None,
    })
    .await;
    assert_eq!((edge_id.as_str(), node_id.as_str()), ("edge-n", "gpu-7"));
    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", server.shutdown()).await;
}

async fn heartbeat_timeout_then_reconnect<C: Host, E: Host>() {
    let server = server::<C>(fast_server()).await;
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let proxy = Proxy::start(server.local_addr());
    let mut client = EdgeClient::<E>::new(fast_edge("edge-h"));
    let mut edge_events = client.events();
    let edge = client.connect(proxy.addr()).unwrap();
    let first = session_accepted(&mut cp_events, "edge-h").await;

    // The link goes silent both ways. Both sides watch for 3 silent heartbeat
    // intervals (PROTOCOL.md §4.2), so either may declare the peer dead first: the CP (after
    // marking the Edge unreachable) with HEARTBEAT_TIMEOUT, or the Edge, whose close
    // the CP then sees as the transport ending.
    let frozen_at = Instant::now();
    proxy.freeze();
    // Until the old session has ended and a new one is up: the old one ends by the
    // CP's timeout, by the transport closing, or (when the Edge's new hello gets in
    // before the CP reads the old transport's end) by the new session superseding it.
    let mut seen = Vec::new();
    let mut ended_after = Duration::ZERO;
    let (old_end, unreachable_first, second) = within(async {
        let (mut end, mut unreachable, mut second) = (None, false, None);
        while end.is_none() || second.is_none() {
            let event = match cp_events.next().await {
                Some(Notice::Event(event)) => event,
                other => panic!("CP subscription: {other:?}"),
            };
            seen.push(format!("{:?} {event:?}", frozen_at.elapsed()));
            match event {
                CpEvent::EdgeUnreachable { .. } if end.is_none() => unreachable = true,
                CpEvent::EdgeDisconnected { reason, .. } => {
                    end = Some(Some(reason));
                    ended_after = frozen_at.elapsed();
                }
                CpEvent::EdgeSuperseded { old_session_id, .. } if old_session_id == first => {
                    end = Some(None);
                    ended_after = frozen_at.elapsed();
                }
                CpEvent::SessionAccepted { session_id, .. } if session_id != first => {
                    second = Some(session_id)
                }
                _ => {}
            }
        }
        (end.flatten(), unreachable, second.unwrap_or_default())
    })
    .await
    .unwrap_or_else(|| {
        let edge_seen: Vec<_> = std::iter::from_fn(|| edge_events.try_next()).collect();
        panic!("no end and new session; CP saw {seen:#?}; Edge saw {edge_seen:#?}")
    });
    let edge_reason = next_event(&mut edge_events, "edge closed", |e| match e {
        EdgeEvent::Closed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    let cp_timed_out = old_end == Some(CloseReason::HeartbeatTimeout);
    let edge_timed_out = edge_reason == EdgeCloseReason::PeerSilent;
    assert!(
        cp_timed_out || edge_timed_out,
        "neither side timed out: CP {old_end:?}, Edge {edge_reason:?}"
    );
    assert!(
        !cp_timed_out || unreachable_first,
        "unreachable before the CP's timeout"
    );
    // The old session ended after 3 silent intervals (1 s each), of which at most
    // one had already passed at the freeze.
    assert!(
        ended_after >= Duration::from_millis(1_900),
        "{ended_after:?}"
    );
    assert!(second > first, "{second} > {first}");
    assert_eq!(
        cp.edge("edge-h").unwrap().reachability,
        Reachability::Connected
    );
    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", server.shutdown()).await;
}

async fn reconnect_after_a_cut<C: Host, E: Host>() {
    let server = server::<C>(fast_server()).await;
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let proxy = Proxy::start(server.local_addr());
    let mut client = EdgeClient::<E>::new(fast_edge("edge-r")).operation(
        "edge.ping",
        TargetLevel::Edge,
        |_ctx| async { CommandResult::succeeded("pong") },
    );
    let mut edge_events = client.events();
    let edge = client.connect(proxy.addr()).unwrap();
    let first = edge_connected(&mut edge_events).await;
    session_accepted(&mut cp_events, "edge-r").await;

    proxy.cut();
    next_event(&mut edge_events, "edge closed", |e| {
        matches!(e, EdgeEvent::Closed { .. }).then_some(())
    })
    .await;
    let second = edge_connected(&mut edge_events).await;
    assert_ne!(first, second);
    // The CP may see the new hello before it notices the old transport end (the Edge
    // then supersedes its own session), so wait for the new session by id.
    next_event(&mut cp_events, "new session", |e| match e {
        CpEvent::SessionAccepted { session_id, .. } if *session_id == second => Some(()),
        _ => None,
    })
    .await;
    // The new session carries commands.
    let tracker = cp.send_command("edge-r", ping()).unwrap();
    let updates: Vec<CommandUpdate> = bounded("command after reconnect", tracker.collect()).await;
    assert!(
        matches!(updates.last(), Some(CommandUpdate::Event(e)) if e.phase() == CommandPhase::Succeeded),
        "{updates:?}"
    );
    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", server.shutdown()).await;
}

async fn reconnect_after_a_control_plane_restart<C: Host, E: Host>() {
    let first_cp = server::<C>(fast_server()).await;
    let addr = first_cp.local_addr();
    let mut client = EdgeClient::<E>::new(fast_edge("edge-p"));
    let mut edge_events = client.events();
    let edge = client.connect(addr).unwrap();
    edge_connected(&mut edge_events).await;

    // The CP shuts down (GoAway to the Edge) and a new one binds the same port.
    bounded("first CP shutdown", first_cp.shutdown()).await;
    next_event(&mut edge_events, "edge closed", |e| {
        matches!(e, EdgeEvent::Closed { .. }).then_some(())
    })
    .await;
    let second_cp = bounded("rebind", ControlPlaneServer::<C>::bind(addr, fast_server()))
        .await
        .unwrap();
    let cp = second_cp.handle();
    edge_connected(&mut edge_events).await;
    assert_eq!(
        cp.edge("edge-p").unwrap().reachability,
        Reachability::Connected
    );
    bounded(
        "status from the new CP",
        cp.request_status("edge-p", vec![]),
    )
    .await
    .unwrap();
    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", second_cp.shutdown()).await;
}
