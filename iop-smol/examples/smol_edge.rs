//! An Edge on smol: two nodes in its registry, and a `node.restart` operation that
//! reports RUNNING progress, then SUCCEEDED — or FAILED for a node that is not ready.
//!
//! So that it runs on its own, a smol Control Plane in the same process restarts
//! both nodes and prints each command's phases; it stops after about a second.
//! Against a real Control Plane (`iop-control-plane`), pass
//! `--connect 127.0.0.1:7000 --duration 60`.
//!
//! ```text
//! cargo run -p iop-smol --example smol_edge
//! ```
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::time::Duration;

use futures_lite::{FutureExt, StreamExt};
use iop_smol::core::NodeRegistry;
use iop_smol::core::cp::CommandSpec;
use iop_smol::core::edge::{EdgeConfig, Target, TargetLevel};
use iop_smol::core::proto::{CommandPhase, NodeState};
use iop_smol::core::registry::NodeConfig;
use iop_smol::{
    CommandContext, CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient, EdgeHandle,
    ServerConfig, Smol,
};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    let (connect, duration) = args()?;
    smol::block_on(async {
        let server = match connect {
            Some(_) => None,
            None => Some(
                ControlPlaneServer::bind(
                    "127.0.0.1:0".parse()?,
                    ServerConfig::new(iop_smol::EnrolmentPolicy::AcceptAny),
                )
                .await?,
            ),
        };
        let cp_addr = connect
            .or(server.as_ref().map(|s| s.local_addr()))
            .ok_or("no address")?;

        // The Edge: its handler reaches the registry through the command's context.
        let edge = EdgeClient::new(EdgeConfig::new("edge-smol", iop_smol::process_seed()))
            .operation("node.restart", TargetLevel::Node, |ctx| {
                let handle: Option<EdgeHandle> = ctx.edge::<Smol, NodeRegistry>();
                restart(ctx, handle)
            })
            .connect(cp_addr)?;

        // Two nodes: gpu-1 connects and becomes ready, gpu-2 stays configured only.
        edge.with_registry(|nodes, now| -> Result<(), Error> {
            let _ = nodes.configure(NodeConfig::new("gpu-1").with_label("zone", "a"), now)?;
            let _ = nodes.configure(NodeConfig::new("gpu-2").with_label("zone", "b"), now)?;
            let generation = nodes.connect("gpu-1", now)?;
            let _ = nodes.mark_ready("gpu-1", generation, now);
            Ok(())
        })?;

        match server {
            None => {
                smol::Timer::after(duration).await;
            }
            Some(server) => {
                let walkthrough = async { drive(&server).await.map(Some) };
                let deadline = async {
                    smol::Timer::after(duration).await;
                    Ok(None)
                };
                let finished = walkthrough.or(deadline).await;
                server.shutdown().await;
                finished?.ok_or("the walkthrough did not finish in time")?;
            }
        }
        edge.shutdown().await;
        Ok(())
    })
}

/// The stand-in Control Plane: restart gpu-1 (ready) then gpu-2 (not ready).
async fn drive(server: &iop_smol::ControlPlaneServer) -> Result<(), Error> {
    let cp = server.handle();
    cp.wait_for_edge("edge-smol", Duration::from_secs(5))
        .await?;
    for (node, expected) in [
        ("gpu-1", CommandPhase::Succeeded),
        ("gpu-2", CommandPhase::Failed),
    ] {
        println!("-- node.restart on {node}");
        let spec = CommandSpec::new("node.restart").with_target(format!("node:{node}"));
        let mut tracker = cp.send_command("edge-smol", spec)?;
        let mut last = CommandPhase::Unspecified;
        while let Some(update) = tracker.next().await {
            if let CommandUpdate::Event(e) = update {
                last = e.phase_enum().known().unwrap_or_default();
                println!(
                    "  {:<9} {}",
                    last.as_str_name().trim_start_matches("COMMAND_PHASE_"),
                    e.message
                );
            }
        }
        if last != expected {
            return Err(format!("{node}: expected {expected:?}, got {last:?}").into());
        }
    }
    Ok(())
}

/// `node.restart`: FAILED unless every target node is READY, else RUNNING steps and
/// SUCCEEDED.
async fn restart(ctx: CommandContext, edge: Option<EdgeHandle>) -> CommandResult {
    let (Some(edge), Target::Nodes(nodes)) = (edge, ctx.target()) else {
        return CommandResult::failed("shutting down, or not a node target");
    };
    for node in nodes {
        let state = edge.with_registry(|r, _now| r.node_state(node).map(|(state, _)| state));
        if state != Some(NodeState::Ready) {
            return CommandResult::failed(format!("{node} is not ready"));
        }
    }
    for step in ["stopping", "starting", "warming up"] {
        smol::Timer::after(Duration::from_millis(30)).await;
        if ctx.running(step, Default::default()).is_err() {
            return CommandResult::cancelled("timed out");
        }
    }
    CommandResult::succeeded(format!("restarted {}", nodes.join(", ")))
}

/// `--connect ADDR` (default: a stand-in Control Plane in this process) and
/// `--duration SECS` (default 10).
fn args() -> Result<(Option<SocketAddr>, Duration), Error> {
    let mut connect = None;
    let mut duration = Duration::from_secs(10);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--connect" => connect = Some(value.parse()?),
            "--duration" => duration = Duration::from_secs(value.parse()?),
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    Ok((connect, duration))
}
