//! Routing over a real nats-server: any replica reaches an Edge through the replica
//! that holds it, follows it to a new owner, and says at once when no replica does.

mod cluster_support;

use std::time::{Duration, Instant};

use cluster_support::*;
use iop_tokio::core::cp::DuplicatePolicy;
use iop_tokio::prelude::*;

fn pinging_edge(edge_id: &str) -> EdgeClient {
    EdgeClient::new(fast_edge(edge_id)).operation("edge.ping", TargetLevel::Edge, |_ctx| async {
        CommandResult::succeeded("pong")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn status_and_commands_reach_an_edge_through_a_replica_that_does_not_hold_it() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let edge = pinging_edge("edge-1").connect(a.addr()).unwrap();
    let s1 = bounded("the session on cp-a", edge.connected())
        .await
        .unwrap()
        .session_id;
    assert_eq!(b.cp().edge("edge-1"), None, "cp-b never saw the Edge");

    let via_b = b.replica.router();
    assert_eq!(
        via_b.owner("edge-1").await.unwrap(),
        Some(("cp-a".into(), s1))
    );
    let status = bounded("a routed status", via_b.status("edge-1", Vec::new()))
        .await
        .unwrap();
    assert_eq!(status.edge_id, "edge-1");
    let sent = bounded(
        "a routed command",
        via_b.command(
            "edge-1",
            CommandSpec::new("edge.ping"),
            Duration::from_secs(5),
        ),
    )
    .await
    .unwrap();
    assert!(sent.response.accepted, "{:?}", sent.response);
    assert!(!sent.command_id.is_empty());
    // The command lives on the replica that sent it to the Edge.
    let record = eventually("its outcome on cp-a", || {
        a.cp()
            .command(&sent.command_id)
            .filter(|r| r.outcome.is_some())
    })
    .await;
    assert_eq!(record.operation, "edge.ping");
    let refused = via_b
        .command(
            "edge-1",
            CommandSpec::new("no.such.op"),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind.code(), "unknown_operation", "{refused}");

    // The Edge moves to cp-b: cp-a now reaches it through cp-b.
    let moved = pinging_edge("edge-1").connect(b.addr()).unwrap();
    let s2 = bounded("the session on cp-b", moved.connected())
        .await
        .unwrap()
        .session_id;
    edge.shutdown().await;
    let via_a = a.replica.router();
    assert_eq!(
        via_a.owner("edge-1").await.unwrap(),
        Some(("cp-b".into(), s2))
    );
    let status = bounded(
        "a status through the new owner",
        via_a.status("edge-1", Vec::new()),
    )
    .await
    .unwrap();
    assert_eq!(status.edge_id, "edge-1");
    moved.shutdown().await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn an_edge_no_replica_holds_is_not_connected_at_once() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let router = b.replica.router();
    let started = Instant::now();
    // No replica ever recorded it: unknown to the cluster.
    let e = router.status("edge-nobody", Vec::new()).await.unwrap_err();
    assert_eq!(e.kind.code(), "unknown_edge");
    // An Edge that was held and left: its record is closed, answered the same way.
    let edge = pinging_edge("edge-1").connect(a.addr()).unwrap();
    bounded("the session", edge.connected()).await.unwrap();
    edge.shutdown().await;
    eventually("the record closed", || {
        live_session(&a.cp(), "edge-1").is_none().then_some(())
    })
    .await;
    let closed = bounded("the closed record", async {
        loop {
            if router.owner("edge-1").await.unwrap().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    closed.await;
    let e = router
        .command(
            "edge-1",
            CommandSpec::new("edge.ping"),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind.code(), "not_connected");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "not connected is answered at once, not after a timeout: {:?}",
        started.elapsed()
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn another_replicas_views_come_in_pages_and_all_arrive() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    // Views of about 1 KiB (four hello metadata values of 250 bytes): all of them in
    // one message would pass NATS's 1 MiB limit.
    let pad = "x".repeat(250);
    // More than two pages of 500.
    const N: usize = 1_100;
    let mut edges = Vec::with_capacity(N);
    for i in 0..N {
        let mut config = fast_edge(&format!("edge-{i:04}"));
        for k in 0..4 {
            config.metadata.insert(format!("pad-{k}"), pad.clone());
        }
        edges.push(EdgeClient::new(config).connect(a.addr()).unwrap());
    }
    eventually("every Edge held by cp-a", || {
        (a.cp().stats().live_sessions == N).then_some(())
    })
    .await;
    let router = b.replica.router();
    eventually("cp-b's mirror of the records", || {
        (router.other_replicas() == ["cp-a"]).then_some(())
    })
    .await;
    let views = bounded("the views", router.remote_views()).await;
    let mut ids: Vec<&str> = views.iter().map(|v| v.view.edge_id.as_str()).collect();
    assert!(
        views
            .iter()
            .all(|v| v.view.metadata("pad-3") == Some(pad.as_str())),
        "each view whole"
    );
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), N, "every Edge once");
    for edge in edges {
        edge.shutdown().await;
    }
    a.stop().await;
    b.stop().await;
}

/// PROTOCOL.md §8: an Edge some replica recorded and no replica holds now is not
/// connected (409, it redials) through every replica's admin API, also one that never
/// saw it; only an Edge no replica ever recorded is unknown (404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_known_edge_without_a_session_is_not_connected_through_every_replica() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let (admin_a, admin_b) = (admin_of(&a).await, admin_of(&b).await);
    // Held by cp-a alone, then gone.
    let edge = pinging_edge("edge-1").connect(a.addr()).unwrap();
    bounded("the session", edge.connected()).await.unwrap();
    edge.shutdown().await;
    let router = b.replica.router();
    bounded("the record closed", async {
        while router.owner("edge-1").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(b.cp().edge("edge-1").is_none(), "cp-b never saw edge-1");
    let ping = r#"{"operation":"edge.ping"}"#;
    for admin in [admin_a, admin_b] {
        let (status, body) = http(admin, "POST", "/v1/edges/edge-1/commands", Some(ping)).await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["error"]["code"], "not_connected", "{body}");
        let (status, body) = http(admin, "GET", "/v1/edges/edge-1/status", None).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (409, &"not_connected".into()),
            "{body}"
        );
        let (status, body) =
            http(admin, "POST", "/v1/edges/edge-nobody/commands", Some(ping)).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &"unknown_edge".into()),
            "{body}"
        );
    }
    a.stop().await;
    b.stop().await;
}
