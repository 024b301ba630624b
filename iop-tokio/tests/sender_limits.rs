//! PROTOCOL.md §4.3 and §4.6 through the tokio runtime: an Edge with more nodes than one
//! status carries, paged after its last node and by id; a handler result the Control Plane could not take,
//! replaced by a FAILED that says why; a progress report over the limits refused to
//! the handler.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use iop_tokio::core::cp::{CommandSpec, CpEvent};
use iop_tokio::core::edge::{ReportError, TargetLevel};
use iop_tokio::core::proto::CommandPhase;
use iop_tokio::core::registry::{NodeConfig, NodeRegistry};
use iop_tokio::{CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient};
use support::*;

const NODES: usize = 10_050;

fn node_id(i: usize) -> String {
    format!("node-{i:05}")
}

#[tokio::test]
async fn ten_thousand_and_fifty_nodes_are_paged_after_the_last_node_and_by_id() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let mut registry = NodeRegistry::new();
    for i in 0..NODES {
        let _ = registry.configure(NodeConfig::new(node_id(i)), 0).unwrap();
    }
    let edge = EdgeClient::new(fast_edge("edge-big"))
        .with_node_registry(registry)
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;

    // Every node: 10 000 in id order, then the page after the last of them
    // (`start_after_node_id`), merged into one complete answer.
    let all = bounded("status", cp.request_status("edge-big", vec![]))
        .await
        .unwrap();
    assert!(!all.truncated);
    let ids: Vec<String> = all.nodes.iter().map(|n| n.node_id.clone()).collect();
    assert_eq!(ids, (0..NODES).map(node_id).collect::<Vec<_>>());
    // The Control Plane paged the session's automatic status the same way: its view
    // of the Edge is complete and fresh.
    bounded("a fresh, complete view", async {
        while !cp.edge("edge-big").is_some_and(|v| v.fresh) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let view = cp.edge_load("edge-big").unwrap();
    let load = view.load();
    assert_eq!(
        (load.nodes().len(), load.pages(), view.partial()),
        (NODES, 2, false)
    );
    assert!(!cp.edge("edge-big").unwrap().last_status.unwrap().truncated);

    // The rest by id, since the nodes come in id order.
    let rest: Vec<String> = (10_000..NODES).map(node_id).collect();
    let page = bounded("rest", cp.request_status("edge-big", rest.clone()))
        .await
        .unwrap();
    assert!(!page.truncated);
    let got: Vec<String> = page.nodes.iter().map(|n| n.node_id.clone()).collect();
    assert_eq!(got, rest);

    // All 10 050 by id: two requests, one merged answer, complete.
    let named: Vec<String> = (0..NODES).rev().map(node_id).collect();
    let merged = bounded("merged", cp.request_status("edge-big", named))
        .await
        .unwrap();
    assert!(!merged.truncated);
    let got: Vec<String> = merged.nodes.iter().map(|n| n.node_id.clone()).collect();
    assert_eq!(got, (0..NODES).map(node_id).collect::<Vec<_>>());
    assert_eq!(cp.stats().protocol_errors, 0);

    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_result_the_control_plane_cannot_take_ends_the_command_failed() {
    // The lowest frame limit a CP of this crate announces: 256 KiB.
    let mut config = fast_server();
    config.cp.max_frame_len = config.cp.pre_hello_max_frame_len;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let (report_tx, report_rx) = std::sync::mpsc::channel();
    let edge = EdgeClient::new(fast_edge("edge-1"))
        .operation("big.result", TargetLevel::Edge, move |ctx| {
            let report_tx = report_tx.clone();
            async move {
                // 64 detail values of 4 KiB: every field within its cap, 270 KB in all.
                let detail: BTreeMap<String, String> = (0..64)
                    .map(|i| (format!("k{i}"), "v".repeat(4_096)))
                    .collect();
                // A progress report that large is refused to the handler...
                let _ = report_tx.send(ctx.running("big", detail.clone()));
                // ...and so would its terminal be: it is replaced by a FAILED.
                let mut result = CommandResult::succeeded("done");
                result.detail = detail;
                result
            }
        })
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;

    let tracker = cp
        .send_command("edge-1", CommandSpec::new("big.result"))
        .unwrap();
    let record = bounded("command ends", tracker.finish()).await.unwrap();
    let last = record.events().last().unwrap().clone();
    assert_eq!(last.phase(), CommandPhase::Failed);
    assert!(
        last.message.contains("could not be sent") && last.message.contains("frame"),
        "{}",
        last.message
    );
    assert!(
        !record
            .updates
            .iter()
            .any(|u| matches!(u, CommandUpdate::Event(e) if e.phase() == CommandPhase::Running))
    );
    let running = report_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        matches!(&running, Err(ReportError::ExceedsLimit(l)) if l.field == "frame"),
        "{running:?}"
    );
    // The session never ended over it.
    assert_eq!(cp.stats().sessions_accepted, 1);
    assert_eq!(cp.stats().protocol_errors, 0);
    edge.shutdown().await;
    server.shutdown().await;
}
