//! A Control Plane and an Edge in one program, as an application embeds them: the
//! Edge owns two GPU nodes and a custom `model.warmup` operation; the Control Plane
//! waits for it, reads its status, runs the operation and awaits its outcome, shows
//! two mistakes and their errors, then both stop.
//!
//! ```text
//! cargo run -p iop-tokio --example embed
//! ```
#![allow(clippy::print_stdout)]

use std::time::Duration;

use iop_tokio::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The Control Plane enrols one Edge, known by its credential.
    let secret = b"an example secret, not for production";
    let policy = EnrolmentPolicy::AllowList(
        AllowList::default().with("edge-1", &Credential::new(secret.to_vec())),
    );
    let server =
        ControlPlaneServer::bind("127.0.0.1:0".parse()?, ServerConfig::new(policy)).await?;
    let cp = server.handle();

    // The Edge: one node-level operation, handled by an async fn.
    let mut config = EdgeConfig::new("edge-1", process_seed());
    config.credential = secret.to_vec().into();
    let edge = EdgeClient::new(config)
        .operation("model.warmup", TargetLevel::Node, |ctx| async move {
            let model = ctx.metadata().get("model").cloned().unwrap_or_default();
            let Target::Nodes(nodes) = ctx.target().clone() else {
                return CommandResult::failed("model.warmup takes nodes");
            };
            for node in &nodes {
                let _ = ctx.running(format!("loading {model} on {node}"), Default::default());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            CommandResult::succeeded(format!("{model} is warm on {}", nodes.join(", ")))
        })
        .connect(server.local_addr())?;
    let session = edge.connected().await?;
    println!("edge-1: session {} is up", session.session_id);

    // Its nodes: configured, then online (the time comes with the registry).
    edge.with_registry(|nodes, now| -> Result<(), Box<dyn std::error::Error>> {
        for id in ["gpu-1", "gpu-2"] {
            let vllm = ProviderConfig::new("vllm", ProviderCategory::LocalInference, 4, 1)
                .with_model("llama-3-8b");
            let node = NodeConfig::new(id)
                .with_label("zone", "a")
                .with_provider(vllm);
            nodes.configure(node, now)?;
            nodes.connect_ready(id, now)?;
        }
        Ok(())
    })?;

    // The Control Plane's side: readiness, status, a command and its outcome.
    let view = cp.wait_for_edge("edge-1", Duration::from_secs(5)).await?;
    println!("edge-1 is ready and advertises {:?}", view.operations);
    for node in cp.request_status("edge-1", vec![]).await?.nodes {
        let vllm = &node.provider_snapshots[0];
        println!(
            "  {} is {}, vllm capacity {}",
            node.node_id,
            node.state_enum(),
            vllm.capacity
        );
    }
    let warmup = CommandSpec::new("model.warmup")
        .with_target("label:zone=a")
        .with_metadata("model", "llama-3-8b");
    match cp.send_command("edge-1", warmup)?.outcome().await {
        Ok(done) => println!("model.warmup: {}", done.message),
        Err(failure) => println!("model.warmup failed: {failure}"),
    }

    // Mistakes are errors that say what to do next.
    let mistakes = [
        ("edge-1", "model.unload", ""),
        ("edge-9", "model.warmup", ""),
    ];
    for (edge_id, operation, target) in mistakes {
        let spec = CommandSpec::new(operation).with_target(target);
        if let Err(e) = cp.send_command(edge_id, spec) {
            println!("{edge_id} {operation}: {e}");
        }
    }
    let nowhere = CommandSpec::new("model.warmup").with_target("node:gpu-9");
    if let Err(failure) = cp.send_command("edge-1", nowhere)?.outcome().await {
        println!("model.warmup on gpu-9: {failure}");
    }

    // Edge first: the Control Plane records its GoAway, then stops itself.
    edge.shutdown().await;
    server.shutdown().await;
    Ok(())
}
