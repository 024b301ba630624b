//! A server whose ownership decisions are made outside the core
//! (`ExternalDirectory`): the application answers each claim through the handle, as
//! a cluster backend will.

mod support;

use futures_lite::StreamExt;
use iop_tokio::DirectoryFactory;
use iop_tokio::core::cp::{ClaimAnswer, CpEventKind};
use iop_tokio::prelude::*;
use support::*;

#[tokio::test]
async fn the_application_answers_claims_and_the_edge_gets_the_granted_session() {
    let mut config = fast_server();
    config.directory = Some(DirectoryFactory::external());
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut claims =
        cp.subscribe_with(SubscribeOptions::default().kinds([CpEventKind::OwnershipClaim]));
    let edge = EdgeClient::new(fast_edge("edge-1"))
        .connect(server.local_addr())
        .unwrap();
    let claim = bounded("a claim", async {
        loop {
            if let Some(Notice::Event(CpEvent::OwnershipClaim(claim))) = claims.next().await {
                return claim;
            }
        }
    })
    .await;
    assert_eq!(claim.edge_id, "edge-1");
    assert!(
        !edge.is_connected(),
        "nothing is accepted before the answer"
    );
    cp.answer_claim(claim.conn, ClaimAnswer::Granted { session_id: 1_000 })
        .unwrap();
    let session = bounded("the session", edge.connected()).await.unwrap();
    assert_eq!(session.session_id, 1_000);

    // Another Control Plane takes the Edge: this one lets its session go.
    let mut events = edge.events();
    assert!(cp.ownership_lost("edge-1", 1_000, 1_001));
    next_edge(&mut events, "the superseded close", |e| match e {
        EdgeEvent::Superseded { .. } => Some(()),
        _ => None,
    })
    .await;
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn hellos_waiting_on_their_claims_leave_their_address_room_for_more() {
    // Two hellos per address may be awaited; claims are left unanswered meanwhile (a
    // slow engine), and no hello times out before they are answered.
    let mut config = fast_server();
    config.directory = Some(DirectoryFactory::external());
    config.max_pending_hellos_per_ip = 2;
    config.cp.hello_timeout = std::time::Duration::from_secs(60);
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut claims =
        cp.subscribe_with(SubscribeOptions::default().kinds([CpEventKind::OwnershipClaim]));
    let edges: Vec<_> = (0..6)
        .map(|i| {
            EdgeClient::new(fast_edge(&format!("edge-{i}")))
                .connect(server.local_addr())
                .unwrap()
        })
        .collect();

    // Every Edge from 127.0.0.1 gets its claim in, though none is answered yet.
    let mut pending = std::collections::BTreeMap::new();
    bounded("six claims at once", async {
        while pending.len() < edges.len() {
            if let Some(Notice::Event(CpEvent::OwnershipClaim(claim))) = claims.next().await {
                pending.insert(claim.edge_id.clone(), claim.conn);
            }
        }
    })
    .await;
    for (n, conn) in pending.values().enumerate() {
        let session_id = 100 + n as u64;
        cp.answer_claim(*conn, ClaimAnswer::Granted { session_id })
            .unwrap();
    }
    for edge in &edges {
        bounded("the session", edge.connected()).await.unwrap();
    }
    for edge in edges {
        edge.shutdown().await;
    }
    server.shutdown().await;
}
