//! iop-smol under async-std's executor: nothing in the crate needs smol's executor to
//! be the one polling the application's futures.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_lite::{StreamExt, future};
use iop_smol::core::cp::{CommandSpec, CpEvent};
use iop_smol::core::edge::{EdgeConfig, EdgeEvent, TargetLevel};
use iop_smol::core::proto::CommandPhase;
use iop_smol::{
    CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient, Notice, ServerConfig,
};

/// Fails the test instead of hanging.
async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    future::or(async { Some(fut.await) }, async {
        async_std::task::sleep(Duration::from_secs(10)).await;
        None
    })
    .await
    .unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

#[async_std::test]
async fn control_plane_and_edge_run_on_async_std() {
    let server = ControlPlaneServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig::new(iop_smol::EnrolmentPolicy::AcceptAny),
    )
    .await
    .unwrap();
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let mut client = EdgeClient::new(EdgeConfig::new("edge-as", iop_smol::process_seed()))
        .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
            ctx.running("working", BTreeMap::new()).unwrap();
            // The handler itself awaits an async-std timer.
            async_std::task::sleep(Duration::from_millis(5)).await;
            CommandResult::succeeded("pong")
        });
    let mut edge_events = client.events();
    let edge = client.connect(server.local_addr()).unwrap();

    bounded("edge connected", async {
        while !matches!(
            edge_events.next().await,
            Some(Notice::Event(EdgeEvent::Connected { .. }))
        ) {}
    })
    .await;
    bounded("session accepted", async {
        while !matches!(
            cp_events.next().await,
            Some(Notice::Event(CpEvent::SessionAccepted { .. }))
        ) {}
    })
    .await;
    assert!(edge.is_connected());
    assert_eq!(cp.edges().len(), 1);

    let spec = CommandSpec::new("edge.ping");
    let tracker = cp.send_command("edge-as", spec).unwrap();
    let updates: Vec<CommandUpdate> = bounded("command", tracker.collect()).await;
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
            CommandPhase::Succeeded
        ]
    );

    let status = bounded("status", cp.request_status("edge-as", vec![]))
        .await
        .unwrap();
    assert_eq!(status.edge_id, "edge-as");

    bounded("edge shutdown", edge.shutdown()).await;
    bounded("server shutdown", server.shutdown()).await;
}
