//! The admin API end to end: the real `iop-control-plane` and `iop-edge` binaries over
//! real sockets on 127.0.0.1, driven through HTTP.

mod cli_support;

use cli_support::{
    Sse, control_plane, edge, get, post, secret_file, temp_file, wait_connected, wait_until,
};

const SECRET_ADDRESS: &str = "10.99.0.7:7000-PRIVATE-ADDR";
const SECRET_TOKEN: &str = "tok-PRIVATE-4b1e9f";

fn edge_config(extra_node: bool) -> String {
    let mut text = format!(
        r#"
[[nodes]]
id = "gpu-1"
revision = "r1"
models = ["llama"]
labels = {{ zone = "a" }}
address = "{SECRET_ADDRESS}"
token = "{SECRET_TOKEN}"
transport = {{ tls_server_name = "PRIVATE-SNI" }}

[[nodes.providers]]
id = "llama"
category = "local_inference"
models = ["llama"]
capacity = 2
long_context_capacity = 1
"#
    );
    if extra_node {
        text.push_str(
            r#"
[[nodes]]
id = "cpu-2"
revision = "r1"

[[nodes.providers]]
id = "claude"
category = "api"
capacity = 4
"#,
        );
    }
    text
}

fn assert_no_secret(what: &str, body: &str) {
    for secret in [SECRET_ADDRESS, SECRET_TOKEN, "PRIVATE"] {
        assert!(!body.contains(secret), "{what} leaked {secret:?}: {body}");
    }
}

/// Follows a command through the API until its record is terminal.
fn finished_record(admin: std::net::SocketAddr, command_id: &str) -> serde_json::Value {
    wait_until("command terminal", || {
        let a = get(admin, &format!("/v1/commands/{command_id}"));
        assert_eq!(a.status, 200, "{}", a.body);
        assert_no_secret("command record", &a.body);
        let v = a.json();
        (v["terminal"] == true).then_some(v)
    })
}

fn phases(record: &serde_json::Value) -> Vec<String> {
    record["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e["phase"]
                .as_str()
                .unwrap()
                .trim_start_matches("COMMAND_PHASE_")
                .to_owned()
        })
        .collect()
}

#[test]
fn admin_api_end_to_end_over_the_binaries() {
    let cp = control_plane(&[]);
    let admin = cp.admin;

    // Health and an empty list before any Edge.
    let health = get(admin, "/healthz");
    assert_eq!(
        (health.status, health.json()["status"].as_str()),
        (200, Some("ok"))
    );
    assert_eq!(
        get(admin, "/v1/edges").json()["edges"],
        serde_json::json!([])
    );

    // The event stream is open before the Edge connects, and shows it connect.
    let mut sse = Sse::open(admin, "/v1/events");
    let config = secret_file("edge.toml", &edge_config(false));
    let (mut edge_proc, edge_log) = edge(cp.edges, "edge-1", &config, &[]);
    sse.wait_for("event: edge_connected");
    assert!(sse.seen.contains(r#""edgeId":"edge-1""#), "{}", sse.seen);
    sse.wait_for("NODE_EVENT_KIND_EDGE_READY");
    wait_connected(admin, "edge-1");

    // List and one edge.
    let list = get(admin, "/v1/edges");
    assert_eq!(list.status, 200);
    assert!(list.content_type.starts_with("application/json"));
    let edges = list.json();
    let view = &edges["edges"][0];
    assert_eq!(view["edgeId"], "edge-1");
    assert_eq!(view["reachability"], "CONNECTED");
    let ops: Vec<&str> = view["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "command.cancel",
            "edge.ping",
            "node.drain",
            "node.resume",
            "provider-pool.refresh"
        ]
    );
    assert_no_secret("edge list", &list.body);

    // A live status round trip, in the protobuf JSON mapping.
    let status = get(admin, "/v1/edges/edge-1/status");
    assert_eq!(status.status, 200, "{}", status.body);
    assert_no_secret("status", &status.body);
    let s = status.json();
    assert_eq!(s["edgeId"], "edge-1");
    let node = &s["nodes"][0];
    assert_eq!(node["nodeId"], "gpu-1");
    assert_eq!(node["state"], "NODE_STATE_CONFIGURED");
    assert_eq!(node["labels"]["zone"], "a");
    assert_eq!(
        node["providerSnapshots"][0]["category"],
        "PROVIDER_CATEGORY_LOCAL_INFERENCE"
    );

    // A command, answered at once, then read back with every phase.
    let sent = post(
        admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"edge.ping"}"#,
    );
    assert_eq!(sent.status, 200, "{}", sent.body);
    let sent = sent.json();
    assert_eq!(sent["response"]["accepted"], true);
    let id = sent["commandId"].as_str().unwrap().to_owned();
    let record = finished_record(admin, &id);
    assert_eq!(phases(&record), ["ACCEPTED", "RUNNING", "SUCCEEDED"]);
    assert_eq!(record["events"][2]["message"], "pong");
    assert_eq!(record["operation"], "edge.ping");

    // node.drain on a node, with the proto field names in the body.
    let sent = post(
        admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"node.drain","target_selector":"node:gpu-1","timeout_ms":5000}"#,
    );
    assert_eq!(sent.status, 200, "{}", sent.body);
    let record = finished_record(admin, sent.json()["commandId"].as_str().unwrap());
    assert_eq!(
        phases(&record).last().map(String::as_str),
        Some("SUCCEEDED"),
        "{record}"
    );
    assert!(phases(&record).contains(&"RUNNING".to_owned()));

    // A rejected command: the Edge's answer says why.
    let sent = post(
        admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"node.drain","targetSelector":"node:nope"}"#,
    );
    assert_eq!(sent.status, 200, "{}", sent.body);
    let r = sent.json();
    // Proto3 JSON omits `accepted: false`.
    assert!(r["response"].get("accepted").is_none(), "{r}");
    assert_eq!(
        r["response"]["rejectReason"],
        "COMMAND_REJECT_REASON_NO_MATCHING_TARGET"
    );
    let record = get(
        admin,
        &format!("/v1/commands/{}", r["commandId"].as_str().unwrap()),
    )
    .json();
    assert_eq!(
        record["outcome"],
        "REJECTED:COMMAND_REJECT_REASON_NO_MATCHING_TARGET"
    );

    // provider-pool.refresh re-reads the file: a new node appears.
    std::fs::write(&config, edge_config(true)).unwrap();
    let sent = post(
        admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"provider-pool.refresh"}"#,
    );
    let record = finished_record(admin, sent.json()["commandId"].as_str().unwrap());
    assert_eq!(
        phases(&record),
        ["ACCEPTED", "RUNNING", "RUNNING", "SUCCEEDED"],
        "{record}"
    );
    assert_eq!(record["events"][3]["detail"]["added"], "1");
    assert_eq!(record["events"][3]["detail"]["unchanged"], "1");
    let s = get(admin, "/v1/edges/edge-1/status").json();
    let ids: Vec<&str> = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["nodeId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["cpu-2", "gpu-1"]);
    sse.wait_for("NODE_EVENT_KIND_NODE_CONFIGURED");

    // A broken file: the refresh FAILS naming file and line, and nothing changes.
    std::fs::write(&config, "[[nodes]]\nid = \"gpu-1\"\ncolour = \"red\"\n").unwrap();
    let sent = post(
        admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"provider-pool.refresh"}"#,
    );
    let record = finished_record(admin, sent.json()["commandId"].as_str().unwrap());
    assert_eq!(
        phases(&record),
        ["ACCEPTED", "RUNNING", "FAILED"],
        "{record}"
    );
    let message = record["events"][2]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{}:3: unknown field `colour`", config.display())),
        "{message}"
    );
    let s = get(admin, "/v1/edges/edge-1/status").json();
    assert_eq!(s["nodes"].as_array().unwrap().len(), 2);

    // Errors: JSON bodies with the right status.
    let err = get(admin, "/v1/edges/nope");
    assert_eq!(err.status, 404);
    assert_eq!(err.json()["error"]["code"], "unknown_edge");
    assert_eq!(get(admin, "/v1/edges/nope/status").status, 404);
    assert_eq!(
        get(admin, "/v1/commands/cmd-none").json()["error"]["code"],
        "unknown_command"
    );
    let bad = post(admin, "/v1/edges/edge-1/commands", "{not json");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"]["code"], "bad_request");
    let bad = post(
        admin,
        "/v1/edges/edge-1/commands",
        r#"{"targetSelector":"*"}"#,
    );
    assert_eq!(bad.status, 400);
    assert!(
        bad.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("operation")
    );
    let unknown = post(
        admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"reboot"}"#,
    );
    assert_eq!(
        (unknown.status, unknown.json()["error"]["code"].as_str()),
        (400, Some("unknown_operation"))
    );
    assert_eq!(get(admin, "/v1/nowhere").status, 404);

    // Metrics (OpenMetrics): the counters, the status latency histogram, the fleet.
    let metrics = get(admin, "/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .content_type
            .starts_with("application/openmetrics-text; version=1.0.0")
    );
    assert!(metrics.body.ends_with("# EOF\n"), "{}", metrics.body);
    for needle in [
        "iop_edges_connected 1",
        "iop_edges_known 1",
        "iop_status_requests_waiting 0",
        "iop_sessions_accepted_total 1",
        "iop_frames_received_total ",
        "iop_bytes_received_total ",
        "iop_protocol_errors_total 0",
        "# TYPE iop_admin_status_request_duration_seconds histogram",
        "iop_admin_status_request_duration_seconds_count{result=\"ok\"} 3",
        "iop_fleet_edges{counted=\"live\"} 1",
        "iop_metrics_fleet_detail 2",
        "iop_edge_capacity{edge=\"edge-1\"}",
    ] {
        assert!(
            metrics.body.contains(needle),
            "metrics lack {needle:?}:\n{}",
            metrics.body
        );
    }

    // The Edge dies: it stays known, but no status or command can reach it.
    edge_proc.0.kill().unwrap();
    let _ = edge_proc.0.wait();
    sse.wait_for("event: edge_disconnected");
    let gone = wait_until("edge-1 disconnected", || {
        let a = get(admin, "/v1/edges/edge-1/status");
        (a.status != 200).then_some(a)
    });
    assert_eq!(
        (gone.status, gone.json()["error"]["code"].as_str()),
        (409, Some("not_connected"))
    );
    let cmd = post(
        admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"edge.ping"}"#,
    );
    assert_eq!(cmd.status, 409);
    assert_eq!(get(admin, "/v1/edges/edge-1").json()["connected"], false);

    // Nothing private reached the event stream or the Edge's own logs either.
    assert_no_secret("event stream", &sse.seen);
    let log = std::fs::read_to_string(&edge_log).unwrap();
    assert!(log.contains("connected to control plane"), "{log}");
    assert_no_secret("edge log (debug level)", &log);
}

#[test]
fn enrolment_file_admits_the_right_credential_only() {
    let hash = iop_server::credential_hash_hex(b"edge-7-secret-0123456789");
    let enroll = temp_file(
        "enroll.toml",
        &format!("[[edges]]\nid = \"edge-7\"\ncredential_sha256 = \"{hash}\"\n"),
    );
    let cp = control_plane(&["--enroll", enroll.to_str().unwrap()]);
    let config = secret_file("edge.toml", &edge_config(false));
    let good = secret_file("good.secret", "edge-7-secret-0123456789\n");
    let bad = secret_file("bad.secret", "not-the-secret-0123456789\n");
    let (_good, good_log) = edge(
        cp.edges,
        "edge-7",
        &config,
        &["--credential-file", good.to_str().unwrap()],
    );
    let (_bad, bad_log) = edge(
        cp.edges,
        "edge-8",
        &config,
        &["--credential-file", bad.to_str().unwrap()],
    );
    wait_connected(cp.admin, "edge-7");
    wait_until("edge-8 rejected", || {
        let metrics = get(cp.admin, "/metrics").body;
        (!metrics.contains("iop_hello_rejections_total 0")).then_some(())
    });
    let edges = get(cp.admin, "/v1/edges").json();
    let ids: Vec<&str> = edges["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["edgeId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["edge-7"]);
    let metrics = get(cp.admin, "/metrics").body;
    assert!(
        !metrics.contains("iop_hello_rejections_total 0"),
        "{metrics}"
    );
    // Credentials are never logged (the Edges log at debug level).
    let log = std::fs::read_to_string(&bad_log).unwrap();
    assert!(!log.contains("not-the-secret-0123456789"), "{log}");
    // The Control Plane lists the Edge as connected once it has sent the hello
    // response, which can be before the Edge has read it and logged the connection.
    let log = wait_until("edge-7 logs its connection", || {
        let log = std::fs::read_to_string(&good_log).ok()?;
        log.contains("connected to control plane").then_some(log)
    });
    assert!(!log.contains("edge-7-secret-0123456789"), "{log}");
}

#[test]
fn simulated_nodes_show_life_in_status_and_events() {
    let cp = control_plane(&[]);
    let config = secret_file("edge.toml", &edge_config(true));
    let mut sse = Sse::open(cp.admin, "/v1/events");
    let (_edge, _) = edge(
        cp.edges,
        "edge-sim",
        &config,
        &["--simulate", "--seed", "9", "--simulate-interval-ms", "20"],
    );
    sse.wait_for("NODE_EVENT_KIND_NODE_READY");
    wait_connected(cp.admin, "edge-sim");
    let status = wait_until("a ready node in status", || {
        let a = get(cp.admin, "/v1/edges/edge-sim/status");
        let v = a.json();
        let ready = v["nodes"]
            .as_array()?
            .iter()
            .any(|n| n["connected"] == true && n["state"] == "NODE_STATE_READY");
        ready.then_some(a.body)
    });
    assert_no_secret("simulated status", &status);
}

/// Sends SIGTERM to a child we started (by its pid) and returns its exit code.
#[cfg(unix)]
fn terminate(proc: &mut cli_support::Proc) -> Option<i32> {
    let pid = proc.0.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(status) = proc.0.try_wait().unwrap() {
            return status.code();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "did not stop on SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(unix)]
#[test]
fn sigterm_stops_both_binaries_gracefully() {
    let mut cp = control_plane(&[]);
    let config = secret_file("edge.toml", &edge_config(false));
    let mut sse = Sse::open(cp.admin, "/v1/events");
    let (mut edge_proc, _) = edge(cp.edges, "edge-term", &config, &[]);
    wait_connected(cp.admin, "edge-term");
    // The Edge says goodbye (GoAway SHUTDOWN) rather than just vanishing.
    assert_eq!(terminate(&mut edge_proc), Some(0));
    sse.wait_for("event: edge_disconnected");
    assert!(sse.seen.contains("PeerGoAway"), "{}", sse.seen);
    assert_eq!(terminate(&mut cp.proc), Some(0));
}

/// `iop_load_updates_total` of the Control Plane's `/metrics`.
fn load_updates(admin: std::net::SocketAddr) -> u64 {
    let metrics = get(admin, "/metrics").body;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("iop_load_updates_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no iop_load_updates_total in {metrics}"))
}

#[test]
fn a_simulated_edge_pushes_load_updates_unless_the_control_plane_asks_for_none() {
    // Refreshes off: the view's numbers move only when the Edge pushes them.
    let cp = control_plane(&["--status-refresh-ms", "0"]);
    let config = secret_file("edge.toml", &edge_config(true));
    let (_edge, _) = edge(
        cp.edges,
        "edge-push",
        &config,
        &["--simulate", "--seed", "3", "--simulate-interval-ms", "20"],
    );
    wait_connected(cp.admin, "edge-push");
    wait_until("load updates applied", || {
        (load_updates(cp.admin) >= 3).then_some(())
    });

    let cp = control_plane(&["--status-refresh-ms", "0", "--load-update-interval", "0"]);
    let (_edge, _) = edge(
        cp.edges,
        "edge-pulled",
        &config,
        &["--simulate", "--seed", "3", "--simulate-interval-ms", "20"],
    );
    wait_connected(cp.admin, "edge-pulled");
    // Nor does an Edge told not to.
    let cp_asks = control_plane(&["--status-refresh-ms", "0"]);
    let (_edge, _) = edge(
        cp_asks.edges,
        "edge-quiet",
        &config,
        &[
            "--simulate",
            "--seed",
            "3",
            "--simulate-interval-ms",
            "20",
            "--no-load-updates",
        ],
    );
    wait_connected(cp_asks.admin, "edge-quiet");
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(load_updates(cp.admin), 0);
    assert_eq!(load_updates(cp_asks.admin), 0);
    let metrics = get(cp.admin, "/metrics").body;
    assert!(metrics.contains("iop_protocol_errors_total 0"), "{metrics}");
}
