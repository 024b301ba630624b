//! Status, commands and node events over real sockets.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::StreamExt;
use iop_tokio::core::cp::{CommandOutcome, CommandSpec, CpEvent, Ending};
use iop_tokio::core::edge::{EdgeEvent, TargetLevel};
use iop_tokio::core::proto::{CommandPhase, NodeEventKind};
use iop_tokio::core::registry::{NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::{CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient};
use support::*;
use tokio::sync::Notify;

fn ping() -> CommandSpec {
    CommandSpec::new("edge.ping")
}

fn phases(updates: &[CommandUpdate]) -> Vec<CommandPhase> {
    updates
        .iter()
        .filter_map(|u| match u {
            CommandUpdate::Event(e) => Some(e.phase()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn status_round_trip_reports_the_edges_nodes() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(fast_edge("edge-s"))
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
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;

    let status = bounded("status", cp.request_status("edge-s", vec![]))
        .await
        .unwrap();
    assert_eq!(status.edge_id, "edge-s");
    let ids: Vec<_> = status.nodes.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(ids, ["gpu-1"]);

    // Unknown Edge: refused by the core, typed.
    let err = cp.request_status("nobody", vec![]).await.unwrap_err();
    assert!(
        matches!(err, iop_tokio::StatusRequestError::Refused(_)),
        "{err:?}"
    );

    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_phases_flow_through_the_tracker_and_the_record_book() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(fast_edge("edge-c"))
        .operation("edge.ping", TargetLevel::Edge, |ctx| {
            // The synchronous part of a handler may call back into the Edge.
            ctx.running("queued", BTreeMap::new()).unwrap();
            async move {
                assert_eq!(ctx.operation(), "edge.ping");
                let who = ctx.metadata().get("who").cloned().unwrap_or_default();
                ctx.running("step 1", BTreeMap::new()).unwrap();
                tokio::task::yield_now().await;
                ctx.running("step 2", BTreeMap::new()).unwrap();
                CommandResult::succeeded(format!("pong {who}")).with_detail("rtt", "1")
            }
        })
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;

    let mut spec = ping();
    spec.metadata.insert("who".into(), "cp".into());
    let mut tracker = cp.send_command("edge-c", spec).unwrap();
    let id = tracker.command_id().to_owned();
    let updates: Vec<CommandUpdate> = bounded("tracker", async {
        let mut all = Vec::new();
        while let Some(u) = tracker.next().await {
            all.push(u);
        }
        all
    })
    .await;
    assert!(
        matches!(&updates[0], CommandUpdate::Response(r) if r.accepted),
        "{updates:?}"
    );
    assert_eq!(
        phases(&updates),
        [
            CommandPhase::Accepted,
            CommandPhase::Running,
            CommandPhase::Running,
            CommandPhase::Running,
            CommandPhase::Succeeded
        ]
    );
    let CommandUpdate::Event(last) = updates.last().unwrap() else {
        panic!("ends with an event")
    };
    assert_eq!(last.message, "pong cp");
    assert_eq!(last.detail.get("rtt").map(String::as_str), Some("1"));

    let record = cp.command(&id).unwrap();
    assert_eq!(record.updates, updates);
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );

    // An operation the Edge never advertised is refused up front.
    let mut other = ping();
    other.operation = "edge.nope".into();
    assert!(cp.send_command("edge-c", other).is_err());

    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn node_events_reach_a_subscriber() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(fast_edge("edge-n"))
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "EDGE_READY", |e| match e {
        CpEvent::NodeEvent { event, .. } if event.kind() == NodeEventKind::EdgeReady => Some(()),
        _ => None,
    })
    .await;

    edge.with_registry(|reg, _now| {
        let _ = reg.configure(NodeConfig::new("gpu-7"), 1_000).unwrap();
    });
    let (edge_id, node_id) = next_cp(&mut events, "NODE_CONFIGURED", |e| match e {
        CpEvent::NodeEvent { edge_id, event, .. }
            if event.kind() == NodeEventKind::NodeConfigured =>
        {
            Some((edge_id.clone(), event.node_id.clone()))
        }
        _ => None,
    })
    .await;
    assert_eq!((edge_id.as_str(), node_id.as_str()), ("edge-n", "gpu-7"));

    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_running_across_a_reconnect_reports_its_outcome() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let proxy = Proxy::start(server.local_addr()).await;
    let release = Arc::new(Notify::new());
    let started = Arc::new(Notify::new());
    let (release2, started2) = (release.clone(), started.clone());
    let edge = EdgeClient::new(fast_edge("edge-r"))
        .operation("edge.ping", TargetLevel::Edge, move |_ctx| {
            let (release, started) = (release2.clone(), started2.clone());
            async move {
                started.notify_one();
                release.notified().await;
                CommandResult::succeeded("done after reconnect")
            }
        })
        .connect(proxy.addr)
        .unwrap();
    let mut edge_events = edge.events();
    let first = next_cp(&mut events, "first session", |e| match e {
        CpEvent::SessionAccepted { session_id, .. } => Some(*session_id),
        _ => None,
    })
    .await;

    let mut tracker = cp.send_command("edge-r", ping()).unwrap();
    bounded("handler start", started.notified()).await;

    // Cut the transport while the handler runs; the Edge reconnects through the proxy.
    proxy.cut();
    next_edge(&mut edge_events, "edge sees the close", |e| {
        matches!(e, EdgeEvent::Closed { .. }).then_some(())
    })
    .await;
    let second = next_cp(&mut events, "second session", |e| match e {
        CpEvent::SessionAccepted { session_id, .. } => Some(*session_id),
        _ => None,
    })
    .await;
    assert!(second > first);

    release.notify_one();
    let updates: Vec<CommandUpdate> = bounded("tracker", async {
        let mut all = Vec::new();
        while let Some(u) = tracker.next().await {
            all.push(u);
        }
        all
    })
    .await;
    assert_eq!(
        phases(&updates).last(),
        Some(&CommandPhase::Succeeded),
        "{updates:?}"
    );
    assert!(!updates.contains(&CommandUpdate::Ended(Ending::Lost)));

    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_handler_past_its_deadline_is_ignored_cleanly() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(fast_edge("edge-t"))
        .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
            tokio::time::sleep_until(tokio::time::Instant::from_std(ctx.deadline())).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(ctx.is_timed_out());
            assert!(ctx.running("too late", BTreeMap::new()).is_err());
            CommandResult::succeeded("too late")
        })
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;
    let mut spec = ping();
    spec.timeout_ms = 200;
    let mut tracker = cp.send_command("edge-t", spec).unwrap();
    let updates: Vec<CommandUpdate> = bounded("tracker", async {
        let mut all = Vec::new();
        while let Some(u) = tracker.next().await {
            all.push(u);
        }
        all
    })
    .await;
    assert_eq!(
        phases(&updates),
        [CommandPhase::Accepted, CommandPhase::TimedOut]
    );
    // The late result changes nothing.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let id = tracker.command_id();
    assert_eq!(cp.command(id).unwrap().updates, updates);
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_lagging_subscriber_is_told_and_never_blocks_the_control_plane() {
    let mut config = fast_server();
    config.subscriber_capacity = 4;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut slow = cp.subscribe();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(fast_edge("edge-l"))
        .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
            for i in 0..20 {
                ctx.running(format!("step {i}"), BTreeMap::new()).unwrap();
            }
            CommandResult::succeeded("done")
        })
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;
    let mut tracker = cp.send_command("edge-l", ping()).unwrap();
    let count = bounded("tracker", async {
        let mut n = 0;
        while tracker.next().await.is_some() {
            n += 1;
        }
        n
    })
    .await;
    // Response, ACCEPTED, 20 RUNNING, SUCCEEDED: the tracker saw each, but for RUNNING
    // events the record coalesced before it read them (it keeps the latest 16).
    let coalesced = cp.command(tracker.command_id()).unwrap().coalesced_events;
    assert_eq!(
        count + coalesced,
        1 + 22,
        "{count} seen, {coalesced} coalesced"
    );
    assert!(
        count >= 19,
        "response, ACCEPTED, the latest 16 RUNNING, SUCCEEDED: {count}"
    );

    let mut delivered = 0;
    let mut lagged = 0;
    while let Some(notice) = slow.try_next() {
        match notice {
            iop_tokio::Notice::Event(_) => delivered += 1,
            iop_tokio::Notice::Lagged(n) => lagged += n,
            other => panic!("unexpected notice {other:?}"),
        }
    }
    assert_eq!(delivered, 4);
    assert!(lagged >= 22, "lost {lagged}");
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_command_the_edge_forgot_across_a_reconnect_is_lost() {
    use iop_tokio::core::proto::{Body, EdgeCommandEvent, EdgeCommandResponse, Envelope};
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut raw = RawClient::connect(server.local_addr()).await;
    raw.send_hello_with("edge-x", &["edge.ping"]).await;
    assert!(matches!(raw.next_body().await, Some(Body::HelloResponse(r)) if r.accepted));

    let mut tracker = cp.send_command("edge-x", ping()).unwrap();
    let command_id = bounded("the request", async {
        loop {
            match raw.next_body().await {
                Some(Body::CommandRequest(req)) => return req.command_id,
                Some(_) => {}
                None => panic!("closed"),
            }
        }
    })
    .await;
    assert_eq!(command_id, tracker.command_id());
    raw.send(Envelope::new(EdgeCommandResponse {
        command_id: command_id.clone(),
        accepted: true,
        ..Default::default()
    }))
    .await;
    raw.send(Envelope::new(EdgeCommandEvent {
        command_id: command_id.clone(),
        phase: CommandPhase::Accepted as i32,
        sequence: 1,
        ..Default::default()
    }))
    .await;
    assert!(matches!(
        bounded("response", tracker.next()).await,
        Some(CommandUpdate::Response(r)) if r.accepted
    ));
    assert!(matches!(
        bounded("ACCEPTED", tracker.next()).await,
        Some(CommandUpdate::Event(e)) if e.phase() == CommandPhase::Accepted
    ));

    // The Edge comes back as a new process that holds no command.
    drop(raw);
    let mut raw = RawClient::connect(server.local_addr()).await;
    raw.send_hello_with("edge-x", &["edge.ping"]).await;
    assert!(matches!(raw.next_body().await, Some(Body::HelloResponse(r)) if r.accepted));
    assert_eq!(
        bounded("lost", tracker.next()).await,
        Some(CommandUpdate::Ended(Ending::Lost))
    );
    assert_eq!(bounded("end", tracker.next()).await, None);
    assert_eq!(
        cp.command(&command_id).unwrap().outcome,
        Some(CommandOutcome::Ended(Ending::Lost))
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_operation_without_handler_fails_and_a_panicking_handler_fails_its_command() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let config = fast_edge("edge-p").with_operation("edge.unhandled", TargetLevel::Edge);
    let edge = EdgeClient::new(config)
        .operation("edge.ping", TargetLevel::Edge, |_ctx| async move {
            panic!("handler bug");
        })
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;

    let record = bounded(
        "panicking handler",
        cp.send_command("edge-p", ping()).unwrap().finish(),
    )
    .await
    .unwrap();
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Failed))
    );
    assert_eq!(record.events().last().unwrap().message, "handler panicked");

    let mut spec = ping();
    spec.operation = "edge.unhandled".into();
    let record = bounded(
        "no handler",
        cp.send_command("edge-p", spec).unwrap().finish(),
    )
    .await
    .unwrap();
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Failed))
    );
    assert!(record.response().unwrap().accepted);
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_edge_with_a_custom_registry_reports_its_nodes() {
    // `()` is the registry of an Edge with no nodes.
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge: iop_tokio::EdgeHandle<()> = EdgeClient::with_edge_registry(fast_edge("edge-0"), ())
        .operation("edge.ping", TargetLevel::Edge, |_ctx| async {
            CommandResult::succeeded("pong")
        })
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;
    let status = bounded("status", cp.request_status("edge-0", vec![]))
        .await
        .unwrap();
    assert!(status.nodes.is_empty());
    let record = bounded(
        "command",
        cp.send_command("edge-0", ping()).unwrap().finish(),
    )
    .await
    .unwrap();
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
    edge.with_registry(|(), _now| {});
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_reaches_its_edge_through_the_command_context() {
    use iop_tokio::Tokio;
    use iop_tokio::core::NodeRegistry;
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    // The handler is given nothing but its context: no handle stored after `connect`
    // (which a first command can outrun on another worker thread).
    let edge = EdgeClient::new(fast_edge("edge-x"))
        .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
            let Some(edge) = ctx.edge::<Tokio, NodeRegistry>() else {
                return CommandResult::failed("no edge in the context");
            };
            let nodes = edge.with_registry(|r, _now| r.len());
            let other_types = ctx.edge::<Tokio, ()>().is_some();
            CommandResult::succeeded(format!("nodes {nodes}, other types {other_types}"))
        })
        .connect(server.local_addr())
        .unwrap();
    edge.with_registry(|reg, _now| {
        let _ = reg.configure(NodeConfig::new("gpu-1"), 1_000).unwrap();
    });
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;
    let record = bounded(
        "command",
        cp.send_command("edge-x", ping()).unwrap().finish(),
    )
    .await
    .unwrap();
    let CommandUpdate::Event(last) = record.updates.last().unwrap() else {
        panic!("ends with an event: {:?}", record.updates)
    };
    assert_eq!(last.phase(), CommandPhase::Succeeded, "{}", last.message);
    assert_eq!(last.message, "nodes 1, other types false");
    edge.shutdown().await;
    server.shutdown().await;
}
