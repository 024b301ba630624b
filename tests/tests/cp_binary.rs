//! A smol Edge against the reference `iop-control-plane` binary (built from `iop-tokio`)
//! running as a separate process, checked through the binary's admin HTTP API.

use std::time::{Duration, Instant};

use iop_driver::iop_core::registry::NodeConfig;
use iop_smol::EdgeClient;
use iop_tests::{ControlPlaneProcess, bounded, edge_connected, fast_edge, http_get};

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
        let mut client = EdgeClient::new(fast_edge("smol-edge"));
        let mut events = client.events();
        let edge = client.connect(cp.edges).unwrap();
        edge.with_registry(|reg| {
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

        bounded("edge shutdown", edge.shutdown()).await;
    });
}
