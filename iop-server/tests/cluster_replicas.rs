//! Replicas over a real nats-server: supersede across replicas, concurrent hellos for
//! one id, `Reject` against a live and a dead owner, and a restart's stale records.

mod cluster_support;

use std::time::Duration;

use cluster_support::*;
use futures_lite::StreamExt;
use iop_cluster::key::edge_key;
use iop_cluster::ownership::OwnershipStore;
use iop_tokio::core::cp::{CloseReason, CpEventKind, DuplicatePolicy};
use iop_tokio::core::proto::HelloRejectReason;
use iop_tokio::prelude::*;

async fn record(node: &Node, edge_id: &str) -> (String, bool, u64) {
    let current = node
        .replica
        .store()
        .entry(&edge_key(edge_id))
        .await
        .expect("engine")
        .expect("a record");
    let r = current.record.expect("readable");
    (r.replica, r.live, current.revision)
}

/// Waits until `edge` is told its session was superseded.
async fn superseded(events: &mut iop_tokio::Subscription<EdgeEvent>) {
    bounded("the superseded close", async {
        while let Some(e) = events.next().await {
            if matches!(e, Notice::Event(EdgeEvent::Superseded { .. })) {
                return;
            }
        }
        panic!("the edge's events ended");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn an_edge_moving_to_another_replica_supersedes_its_old_session_and_the_late_close_changes_nothing()
 {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;

    let (first, s1) = edge_on(&a, "edge-1").await;
    assert_eq!(record(&a, "edge-1").await, ("cp-a".into(), true, s1));
    let mut first_events = first.events();

    // The same Edge id comes to cp-b: it wins the record with a higher session id.
    let (second, s2) = edge_on(&b, "edge-1").await;
    assert!(
        s2 > s1,
        "session ids increase across replicas: {s1} then {s2}"
    );
    superseded(&mut first_events).await;
    first.shutdown().await;
    eventually("cp-a lets its session go", || {
        live_session(&a.cp(), "edge-1").is_none().then_some(())
    })
    .await;

    // cp-a's close of the superseded session never touched cp-b's record.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(record(&b, "edge-1").await, ("cp-b".into(), true, s2));
    assert_eq!(live_session(&b.cp(), "edge-1"), Some(s2));
    assert_eq!(a.replica.owned_session("edge-1"), None);
    assert_eq!(b.replica.owned_session("edge-1"), Some(s2));

    // Its own close releases it: the record is kept, marked closed.
    second.shutdown().await;
    let closed = bounded("the closed record", async {
        loop {
            let r = record(&b, "edge-1").await;
            if !r.1 {
                return r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(closed.0, "cp-b");
    assert!(closed.2 > s2);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn concurrent_hellos_for_one_id_on_two_replicas_leave_exactly_one_live_session() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    for round in 0..5 {
        let id = format!("edge-{round}");
        let on_a = EdgeClient::new(fast_edge(&id)).connect(a.addr()).unwrap();
        let on_b = EdgeClient::new(fast_edge(&id)).connect(b.addr()).unwrap();
        let (sa, sb) = futures_lite::future::zip(on_a.connected(), on_b.connected()).await;
        let (sa, sb) = (sa.unwrap().session_id, sb.unwrap().session_id);
        assert_ne!(sa, sb, "{id}: two sessions, two ids");
        // The later write won; the earlier session is closed by its replica.
        let (winner, loser, lost) = if sa > sb { (&a, &b, sb) } else { (&b, &a, sa) };
        let won = sa.max(sb);
        eventually(&format!("{id}: one live session"), || {
            (live_session(&loser.cp(), &id) != Some(lost)).then_some(())
        })
        .await;
        assert_eq!(live_session(&winner.cp(), &id), Some(won));
        let (holder, live, revision) = record(winner, &id).await;
        assert_eq!(
            (holder.as_str(), live, revision),
            (winner.replica.replica_id(), true, won)
        );
        on_a.shutdown().await;
        on_b.shutdown().await;
    }
    a.stop().await;
    b.stop().await;
}

/// Waits until `edge` is refused `DUPLICATE_EDGE`.
async fn refused_duplicate(events: &mut iop_tokio::Subscription<EdgeEvent>) {
    bounded("a DUPLICATE_EDGE refusal", async {
        while let Some(e) = events.next().await {
            if let Notice::Event(EdgeEvent::HelloRejected { reason, .. }) = e {
                assert_eq!(reason, HelloRejectReason::DuplicateEdge);
                return;
            }
        }
        panic!("the edge's events ended");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn reject_holds_while_the_owner_lives_and_takes_over_once_its_liveness_expired() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Reject).await;
    let (first, s1) = edge_on(&a, "edge-1").await;

    let second = EdgeClient::new(fast_edge("edge-1"))
        .connect(b.addr())
        .unwrap();
    let mut events = second.events();
    refused_duplicate(&mut events).await;
    refused_duplicate(&mut events).await;
    assert_eq!(record(&b, "edge-1").await, ("cp-a".into(), true, s1));
    assert_eq!(live_session(&a.cp(), "edge-1"), Some(s1));

    // cp-a dies: no release, no liveness renewal. Once its entry expires, cp-b takes
    // the record over.
    let Node { server, replica } = a;
    replica.abort();
    server.shutdown().await;
    first.shutdown().await;
    let s2 = bounded("the session on cp-b", second.connected())
        .await
        .unwrap()
        .session_id;
    assert!(s2 > s1);
    assert_eq!(record(&b, "edge-1").await, ("cp-b".into(), true, s2));
    second.shutdown().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_restarted_replica_releases_the_records_of_its_earlier_run() {
    let nats = NatsServer::start_with_accounts();
    let a = node(&nats, "cp-a", DuplicatePolicy::Reject).await;
    let (first, s1) = edge_on(&a, "edge-1").await;
    let Node { server, replica } = a;
    replica.abort();
    server.shutdown().await;
    first.shutdown().await;

    // cp-a comes back at once (alive again, so its liveness does not expire): it
    // releases its old record itself, and another replica may take the Edge at once.
    let a = node(&nats, "cp-a", DuplicatePolicy::Reject).await;
    let (holder, live, revision) = record(&a, "edge-1").await;
    assert_eq!((holder.as_str(), live), ("cp-a", false));
    assert!(revision > s1);
    let b = node(&nats, "cp-b", DuplicatePolicy::Reject).await;
    let (second, s2) = edge_on(&b, "edge-1").await;
    assert!(s2 > revision);
    second.shutdown().await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn with_the_engine_gone_a_replica_keeps_its_edges_refuses_new_ones_and_recovers() {
    let mut nats = NatsServer::start_with_accounts();
    let a = node(&nats, "cp-a", DuplicatePolicy::Replace).await;
    let stats = a.replica.stats();
    let held = EdgeClient::new(fast_edge("edge-1"))
        .operation("edge.ping", TargetLevel::Edge, |_ctx| async {
            CommandResult::succeeded("pong")
        })
        .connect(a.addr())
        .unwrap();
    let s1 = bounded("edge-1's session", held.connected())
        .await
        .unwrap()
        .session_id;

    nats.kill();
    eventually("the engine seen down", || {
        (!stats.snapshot().engine_up).then_some(())
    })
    .await;
    // A new Edge cannot be given a session id: refused OVERLOADED (it retries).
    let newcomer = EdgeClient::new(fast_edge("edge-2"))
        .connect(a.addr())
        .unwrap();
    eventually("a claim the engine could not decide", || {
        (stats.snapshot().claims_unavailable > 0).then_some(())
    })
    .await;
    assert!(!newcomer.is_connected());
    // The Edge already held keeps its session, and its commands are answered without
    // waiting on the engine for their records.
    assert_eq!(live_session(&a.cp(), "edge-1"), Some(s1));
    assert!(held.is_connected());
    let mut tracker = a
        .cp()
        .send_command("edge-1", CommandSpec::new("edge.ping"))
        .unwrap();
    let id = tracker.command_id().to_owned();
    bounded("the answer", async {
        while let Some(update) = tracker.next().await {
            if matches!(update, CommandUpdate::Response(_)) {
                break;
            }
        }
    })
    .await;
    // A write would wait out the engine's 2 s timeout.
    let records = a.replica.commands().clone();
    tokio::time::timeout(Duration::from_secs(1), records.flushed("edge-1", &id))
        .await
        .expect("no wait on an engine known to be down");

    nats.restart();
    eventually("the engine seen up again", || {
        stats.snapshot().engine_up.then_some(())
    })
    .await;
    let s2 = bounded("the newcomer's session", newcomer.connected())
        .await
        .unwrap()
        .session_id;
    assert!(s2 > s1);
    assert_eq!(live_session(&a.cp(), "edge-1"), Some(s1), "never dropped");
    held.shutdown().await;
    newcomer.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn replicas_over_a_three_node_nats_cluster_survive_one_node_killed() {
    let mut servers = NatsServer::start_cluster_with_accounts(3);
    let all: Vec<&NatsServer> = servers.iter().collect();
    let a = node_on(&all, "cp-a", DuplicatePolicy::Replace, 3).await;
    let b = node_on(&all, "cp-b", DuplicatePolicy::Replace, 3).await;
    let (first, s1) = edge_on(&a, "edge-1").await;
    let mut first_events = first.events();

    // One NATS server dies (the one both replicas dialled first): the records have
    // two more copies, and the clients move to the other servers.
    servers[0].kill();
    let (moved, s2) = edge_on(&b, "edge-1").await;
    assert!(s2 > s1);
    superseded(&mut first_events).await;
    first.shutdown().await;
    assert_eq!(record(&b, "edge-1").await, ("cp-b".into(), true, s2));
    let another = EdgeClient::new(fast_edge("edge-2"))
        .connect(a.addr())
        .unwrap();
    bounded("a new Edge on cp-a", another.connected())
        .await
        .unwrap();
    moved.shutdown().await;
    another.shutdown().await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_replicas_core_refuses_hellos_at_once_until_the_replica_can_decide_them() {
    let nats = NatsServer::start_with_accounts();
    let cluster = iop_cluster::ClusterConfig::new("cp-a");
    let mut config = cluster_server(DuplicatePolicy::Replace);
    cluster.configure(&mut config);
    let server = ControlPlaneServer::bind("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap();
    let mut events = server
        .handle()
        .subscribe_with(SubscribeOptions::default().kinds([
            CpEventKind::OwnershipClaim,
            CpEventKind::Closed,
            CpEventKind::SessionAccepted,
        ]));
    let edge = EdgeClient::new(fast_edge("edge-1"))
        .connect(server.local_addr())
        .unwrap();
    // No replica yet: no claim is raised (it would wait out the 3 s hello timeout);
    // the hello is ended OVERLOADED at once, and the Edge retries after 300 ms.
    let first = bounded("the first hello's end", async {
        loop {
            match events.next().await {
                Some(Notice::Event(e @ (CpEvent::OwnershipClaim(_) | CpEvent::Closed { .. }))) => {
                    return e;
                }
                Some(_) => {}
                None => panic!("the events ended"),
            }
        }
    })
    .await;
    assert!(
        matches!(
            first,
            CpEvent::Closed {
                reason: CloseReason::Overloaded,
                ..
            }
        ),
        "{first:?}"
    );

    // Once the replica runs, the Edge's next hello is claimed and granted.
    let client = nats.connect().await.unwrap();
    let replica = iop_cluster::Replica::start(client, server.handle(), cluster)
        .await
        .unwrap();
    let session = bounded("the session", edge.connected()).await.unwrap();
    assert_eq!(replica.owned_session("edge-1"), Some(session.session_id));
    assert!(replica.stats().snapshot().claims_unavailable >= 1);
    assert!(replica.stats().snapshot().claims_granted >= 1);
    edge.shutdown().await;
    server.shutdown().await;
    replica.shutdown().await;
}
