//! The Python Edge of `examples/python-edge` — written from PROTOCOL.md, the schema
//! and `proto/iop/limits.toml` alone, on Google's protobuf runtime — passes every
//! case of `iop-conformance edge`, its node addresses and tokens kept off the wire:
//! the proof that the kit beside the schema is enough to build a peer.

mod cli_support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use cli_support::{Proc, assert_all_passed, temp_path};
use iop_conformance::edge;
use iop_conformance::wire::Listener;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
#[ignore = "needs Python with protobuf and grpcio-tools: scripts/test.sh runs it"]
fn the_python_edge_passes_every_case() {
    // protoc (grpcio-tools') writes iop/control_pb2.py from the schema.
    let pb = temp_path("python-pb");
    std::fs::create_dir_all(&pb).unwrap();
    let protoc = Command::new("python3")
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(root().join("proto"))
        .arg(format!("--python_out={}", pb.display()))
        .arg(root().join("proto/iop/control.proto"))
        .status()
        .expect("python3");
    assert!(
        protoc.success(),
        "protoc failed: pip install -r examples/python-edge/requirements.txt"
    );

    let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let _edge = Proc(
        Command::new("python3")
            .arg(root().join("examples/python-edge/edge.py"))
            .args([
                "--control-plane",
                &addr.to_string(),
                "--edge-id",
                "py-edge-1",
                // Its providers' load moves, so the load-update case sees updates.
                "--load-churn",
            ])
            .arg("--pb-dir")
            .arg(&pb)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3"),
    );
    let mut opts = edge::EdgeOptions::new(addr);
    opts.edge_id = Some("py-edge-1".into());
    // What examples/python-edge/nodes.toml says only the Edge may know.
    opts.secrets = vec![
        "10.1.0.7:7000".into(),
        "10.1.0.8:7000".into(),
        "py-edge-node-token-9f3c1d".into(),
    ];
    opts.dial_timeout = Duration::from_secs(40);
    let report = edge::run_on(listener, opts, &mut |_| {}).unwrap();
    let _ = std::fs::remove_dir_all(&pb);
    assert_all_passed(&report, edge::CASES.len());
    let pushed = report.result("edge.flow.load_update").unwrap();
    assert!(!pushed.detail.starts_with("no load changed"), "{pushed}");
}

#[test]
fn the_python_edge_stays_within_400_lines() {
    let text = std::fs::read_to_string(root().join("examples/python-edge/edge.py")).unwrap();
    assert!(
        text.lines().count() <= 400,
        "{} lines",
        text.lines().count()
    );
}
