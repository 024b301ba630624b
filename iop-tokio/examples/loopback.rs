//! Measures status and command round trips between a Control Plane and an Edge on
//! 127.0.0.1 (both in this process).
//!
//! ```text
//! cargo run --release -p iop-tokio --example loopback -- 2000
//! ```
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use iop_tokio::core::cp::{CommandSpec, CpEvent};
use iop_tokio::core::edge::{EdgeConfig, TargetLevel};
use iop_tokio::core::registry::NodeConfig;
use iop_tokio::{CommandResult, ControlPlaneServer, EdgeClient, Notice, ServerConfig};

fn percentiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    format!(
        "p50 {:?}  p99 {:?}  max {:?}",
        at(0.5),
        at(0.99),
        samples[samples.len() - 1]
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000);
    let mut config = ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny);
    config.cp.max_inflight_commands = rounds + 16;
    config.cp.finished_command_retention = 16;
    let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(EdgeConfig::new("edge-bench", iop_tokio::process_seed()))
        .operation("edge.ping", TargetLevel::Edge, |_ctx| async {
            CommandResult::succeeded("pong")
        })
        .connect(server.local_addr())?;
    edge.with_registry(|reg, _now| {
        for i in 0..8 {
            let _ = reg.configure(NodeConfig::new(format!("node-{i}")), 0);
        }
    });
    while !matches!(
        events.next().await,
        Some(Notice::Event(CpEvent::SessionAccepted { .. }))
    ) {}
    drop(events);

    let mut status = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        cp.request_status("edge-bench", vec![]).await?;
        status.push(t.elapsed());
    }
    let mut commands = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let spec = CommandSpec::new("edge.ping");
        let t = Instant::now();
        let mut tracker = cp.send_command("edge-bench", spec)?;
        while tracker.next().await.is_some() {}
        commands.push(t.elapsed());
    }
    println!(
        "status round trip (8 nodes), {rounds} sequential: {}",
        percentiles(status)
    );
    println!(
        "command to terminal phase, {rounds} sequential: {}",
        percentiles(commands)
    );
    edge.shutdown().await;
    server.shutdown().await;
    Ok(())
}
