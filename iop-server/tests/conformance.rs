//! `iop-conformance` passes this repository's own binaries: every case against
//! `iop-edge` (dialling the tester) and against `iop-control-plane` (the tester's
//! Edges dialling it), none skipped.

mod cli_support;

use std::path::PathBuf;
use std::time::Duration;

use cli_support::{assert_all_passed, control_plane, edge};
use iop_conformance::wire::Listener;
use iop_conformance::{control_plane as cp_mode, edge as edge_mode};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edge.toml")
}

#[test]
fn the_control_plane_passes_every_case() {
    let cp = control_plane(&["--hello-timeout-ms", "2000"]);
    let mut opts = cp_mode::CpOptions::new(cp.edges);
    // The command cases ask for commands through the binary's admin API.
    opts.admin = Some(cp.admin);
    let report = cp_mode::run(opts, |_| {});
    assert_all_passed(&report, cp_mode::CASES.len());
}

#[test]
fn the_edge_passes_every_case() {
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let _edge = edge(addr, "conformance-edge", &examples(), &[]);
    let mut opts = edge_mode::EdgeOptions::new(addr);
    opts.edge_id = Some("conformance-edge".into());
    // The node addresses of examples/edge.toml, which never leave the Edge (§5.4).
    opts.secrets = vec!["10.0.0.5:7000".into(), "10.0.0.6:7000".into()];
    opts.dial_timeout = Duration::from_secs(40);
    let report = edge_mode::run_on(listener, opts, &mut |_| {}).unwrap();
    assert_all_passed(&report, edge_mode::CASES.len());
}

#[test]
fn a_simulating_edge_pushes_load_updates_as_the_rules_say() {
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let _edge = edge(
        addr,
        "conformance-pusher",
        &examples(),
        &["--simulate", "--seed", "5", "--simulate-interval-ms", "20"],
    );
    let mut opts = edge_mode::EdgeOptions::new(addr);
    opts.only = vec!["edge.flow.load_update".into()];
    let report = edge_mode::run_on(listener, opts, &mut |_| {}).unwrap();
    assert_all_passed(&report, 1);
    let detail = &report.results[0].detail;
    assert!(!detail.starts_with("no load changed"), "{detail}");
}
