//! A smol Edge against the reference `iop-control-plane` binary (built from `iop-server`)
//! running as a separate process, checked through the binary's admin HTTP API.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use iop_driver::iop_core::edge::TargetLevel;
use iop_driver::iop_core::registry::NodeConfig;
use iop_smol::{CommandResult, EdgeClient};
use iop_tests::{ControlPlaneProcess, bounded, edge_connected, fast_edge, http_get, http_post};

/// Polls `GET path` (every 20 ms, at most 10 s) until `done` accepts the answer.
fn poll_admin(admin: std::net::SocketAddr, path: &str, done: impl Fn(u16, &str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, body) = http_get(admin, path);
        if done(code, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "GET {path} never satisfied: {code} {body}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_smol_edge_is_listed_and_answers_status_through_the_binary() {
    let cp = ControlPlaneProcess::start();
    smol::block_on(async {
        let mut client = EdgeClient::new(fast_edge("smol-edge")).operation(
            "edge.ping",
            TargetLevel::Edge,
            |ctx| async move {
                ctx.running("on smol", BTreeMap::new()).unwrap();
                CommandResult::succeeded("pong from smol")
            },
        );
        let mut events = client.events();
        let edge = client.connect(cp.edges).unwrap();
        edge.with_registry(|reg, _now| {
            let _ = reg.configure(NodeConfig::new("gpu-smol"), 1_000).unwrap();
        });
        edge_connected(&mut events).await;

        let admin = cp.admin;
        let listed = smol::unblock(move || {
            poll_admin(admin, "/v1/edges", |code, body| {
                code == 200 && body.contains("smol-edge")
            })
        })
        .await;
        let edges: serde_json::Value = serde_json::from_str(&listed).unwrap();
        assert!(listed.contains("smol-edge"), "{edges}");

        let one =
            smol::unblock(move || poll_admin(admin, "/v1/edges/smol-edge", |code, _| code == 200))
                .await;
        let one: serde_json::Value = serde_json::from_str(&one).unwrap();
        assert_eq!(one["connected"], true, "{one}");

        // The status request crosses the process boundary to the smol Edge and back.
        let status = smol::unblock(move || {
            poll_admin(admin, "/v1/edges/smol-edge/status", |code, body| {
                code == 200 && body.contains("gpu-smol")
            })
        })
        .await;
        let status: serde_json::Value = serde_json::from_str(&status).unwrap();
        assert!(status.to_string().contains("smol-edge"), "{status}");

        // A command posted to the binary runs on the smol Edge; its record has every
        // phase.
        let (code, sent) = smol::unblock(move || {
            http_post(
                admin,
                "/v1/edges/smol-edge/commands",
                r#"{"operation":"edge.ping"}"#,
            )
        })
        .await;
        assert_eq!(code, 200, "{sent}");
        let sent: serde_json::Value = serde_json::from_str(&sent).unwrap();
        assert_eq!(sent["response"]["accepted"], true, "{sent}");
        let id = sent["commandId"].as_str().unwrap().to_owned();
        let record = smol::unblock(move || {
            poll_admin(admin, &format!("/v1/commands/{id}"), |code, body| {
                code == 200 && body.contains("\"terminal\":true")
            })
        })
        .await;
        let record: serde_json::Value = serde_json::from_str(&record).unwrap();
        let phases: Vec<&str> = record["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["phase"].as_str())
            .map(|p| p.trim_start_matches("COMMAND_PHASE_"))
            .collect();
        assert_eq!(phases, ["ACCEPTED", "RUNNING", "SUCCEEDED"], "{record}");
        assert_eq!(record["events"][2]["message"], "pong from smol");

        bounded("edge shutdown", edge.shutdown()).await;
    });
}
