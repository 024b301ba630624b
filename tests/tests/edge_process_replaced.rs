//! An `iop-edge` process dies behind a half-open connection and a new
//! process with the same edge id takes its place, all as real processes over real
//! sockets (the `iop-control-plane` and `iop-edge` binaries of `iop-server`).
//!
//! The Control Plane cannot tell a dead Edge from a silent one until its liveness
//! window (3 heartbeat intervals, PROTOCOL.md §4.2) runs out. The default duplicate policy,
//! Replace (PROTOCOL.md §4.1), must therefore let the new process in at once and supersede
//! the old session, instead of locking the Edge out for the whole window.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use iop_tests::{ControlPlaneProcess, Proxy, WAIT, edge_binary, http_get};

/// The heartbeat interval given to the Control Plane: its liveness window is 3 of
/// them (60 s), far longer than any wait below, so only a supersession can let the
/// new process in within the test's bounds.
const HEARTBEAT_MS: u64 = 20_000;

/// A running `iop-edge`, killed when dropped.
struct EdgeProcess(Child);

impl EdgeProcess {
    /// Starts `iop-edge` with id `edge_id`, dialing `control_plane`, its one node
    /// `node_id` written to a config file of its own.
    fn start(control_plane: SocketAddr, edge_id: &str, node_id: &str) -> Self {
        let config = config_file(node_id);
        let child = Command::new(edge_binary())
            .arg("--control-plane")
            .arg(control_plane.to_string())
            .args(["--edge-id", edge_id, "--log-level", "warn"])
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    /// SIGKILL: the process gets no chance to say goodbye.
    fn kill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for EdgeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An Edge config with the one node `node_id`, in this test's scratch directory.
fn config_file(node_id: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("edge_process_replaced-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{node_id}.toml"));
    let toml = format!(
        "[[nodes]]\nid = \"{node_id}\"\nrevision = \"r1\"\nmodels = [\"m\"]\n\n\
         [[nodes.providers]]\nid = \"p\"\ncategory = \"api\"\nmodels = [\"m\"]\ncapacity = 1\n"
    );
    std::fs::write(&path, toml).unwrap();
    path
}

/// Polls `GET path` (every 20 ms, at most [`WAIT`]) until `done` accepts the answer.
fn poll_admin(admin: SocketAddr, path: &str, done: impl Fn(u16, &str) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, body) = http_get(admin, path);
        if done(code, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "GET {path} never satisfied: {code} {body}"
        );
        sleep(Duration::from_millis(20));
    }
}

/// `GET /v1/edges/{edge_id}` as JSON, once it answers 200.
fn edge_record(admin: SocketAddr, edge_id: &str) -> serde_json::Value {
    let body = poll_admin(admin, &format!("/v1/edges/{edge_id}"), |code, _| {
        code == 200
    });
    serde_json::from_str(&body).unwrap()
}

/// The session id of an edge record (a string: 64-bit integers are strings in JSON).
fn session_id(record: &serde_json::Value) -> u64 {
    record["sessionId"].as_str().unwrap().parse().unwrap()
}

/// The value of the unlabelled metric `name` in `/metrics`.
fn metric(admin: SocketAddr, name: &str) -> u64 {
    let (code, body) = http_get(admin, "/metrics");
    assert_eq!(code, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_killed_half_open_edge_process_is_replaced_by_its_successor_at_once() {
    let heartbeat = HEARTBEAT_MS.to_string();
    let cp = ControlPlaneProcess::start_with(&["--heartbeat-interval-ms", &heartbeat]);
    let admin = cp.admin;
    let proxy = Proxy::start(cp.edges);

    // Process A connects through the proxy.
    let a = EdgeProcess::start(proxy.addr(), "edge-x", "node-a");
    let first = poll_admin(admin, "/v1/edges/edge-x", |code, body| {
        code == 200 && body.contains("\"connected\":true")
    });
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    let first_session = session_id(&first);
    assert!(first_session > 0, "{first}");

    // The link goes dark and A dies behind it: its FIN/RST never reaches the CP, whose
    // connection to A is now half-open.
    proxy.partition();
    a.kill();
    // Long enough for a close to reach the CP if one got through (none must).
    sleep(Duration::from_millis(500));
    let stale = edge_record(admin, "edge-x");
    assert_eq!(stale["connected"], true, "the CP saw A go: {stale}");
    assert_eq!(session_id(&stale), first_session, "{stale}");

    // Process B, same id, dials the CP directly.
    let started = Instant::now();
    let _b = EdgeProcess::start(cp.edges, "edge-x", "node-b");
    let second = poll_admin(admin, "/v1/edges/edge-x", |code, body| {
        code == 200
            && serde_json::from_str::<serde_json::Value>(body)
                .is_ok_and(|r| r["connected"] == true && session_id(&r) != first_session)
    });
    let accepted_after = started.elapsed();
    let second: serde_json::Value = serde_json::from_str(&second).unwrap();
    let second_session = session_id(&second);
    assert!(
        second_session > first_session,
        "session ids strictly increase: {second_session} after {first_session}"
    );
    // Accepted at once, not after the 60 s liveness window: Replace superseded the
    // half-open session rather than refusing B as a duplicate.
    let liveness_window = Duration::from_millis(3 * HEARTBEAT_MS);
    assert!(
        accepted_after < liveness_window / 6,
        "B accepted only after {accepted_after:?} (window {liveness_window:?})"
    );
    assert_eq!(second["supersessions"], "1", "{second}");
    assert_eq!(metric(admin, "iop_supersessions_total"), 1);
    assert_eq!(metric(admin, "iop_heartbeat_timeouts_total"), 0);
    assert_eq!(metric(admin, "iop_hello_rejections_total"), 0);

    // A live status round trip reaches B: its node, not A's.
    let status = poll_admin(admin, "/v1/edges/edge-x/status", |code, body| {
        code == 200 && body.contains("node-b")
    });
    assert!(!status.contains("node-a"), "{status}");
    let after = edge_record(admin, "edge-x");
    assert_eq!(session_id(&after), second_session, "{after}");
    assert_eq!(after["connected"], true, "{after}");
}
