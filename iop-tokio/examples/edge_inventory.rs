//! An Edge whose nodes come from the application's own source of truth, and which
//! runs a custom operation with real phases.
//!
//! * The application keeps an in-memory inventory of machines that changes over time
//!   (one is added, one goes offline). A sync loop pushes it into the Edge's node
//!   registry: configure what exists, remove what is gone, connect and mark ready what
//!   is online, close what went offline. The Control Plane sees it all as node events
//!   and status.
//! * The Edge registers `model.load` (a node-level operation): it reports RUNNING
//!   progress, then SUCCEEDED, or FAILED when the target machine is offline.
//!
//! So that it runs on its own, a Control Plane in the same process sends `model.load`
//! twice and prints each command's phases. Against a real Control Plane
//! (`iop-control-plane`), pass `--connect 127.0.0.1:7000 --duration 60`.
//!
//! ```text
//! cargo run -p iop-tokio --example edge_inventory
//! ```
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_lite::StreamExt;
use iop_tokio::core::cp::CommandSpec;
use iop_tokio::core::edge::{EdgeConfig, Target, TargetLevel};
use iop_tokio::core::proto::CommandPhase;
use iop_tokio::core::registry::{Generation, NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::{
    CommandContext, CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient, EdgeHandle,
    ServerConfig,
};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// One machine of the application's inventory.
#[derive(Debug, Clone, PartialEq)]
struct Machine {
    zone: &'static str,
    online: bool,
}

/// The application's source of truth: machine name → machine.
type Inventory = Arc<Mutex<BTreeMap<String, Machine>>>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let (connect, duration) = args()?;
    let inventory: Inventory = Arc::default();
    set(&inventory, "gpu-1", "a", true);
    set(&inventory, "gpu-2", "b", true);

    // A stand-in Control Plane unless `--connect` names a real one.
    let server = match connect {
        Some(_) => None,
        None => Some(
            ControlPlaneServer::bind(
                "127.0.0.1:0".parse()?,
                ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny),
            )
            .await?,
        ),
    };
    let cp_addr = connect
        .or(server.as_ref().map(|s| s.local_addr()))
        .ok_or("no address")?;

    let handler_inventory = inventory.clone();
    let edge = EdgeClient::new(EdgeConfig::new("edge-inventory", iop_tokio::process_seed()))
        .operation("model.load", TargetLevel::Node, move |ctx| {
            load_model(ctx, handler_inventory.clone())
        })
        .connect(cp_addr)?;
    let sync = tokio::spawn(sync_forever(edge.clone(), inventory.clone()));

    match server {
        // Against a real Control Plane: change the inventory now and then, for `duration`.
        None => {
            tokio::time::sleep(duration / 2).await;
            set(&inventory, "gpu-3", "a", true);
            set(&inventory, "gpu-2", "b", false);
            tokio::time::sleep(duration / 2).await;
        }
        Some(server) => {
            let result = tokio::time::timeout(duration, drive(&server, &inventory)).await;
            server.shutdown().await;
            result.map_err(|_| "the walkthrough did not finish in time")??;
        }
    }
    sync.abort();
    edge.shutdown().await;
    Ok(())
}

/// The stand-in Control Plane's script: load a model on a machine that is online,
/// then, after the inventory changed, on one that went offline.
async fn drive(server: &iop_tokio::ControlPlaneServer, inventory: &Inventory) -> Result<(), Error> {
    let cp = server.handle();
    cp.wait_for_edge("edge-inventory", Duration::from_secs(5))
        .await?;
    let load = |node: &str| {
        CommandSpec::new("model.load")
            .with_target(format!("node:{node}"))
            .with_metadata("model", "llama-3-8b")
    };

    println!("-- model.load on gpu-1");
    follow(cp.send_command("edge-inventory", load("gpu-1"))?).await?;

    println!("-- the inventory changes: gpu-3 added, gpu-2 goes offline");
    set(inventory, "gpu-3", "a", true);
    set(inventory, "gpu-2", "b", false);
    tokio::time::sleep(Duration::from_millis(300)).await; // a few sync rounds
    let status = cp.request_status("edge-inventory", vec![]).await?;
    for node in &status.nodes {
        println!(
            "  {}: connected {} labels {:?}",
            node.node_id, node.connected, node.labels
        );
    }

    println!("-- model.load on gpu-2");
    let outcome = follow(cp.send_command("edge-inventory", load("gpu-2"))?).await?;
    if outcome != CommandPhase::Failed {
        return Err(format!("gpu-2 is offline, yet model.load ended {outcome:?}").into());
    }
    Ok(())
}

/// Prints a command's phases; returns the last one.
async fn follow(mut tracker: iop_tokio::CommandTracker) -> Result<CommandPhase, Error> {
    let mut last = CommandPhase::Unspecified;
    while let Some(update) = tracker.next().await {
        match update {
            CommandUpdate::Response(r) if !r.accepted => {
                return Err(format!("rejected: {}", r.message).into());
            }
            CommandUpdate::Event(e) => {
                last = e.phase_enum().known().unwrap_or_default();
                println!(
                    "  {:<9} {}",
                    last.as_str_name().trim_start_matches("COMMAND_PHASE_"),
                    e.message
                );
            }
            _ => {}
        }
    }
    Ok(last)
}

/// The `model.load` handler: RUNNING progress, then SUCCEEDED, or FAILED when a
/// target machine is offline in the inventory.
async fn load_model(ctx: CommandContext, inventory: Inventory) -> CommandResult {
    let model = ctx.metadata().get("model").cloned().unwrap_or_default();
    let nodes = match ctx.target() {
        Target::Nodes(nodes) => nodes.clone(),
        Target::Provider { node_id, .. } => vec![node_id.clone()],
        _ => return CommandResult::failed("model.load targets nodes"),
    };
    for node in &nodes {
        let online = inventory
            .lock()
            .unwrap()
            .get(node)
            .is_some_and(|m| m.online);
        if !online {
            return CommandResult::failed(format!("{node} is offline"))
                .with_detail("node", node.as_str());
        }
    }
    for percent in [25, 50, 75, 100] {
        tokio::time::sleep(Duration::from_millis(30)).await;
        // After the deadline `running` fails: the command is TIMED_OUT, stop working.
        if ctx
            .running(format!("loading {model}: {percent}%"), BTreeMap::new())
            .is_err()
        {
            return CommandResult::cancelled("timed out");
        }
    }
    CommandResult::succeeded(format!("{model} loaded on {}", nodes.join(", ")))
        .with_detail("model", model)
}

/// Pushes the inventory into the Edge's registry every 100 ms.
async fn sync_forever(edge: EdgeHandle, inventory: Inventory) {
    // The registry's ownership generation of each machine the application connected.
    let mut owners: BTreeMap<String, Generation> = BTreeMap::new();
    loop {
        let machines = inventory.lock().unwrap().clone();
        edge.with_registry(|registry, now| {
            let gone: Vec<String> = registry
                .node_ids()
                .filter(|id| !machines.contains_key(*id))
                .map(str::to_owned)
                .collect();
            for id in gone {
                let _ = registry.remove(&id, now);
                owners.remove(&id);
            }
            for (id, machine) in &machines {
                let config = NodeConfig::new(id.as_str())
                    .with_label("zone", machine.zone)
                    .with_provider(ProviderConfig::new(
                        "vllm",
                        ProviderCategory::LocalInference,
                        4,
                        1,
                    ));
                if let Err(e) = registry.configure(config, now) {
                    println!("{id} not configured: {e}");
                    continue;
                }
                match (machine.online, owners.get(id)) {
                    (true, None) => {
                        if let Ok(generation) = registry.connect(id, now) {
                            let _ = registry.mark_ready(id, generation, now);
                            owners.insert(id.clone(), generation);
                        }
                    }
                    (false, Some(&generation)) => {
                        let _ = registry.close(id, generation, "offline in the inventory", now);
                        owners.remove(id);
                    }
                    _ => {}
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn set(inventory: &Inventory, name: &str, zone: &'static str, online: bool) {
    inventory
        .lock()
        .unwrap()
        .insert(name.to_owned(), Machine { zone, online });
}

/// `--connect ADDR` (default: a stand-in Control Plane in this process) and
/// `--duration SECS` (default 10; the stand-in walkthrough takes about a second).
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
