//! Lifecycle and readiness: the last handle dropped stops a server or an Edge,
//! `detach` opts out, shutdown's close reason is deterministic, and the readiness
//! futures (`connected`, `wait_for_edge`, `outcome`) resolve or fail as documented.

mod support;

use std::time::Duration;

use iop_tokio::core::cp::CloseReason;
use iop_tokio::prelude::*;
use support::*;

fn ping_edge(edge_id: &str) -> EdgeClient {
    EdgeClient::new(fast_edge(edge_id))
        .operation("edge.ping", TargetLevel::Edge, |_| async {
            CommandResult::succeeded("pong")
        })
        .operation("edge.fail", TargetLevel::Edge, |_| async {
            CommandResult::failed("it broke")
        })
}

fn disconnected(edge_id: &str) -> impl FnMut(&CpEvent) -> Option<CloseReason> + '_ {
    move |e| match e {
        CpEvent::EdgeDisconnected {
            edge_id: id,
            reason,
            ..
        } if id == edge_id => Some(reason.clone()),
        _ => None,
    }
}

fn is_peer_shutdown(reason: &CloseReason) -> bool {
    matches!(reason, CloseReason::PeerGoAway { reason, .. } if *reason == iop_tokio::core::proto::GoAwayReason::Shutdown)
}

#[tokio::test]
async fn dropping_every_edge_handle_shuts_the_edge_down() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = ping_edge("edge-1").connect(server.local_addr()).unwrap();
    bounded("session", edge.connected()).await.unwrap();
    let second = edge.clone();
    drop(edge);
    // One handle left: still running.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(second.is_connected());
    drop(second);
    let reason = next_cp(&mut events, "the edge's goaway", disconnected("edge-1")).await;
    assert!(is_peer_shutdown(&reason), "{reason:?}");
    // Shut down for good: it does not come back (its backoff is 20 ms).
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        cp.edge("edge-1").unwrap().reachability,
        Reachability::Disconnected
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_detached_edge_runs_on_without_handles() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let edge = ping_edge("edge-1").connect(server.local_addr()).unwrap();
    bounded("session", edge.connected()).await.unwrap();
    edge.detach();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let view = cp.wait_for_edge("edge-1", WAIT).await.unwrap();
    assert_eq!(view.reachability, Reachability::Connected);
    let done = cp
        .send_command("edge-1", CommandSpec::new("edge.ping"))
        .unwrap();
    assert_eq!(
        bounded("outcome", done.outcome()).await.unwrap().message,
        "pong"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn dropping_the_server_and_every_handle_frees_its_port() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let addr = server.local_addr();
    let edge = ping_edge("edge-1").connect(addr).unwrap();
    let mut edge_events = edge.events();
    bounded("session", edge.connected()).await.unwrap();
    let handle = server.handle();
    drop(server);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(edge.is_connected(), "a handle still holds the server");
    drop(handle);
    let reason = next_edge(&mut edge_events, "the server's goaway", |e| match e {
        EdgeEvent::Closed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        matches!(reason, iop_tokio::core::edge::CloseReason::GoAway { .. }),
        "{reason:?}"
    );
    // The port is free again: a new server binds it.
    let again = bounded("the port freed", async {
        loop {
            match ControlPlaneServer::bind(addr, fast_server()).await {
                Ok(server) => return server,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await;
    bounded("the edge back on the new server", async {
        while again.handle().edge("edge-1").is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    edge.shutdown().await;
    again.shutdown().await;
}

#[tokio::test]
async fn when_edge_shutdown_returns_the_control_plane_has_recorded_its_goaway() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    for round in 0..20 {
        let mut events = cp.subscribe();
        let edge = ping_edge("edge-1").connect(server.local_addr()).unwrap();
        bounded("session", edge.connected()).await.unwrap();
        bounded("shutdown", edge.shutdown()).await;
        // Already published: no waiting.
        let mut reason = None;
        while let Some(Some(Notice::Event(e))) =
            futures_lite::future::poll_once(events.next()).await
        {
            reason = reason.or_else(|| disconnected("edge-1")(&e));
        }
        let reason = reason.unwrap_or_else(|| panic!("round {round}: no close recorded yet"));
        assert!(is_peer_shutdown(&reason), "round {round}: {reason:?}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn connected_fails_when_refused_for_good_or_stopped() {
    let refusing = ServerConfig::new(EnrolmentPolicy::AllowList(AllowList::default()));
    let mut config = fast_server();
    config.enrolment = refusing.enrolment;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let edge = ping_edge("edge-1").connect(server.local_addr()).unwrap();
    match bounded("refusal", edge.connected()).await {
        Err(ConnectedError::Refused { reason, message }) => {
            assert_eq!(reason, HelloRejectReason::UnknownEdge);
            assert!(!message.is_empty());
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    edge.shutdown().await;
    assert_eq!(edge.connected().await, Err(ConnectedError::Stopped));
    server.shutdown().await;
}

#[tokio::test]
async fn wait_for_edge_times_out_with_what_it_knows_and_asks_itself_without_auto_status() {
    let mut config = fast_server();
    config.cp.auto_status_on_resync = false;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let err = cp
        .wait_for_edge("edge-9", Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WaitForEdgeError::TimedOut { view: None, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("never connected"), "{err}");

    let edge = ping_edge("edge-1").connect(server.local_addr()).unwrap();
    let view = cp.wait_for_edge("edge-1", WAIT).await.unwrap();
    assert!(view.fresh && view.reachability == Reachability::Connected);
    edge.shutdown().await;
    server.shutdown().await;
    assert_eq!(
        cp.wait_for_edge("edge-1", WAIT).await,
        Err(WaitForEdgeError::Stopped)
    );
}

#[tokio::test]
async fn outcome_is_ok_only_for_succeeded() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let edge = ping_edge("edge-1").connect(server.local_addr()).unwrap();
    cp.wait_for_edge("edge-1", WAIT).await.unwrap();

    let ok = cp
        .send_command("edge-1", CommandSpec::new("edge.ping"))
        .unwrap();
    let done = bounded("ping", ok.outcome()).await.unwrap();
    assert_eq!(done.message, "pong");
    assert_eq!(
        done.record.phase(),
        Some(WireEnum::Known(CommandPhase::Succeeded))
    );

    let failing = cp
        .send_command("edge-1", CommandSpec::new("edge.fail"))
        .unwrap();
    match bounded("fail", failing.outcome()).await {
        Err(CommandFailure::Failed { phase, message, .. }) => {
            assert_eq!(
                (phase, message.as_str()),
                (CommandPhase::Failed, "it broke")
            );
        }
        other => panic!("expected FAILED, got {other:?}"),
    }

    let wrong_target = CommandSpec::new("edge.ping").with_target("node:gpu-1");
    let rejected = cp.send_command("edge-1", wrong_target).unwrap();
    let failure = bounded("rejection", rejected.outcome()).await.unwrap_err();
    assert!(
        matches!(&failure, CommandFailure::Rejected { reason: CommandRejectReason::InvalidSelector, message } if message.contains("node:gpu-1")),
        "{failure:?}"
    );
    edge.shutdown().await;
    server.shutdown().await;
}
