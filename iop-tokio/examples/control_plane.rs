//! A Control Plane embedded in an application that reacts to node events: when an
//! Edge reports `NODE_DISCONNECTED`, the application logs it and refreshes that
//! Edge's status, then shows the nodes it now knows about.
//!
//! So that it runs on its own, the example also starts one Edge in the same process
//! whose node `gpu-1` connects, becomes ready and then drops its connection. Point
//! real Edges (`iop-edge`) at it instead with `--listen 127.0.0.1:7000`.
//!
//! ```text
//! cargo run -p iop-tokio --example control_plane                  # stops after ~1 s
//! cargo run -p iop-tokio --example control_plane -- --duration 60 --listen 127.0.0.1:7000
//! ```
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::time::Duration;

use iop_tokio::prelude::*;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let (listen, duration) = args()?;
    let server =
        ControlPlaneServer::bind(listen, ServerConfig::new(EnrolmentPolicy::AcceptAny)).await?;
    println!("control plane listening on {}", server.local_addr());
    let cp = server.handle();
    let events = cp.subscribe();

    // Without `--listen`, a stand-in Edge so there is something to watch.
    let stand_in = if listen.port() == 0 {
        Some(tokio::spawn(stand_in_edge(server.local_addr())))
    } else {
        None
    };

    // The application's reaction loop, for `duration` — or, with the stand-in Edge,
    // until it has seen the disconnect and refreshed.
    let refreshed = tokio::time::timeout(duration, react(&cp, events, stand_in.is_some())).await;
    if let Some(edge) = stand_in {
        edge.await??;
    }
    server.shutdown().await;
    match refreshed {
        Ok(result) => result,
        Err(_) if listen.port() != 0 => Ok(()), // ran for --duration, as asked
        Err(_) => Err("no NODE_DISCONNECTED seen in time".into()),
    }
}

/// Logs what matters to the application and refreshes an Edge's status when one of
/// its nodes disconnects. Returns after the first refresh when `once`.
async fn react(
    cp: &ControlPlaneHandle,
    mut events: iop_tokio::Subscription<CpEvent>,
    once: bool,
) -> Result<(), Error> {
    while let Some(notice) = events.next().await {
        let event = match notice {
            Notice::Event(event) => event,
            // A slow subscriber loses events and is told so: refresh everything.
            Notice::Lagged(n) => {
                println!("missed {n} events; refreshing every edge");
                for view in cp.edges() {
                    show_status(cp, &view.edge_id).await?;
                }
                continue;
            }
            _ => continue,
        };
        match event {
            CpEvent::SessionAccepted { edge_id, .. } => println!("edge {edge_id} connected"),
            CpEvent::EdgeDisconnected { edge_id, .. } => println!("edge {edge_id} disconnected"),
            CpEvent::NodeEvent { edge_id, event, .. } => {
                let kind = event.kind_enum();
                let kind_name = kind.to_string();
                let kind_name = kind_name.trim_start_matches("NODE_EVENT_KIND_");
                println!("{edge_id}/{}: {kind_name}", event.node_id);
                if kind == NodeEventKind::NodeDisconnected {
                    println!(
                        "  {} lost ({}): refreshing {edge_id}",
                        event.node_id, event.reason
                    );
                    show_status(cp, &edge_id).await?;
                    if once {
                        return Ok(());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Asks `edge_id` for a fresh status and prints one line per node.
async fn show_status(cp: &ControlPlaneHandle, edge_id: &str) -> Result<(), Error> {
    let status = cp.request_status(edge_id, vec![]).await?;
    for node in &status.nodes {
        let state = node.state_enum().to_string();
        let state = state.trim_start_matches("NODE_STATE_");
        println!("  {edge_id}/{}: {state}", node.node_id);
    }
    Ok(())
}

/// An Edge whose node `gpu-1` connects, becomes ready, then drops its connection.
async fn stand_in_edge(cp: SocketAddr) -> Result<(), Error> {
    let edge = EdgeClient::new(EdgeConfig::new("edge-1", iop_tokio::process_seed())).connect(cp)?;
    let _ = edge.with_registry(|nodes, now| nodes.configure(NodeConfig::new("gpu-1"), now))?;
    edge.connected().await?;
    let generation = edge.with_registry(|nodes, now| nodes.connect_ready("gpu-1", now))?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = edge.with_registry(|nodes, now| nodes.close("gpu-1", generation, "link lost", now));
    // Stay up long enough to answer the refresh.
    tokio::time::sleep(Duration::from_millis(500)).await;
    edge.shutdown().await;
    Ok(())
}

/// `--listen ADDR` (default 127.0.0.1:0 with a stand-in Edge) and `--duration SECS`
/// (default 5).
fn args() -> Result<(SocketAddr, Duration), Error> {
    let mut listen: SocketAddr = "127.0.0.1:0".parse()?;
    let mut duration = Duration::from_secs(5);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--listen" => listen = value.parse()?,
            "--duration" => duration = Duration::from_secs(value.parse()?),
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    Ok((listen, duration))
}
