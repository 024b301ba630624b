//! A request router on the fleet's load: an embedded Control Plane, an Edge that
//! pushes its load updates, a watch of the load and placements — the library's side
//! of `GET /v1/placement` and `GET /v1/load/watch`. Stops on its own.
//!
//! ```text
//! cargo run -p iop-tokio --example router
//! ```
#![allow(clippy::print_stdout)]

use std::time::Duration;

use iop_tokio::core::edge::EdgeConfig;
use iop_tokio::core::registry::{LeaseKind, NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::fleet::{ChangeKind, PlacementQuery};
use iop_tokio::{ControlPlaneServer, EdgeClient, EnrolmentPolicy, ServerConfig, WatchItem};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
    config.cp.load_update_interval = Some(Duration::from_millis(50));
    let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
    let cp = server.handle();
    let mut watch = cp.watch_load();

    // An Edge with two GPUs serving llama-3: room for 4 requests each.
    let edge = EdgeClient::new(EdgeConfig::new("edge-1", iop_tokio::process_seed()))
        .connect(server.local_addr())?;
    edge.with_registry(|reg, now| {
        for gpu in ["gpu-1", "gpu-2"] {
            let node = NodeConfig::new(gpu).with_provider(
                ProviderConfig::new("llama", ProviderCategory::LocalInference, 4, 0)
                    .with_model("llama-3"),
            );
            let _ = reg.configure(node, now);
            let _ = reg.connect_ready(gpu, now);
        }
    });

    // The watch: a snapshot, then the Edge's first view.
    let query = PlacementQuery::new("llama-3");
    loop {
        match watch.next().await {
            Some(WatchItem::Snapshot { views, seq }) => {
                println!("snapshot at change {seq}: {} Edges", views.len());
            }
            Some(WatchItem::Changes(changes)) => {
                println!(
                    "{} change(s), last {}",
                    changes.len(),
                    changes[changes.len() - 1].seq
                );
                if cp.placement(&query)?.candidates.len() == 2 {
                    break;
                }
            }
            Some(_) => {}
            None => return Ok(()),
        }
    }
    let best = &cp.placement(&query)?.candidates[0];
    println!(
        "place on {}/{}: {} free",
        best.edge_id, best.node_id, best.free
    );

    // Three requests land on gpu-1: the Edge pushes the change within 50 ms.
    let _leases = edge.with_registry(|reg, _| {
        (0..3)
            .filter_map(|_| reg.admit("gpu-1", "llama", LeaseKind::Normal).ok())
            .collect::<Vec<_>>()
    });
    let pushed = loop {
        match watch.next().await {
            Some(WatchItem::Changes(changes)) => {
                if let Some(ChangeKind::Numbers { view, changed }) = changes.last().map(|c| &c.kind)
                {
                    let p = view.provider(changed[0] as usize).ok_or("no provider")?;
                    break p.in_flight();
                }
            }
            None => return Ok(()),
            _ => {}
        }
    };
    println!("pushed: gpu-1 has {pushed} in flight");
    let answer = cp.reserve_placement(&query)?;
    let pick = &answer.candidates[0];
    println!(
        "reserved {}/{} ({} free after the pick); excluded: {:?}",
        pick.edge_id, pick.node_id, pick.free, answer.excluded
    );
    edge.shutdown().await;
    server.shutdown().await;
    Ok(())
}
