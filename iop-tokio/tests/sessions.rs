//! Session lifecycle over real sockets: hello, liveness, duplicates, the connection
//! cap, reconnects and graceful shutdown.

mod support;

use std::time::{Duration, Instant};

use iop_tokio::core::cp::{CloseReason, CpEvent, DuplicatePolicy, Reachability};
use iop_tokio::core::edge::{self, EdgeEvent};
use iop_tokio::core::proto::{Body, GoAwayReason, HelloRejectReason};
use iop_tokio::{ControlPlaneServer, EdgeClient};
use support::*;

#[tokio::test]
async fn hello_accepted_then_listed_as_connected() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    // Subscribed before the start: nothing can be missed.
    let mut client = EdgeClient::new(fast_edge("edge-a"));
    let mut edge_events = client.events();
    let edge = client.connect(server.local_addr()).unwrap();
    next_edge(&mut edge_events, "connected", |e| {
        matches!(e, EdgeEvent::Connected { .. }).then_some(())
    })
    .await;
    assert!(edge.is_connected());
    let view = cp.edge("edge-a").unwrap();
    assert_eq!(view.reachability, Reachability::Connected);
    assert_eq!(cp.edges().len(), 1);
    assert_eq!(cp.stats().live_sessions, 1);
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn hello_with_an_empty_edge_id_is_rejected_and_closed() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let mut raw = RawClient::connect(server.local_addr()).await;
    raw.send_hello("").await;
    let Some(Body::HelloResponse(resp)) = raw.next_body().await else {
        panic!("expected a hello response");
    };
    assert!(!resp.accepted);
    assert_eq!(resp.reject_reason(), HelloRejectReason::EmptyEdgeId);
    assert!(
        raw.read_to_end().await.is_empty(),
        "closed after the rejection"
    );
    assert_eq!(server.handle().stats().hello_rejections, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn a_silent_edge_is_unreachable_then_timed_out() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let mut raw = RawClient::connect(server.local_addr()).await;
    raw.send_hello("edge-quiet").await;
    let Some(Body::HelloResponse(resp)) = raw.next_body().await else {
        panic!("expected a hello response");
    };
    assert!(resp.accepted);
    let start = Instant::now();
    // Say nothing more (not even the status the CP asks for).
    let status = tokio::spawn({
        let cp = cp.clone();
        async move { cp.request_status("edge-quiet", vec![]).await }
    });
    next_cp(&mut events, "unreachable", |e| {
        matches!(e, CpEvent::EdgeUnreachable { .. }).then_some(())
    })
    .await;
    assert_eq!(
        cp.edge("edge-quiet").unwrap().reachability,
        Reachability::Unreachable
    );
    let reason = next_cp(&mut events, "disconnected", |e| match e {
        CpEvent::EdgeDisconnected { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert_eq!(reason, CloseReason::HeartbeatTimeout);
    // status_timeout (2 s) came before the end of the session (3 s).
    assert_eq!(
        status.await.unwrap(),
        Err(iop_tokio::StatusRequestError::TimedOut)
    );
    // 3 intervals of 1 s.
    assert!(
        start.elapsed() >= Duration::from_millis(2_500),
        "{:?}",
        start.elapsed()
    );
    let go_away = raw.read_to_end().await.into_iter().find_map(|b| match b {
        Body::GoAway(g) => Some(g.reason()),
        _ => None,
    });
    assert_eq!(go_away, Some(GoAwayReason::HeartbeatTimeout));
    server.shutdown().await;
}

#[tokio::test]
async fn duplicate_edge_replace_supersedes_the_old_session() {
    let mut config = fast_server();
    config.cp.duplicate_policy = DuplicatePolicy::Replace;
    // The superseded Edge stays away for the rest of the test.
    config.cp.retry_after_superseded = Duration::from_secs(30);
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let first = EdgeClient::new(fast_edge("twin"))
        .connect(server.local_addr())
        .unwrap();
    let mut first_events = first.events();
    next_edge(&mut first_events, "first connected", |e| {
        matches!(e, EdgeEvent::Connected { .. }).then_some(())
    })
    .await;
    let second = EdgeClient::new(fast_edge("twin"))
        .connect(server.local_addr())
        .unwrap();
    let superseded = next_cp(&mut events, "superseded", |e| match e {
        CpEvent::EdgeSuperseded {
            old_instance_id,
            new_instance_id,
            ..
        } => Some((old_instance_id.clone(), new_instance_id.clone())),
        _ => None,
    })
    .await;
    assert_eq!(
        superseded,
        (Some(first.instance_id()), Some(second.instance_id()))
    );
    next_edge(&mut first_events, "first told", |e| {
        matches!(e, EdgeEvent::Superseded { .. }).then_some(())
    })
    .await;
    bounded("second connected", async {
        while !second.is_connected() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(!first.is_connected());
    first.shutdown().await;
    second.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn duplicate_edge_reject_refuses_the_newcomer() {
    let mut config = fast_server();
    config.cp.duplicate_policy = DuplicatePolicy::Reject;
    config.cp.retry_after_duplicate = Duration::from_secs(30);
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let first = EdgeClient::new(fast_edge("twin"))
        .connect(server.local_addr())
        .unwrap();
    let mut first_events = first.events();
    next_edge(&mut first_events, "first connected", |e| {
        matches!(e, EdgeEvent::Connected { .. }).then_some(())
    })
    .await;
    let second = EdgeClient::new(fast_edge("twin"))
        .connect(server.local_addr())
        .unwrap();
    let mut second_events = second.events();
    let (reason, retry_after) = next_edge(&mut second_events, "rejection", |e| match e {
        EdgeEvent::HelloRejected {
            reason,
            retry_after,
            ..
        } => Some((*reason, *retry_after)),
        _ => None,
    })
    .await;
    assert_eq!(reason, HelloRejectReason::DuplicateEdge);
    assert_eq!(retry_after, Duration::from_secs(30));
    assert!(first.is_connected());
    assert!(!second.is_connected());
    first.shutdown().await;
    second.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn past_the_connection_cap_a_connection_gets_go_away_overloaded() {
    let mut config = fast_server();
    config.cp.max_connections = 1;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut holder = RawClient::connect(server.local_addr()).await;
    holder.send_hello("holder").await;
    assert!(matches!(holder.next_body().await, Some(Body::HelloResponse(r)) if r.accepted));
    let mut extra = RawClient::connect(server.local_addr()).await;
    let bodies = extra.read_to_end().await;
    assert!(
        matches!(bodies.as_slice(), [Body::GoAway(g)] if g.reason() == GoAwayReason::Overloaded),
        "{bodies:?}"
    );
    assert_eq!(cp.stats().overloaded, 1);
    assert_eq!(cp.connection_count(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn the_edge_reconnects_after_the_control_plane_restarts_on_the_same_port() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let addr = server.local_addr();
    let edge = EdgeClient::new(fast_edge("edge-back"))
        .connect(addr)
        .unwrap();
    let mut edge_events = edge.events();
    let first = next_edge(&mut edge_events, "first session", |e| match e {
        EdgeEvent::Connected { session_id, .. } => Some(*session_id),
        _ => None,
    })
    .await;

    server.shutdown().await;
    let reason = next_edge(&mut edge_events, "closed", |e| match e {
        EdgeEvent::Closed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        matches!(
            reason,
            edge::CloseReason::GoAway {
                reason: GoAwayReason::Shutdown,
                ..
            }
        ),
        "{reason:?}"
    );

    let server = ControlPlaneServer::bind(addr, fast_server()).await.unwrap();
    let second = next_edge(&mut edge_events, "second session", |e| match e {
        EdgeEvent::Connected { session_id, .. } => Some(*session_id),
        _ => None,
    })
    .await;
    // Session ids are a fencing epoch across restarts too.
    assert!(second > first, "{second} > {first}");
    assert!(server.handle().edge("edge-back").is_some());
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn graceful_shutdown_tells_every_edge_and_ends_streams() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(fast_edge("edge-g"))
        .connect(server.local_addr())
        .unwrap();
    let mut raw = RawClient::connect(server.local_addr()).await;
    raw.send_hello("edge-raw").await;
    assert!(matches!(raw.next_body().await, Some(Body::HelloResponse(r)) if r.accepted));
    next_cp(&mut events, "edge-g session", |e| match e {
        CpEvent::SessionAccepted { edge_id, .. } if edge_id == "edge-g" => Some(()),
        _ => None,
    })
    .await;

    let start = Instant::now();
    bounded("shutdown", cp.shutdown()).await;
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(cp.connection_count(), 0);
    let go_away = raw.read_to_end().await.into_iter().find_map(|b| match b {
        Body::GoAway(g) => Some(g.reason()),
        _ => None,
    });
    assert_eq!(go_away, Some(GoAwayReason::Shutdown));
    // The subscription ends after the last events.
    bounded("subscription end", async {
        use futures_lite::StreamExt;
        while events.next().await.is_some() {}
    })
    .await;
    // A late subscription ends at once.
    bounded("late subscription end", async {
        use futures_lite::StreamExt;
        assert!(cp.subscribe().next().await.is_none());
    })
    .await;
    // New work is refused.
    assert!(matches!(
        cp.request_status("edge-g", vec![]).await,
        Err(iop_tokio::StatusRequestError::Stopped)
    ));
    // The Edge's own shutdown is also graceful (it is disconnected now).
    bounded("edge shutdown", edge.shutdown()).await;
    assert!(!edge.is_connected());
    bounded("edge events end", async {
        use futures_lite::StreamExt;
        assert!(edge.events().next().await.is_none());
    })
    .await;
}

#[tokio::test]
async fn drain_refuses_new_sessions_and_keeps_live_ones() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(fast_edge("edge-d"))
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;
    cp.drain();
    assert!(cp.is_draining());
    let mut raw = RawClient::connect(server.local_addr()).await;
    raw.send_hello("edge-late").await;
    let Some(Body::HelloResponse(resp)) = raw.next_body().await else {
        panic!("expected a hello response");
    };
    assert!(!resp.accepted);
    assert!(edge.is_connected());
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_stricter_policy_and_revocation_end_the_session_and_refuse_the_edge() {
    use iop_tokio::core::cp::{AllowList, Credential, EnrolmentPolicy};
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut config = fast_edge("edge-v");
    config.credential = edge::Secret::new("s3cret");
    let edge = EdgeClient::new(config)
        .connect(server.local_addr())
        .unwrap();
    let mut edge_events = edge.events();
    next_edge(&mut edge_events, "connected", |e| {
        matches!(e, EdgeEvent::Connected { .. }).then_some(())
    })
    .await;

    // A policy the live session no longer passes ends it.
    let allow = AllowList::new().with("edge-v", &Credential::new("another secret"));
    cp.set_enrolment_policy(EnrolmentPolicy::AllowList(allow));
    let reason = next_edge(&mut edge_events, "revoked", |e| match e {
        EdgeEvent::Closed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        matches!(
            reason,
            edge::CloseReason::GoAway {
                reason: GoAwayReason::CredentialRevoked,
                ..
            }
        ),
        "{reason:?}"
    );
    let rejected = next_edge(&mut edge_events, "refused on reconnect", |e| match e {
        EdgeEvent::HelloRejected { reason, .. } => Some(*reason),
        _ => None,
    })
    .await;
    assert_eq!(rejected, HelloRejectReason::BadCredential);

    // Revoking takes it off the allow list altogether.
    cp.revoke("edge-v").unwrap();
    let rejected = next_edge(&mut edge_events, "unknown on reconnect", |e| match e {
        EdgeEvent::HelloRejected { reason, .. } => Some(*reason),
        _ => None,
    })
    .await;
    assert_eq!(rejected, HelloRejectReason::UnknownEdge);
    assert!(matches!(
        cp.revoke("nobody"),
        Err(iop_tokio::core::cp::RevokeError::UnknownEdge(_))
    ));
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_peer_that_stops_reading_is_dropped_as_slow_and_others_carry_on() {
    use iop_tokio::core::cp::CommandSpec;
    let mut config = fast_server();
    config.cp.outbound_cap = 1024 * 1024;
    config.cp.max_inflight_commands = 10_000;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let healthy = EdgeClient::new(fast_edge("edge-ok"))
        .connect(server.local_addr())
        .unwrap();
    let mut slow = RawClient::connect(server.local_addr()).await;
    slow.send_hello_with("edge-slow", &["edge.ping"]).await;
    assert!(matches!(slow.next_body().await, Some(Body::HelloResponse(r)) if r.accepted));

    // 64 KiB commands to a peer that reads nothing, until its session is dropped.
    let mut spec = CommandSpec::new("edge.ping");
    // Sixteen values at the 4 KiB cap (PROTOCOL.md §7).
    for i in 0..16 {
        spec.metadata
            .insert(format!("blob-{i}"), "x".repeat(4 * 1024));
    }
    let mut sent = 0;
    while cp.send_command("edge-slow", spec.clone()).is_ok() {
        sent += 1;
        assert!(sent < 2_000, "never dropped");
        tokio::task::yield_now().await;
    }
    let reason = next_cp(&mut events, "slow peer closed", |e| match e {
        CpEvent::Closed {
            edge_id, reason, ..
        } if edge_id.as_deref() == Some("edge-slow") => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert_eq!(reason, CloseReason::SlowPeer);
    assert_eq!(cp.stats().slow_peers, 1);
    // (Its task would otherwise spend the 2 s close bound on bytes nobody reads.)
    drop(slow);

    // The other Edge never noticed.
    bounded("healthy session", async {
        while !healthy.is_connected() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    bounded("status", cp.request_status("edge-ok", vec![]))
        .await
        .unwrap();
    healthy.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn garbage_gets_protocol_error_and_silence_gets_hello_timeout() {
    let mut config = fast_server();
    config.cp.hello_timeout = Duration::from_millis(300);
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();

    // A zero-length frame is invalid (PROTOCOL.md §2).
    let mut garbage = RawClient::connect(server.local_addr()).await;
    tokio::io::AsyncWriteExt::write_all(&mut garbage.stream, &[0, 0, 0, 0])
        .await
        .unwrap();
    let bodies = garbage.read_to_end().await;
    assert!(
        matches!(bodies.as_slice(), [Body::GoAway(g)] if g.reason() == GoAwayReason::ProtocolError),
        "{bodies:?}"
    );

    let mut silent = RawClient::connect(server.local_addr()).await;
    let bodies = silent.read_to_end().await;
    assert!(
        matches!(bodies.as_slice(), [Body::GoAway(g)] if g.reason() == GoAwayReason::HelloTimeout),
        "{bodies:?}"
    );
    let stats = server.handle().stats();
    assert_eq!((stats.protocol_errors, stats.hello_timeouts), (1, 1));
    bounded("connections released", async {
        while server.handle().connection_count() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_edge_whose_control_plane_cannot_be_reached_dials_its_fallback() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    // A port nothing listens on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let edge = EdgeClient::new(fast_edge("edge-1"))
        .fallback_addrs([server.local_addr()])
        .connect(dead)
        .unwrap();
    let session = bounded("a session through the fallback", edge.connected())
        .await
        .unwrap();
    assert!(session.session_id > 0);
    assert_eq!(edge.control_plane_addr(), server.local_addr());
    assert!(
        edge.last_dial_error().is_some(),
        "the first address was tried"
    );
    edge.shutdown().await;
    server.shutdown().await;
}
