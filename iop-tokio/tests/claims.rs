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
