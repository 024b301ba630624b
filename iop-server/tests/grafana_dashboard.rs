//! The shipped Grafana dashboard (`examples/grafana/iop-fleet.json`) reads only what
//! `iop-control-plane` exports: every metric its queries name is in `/metrics` of a
//! running Control Plane with a running Edge.

mod cli_support;

use std::collections::BTreeSet;
use std::path::PathBuf;

use cli_support::{control_plane, edge, get, wait_connected};
use serde_json::Value;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The metric names a PromQL expression reads (`iop_...`), histogram suffixes kept.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("iop_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.push(name);
    }
    names
}

/// Every query of the dashboard's panels.
fn queries(dashboard: &Value) -> Vec<String> {
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_metric_the_dashboard_reads_is_exported() {
    let text = std::fs::read_to_string(examples().join("grafana/iop-fleet.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let exprs = queries(&dashboard);
    assert!(exprs.len() >= 20, "{} queries", exprs.len());
    let wanted: BTreeSet<String> = exprs.iter().flat_map(|e| metric_names(e)).collect();
    // The fleet's load, protocol health and command outcomes are all read.
    for family in [
        "iop_fleet_capacity",
        "iop_fleet_model_capacity",
        "iop_commands_finished_total",
    ] {
        assert!(
            wanted.contains(family),
            "the dashboard never reads {family}"
        );
    }

    let cp = control_plane(&[]);
    let config = examples().join("edge.toml");
    let _edge = edge(cp.edges, "edge-1", &config, &["--simulate"]);
    wait_connected(cp.admin, "edge-1");
    let exported = cli_support::wait_until("the fleet's gauges", || {
        let metrics = get(cp.admin, "/metrics").body;
        metrics
            .contains("iop_fleet_model_capacity{")
            .then_some(metrics)
    });
    let names: BTreeSet<&str> = exported
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|n| !names.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "read by the dashboard, not exported: {missing:?}"
    );
}
