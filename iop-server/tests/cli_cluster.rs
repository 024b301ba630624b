//! `iop-control-plane --cluster`: two replica processes over a real nats-server; an
//! Edge moving from one to the other, and the flags' errors.

mod cli_support;

use std::path::PathBuf;
use std::process::Command;

use cli_support::{
    CP_BIN, Sse, control_plane, edge, get, post, signal, wait_connected, wait_until,
};
use iop_cluster::testing::NatsServer;

fn example_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edge.toml")
}

/// The replicas' NKey seed of `nats` in a file only its owner may read.
fn seed_file(nats: &NatsServer) -> String {
    let seed = &nats.accounts().expect("the replicas' account").replica;
    cli_support::secret_file("replica.nk", seed)
        .display()
        .to_string()
}

/// The flags of replica `id` on the engine at `url`, with the replicas' NKey.
fn replica<'a>(url: &'a str, id: &'a str, nkey: &'a str) -> [&'a str; 6] {
    ["--cluster", url, "--replica-id", id, "--cluster-nkey", nkey]
}

fn session_of(admin: std::net::SocketAddr, edge_id: &str) -> u64 {
    get(admin, &format!("/v1/edges/{edge_id}")).json()["sessionId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn an_edge_moves_between_replica_processes_with_increasing_session_ids() {
    let nats = NatsServer::start_with_accounts();
    let url = nats.url();
    let nkey = seed_file(&nats);
    let a = control_plane(&replica(&url, "cp-a", &nkey));
    let b = control_plane(&replica(&url, "cp-b", &nkey));

    let (first, _log) = edge(a.edges, "edge-1", &example_config(), &[]);
    wait_connected(a.admin, "edge-1");
    let view = get(a.admin, "/v1/edges/edge-1").json();
    assert_eq!(view["replica"], "cp-a", "{view}");
    let s1 = session_of(a.admin, "edge-1");

    // cp-b's admin API serves the Edge cp-a holds: listed, viewed, asked, commanded.
    let listed = get(b.admin, "/v1/edges").json();
    let entry = listed["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["edgeId"] == "edge-1")
        .cloned()
        .unwrap_or_else(|| panic!("cp-b does not list edge-1: {listed}"));
    assert_eq!(entry["replica"], "cp-a");
    assert_eq!(entry["sessionId"], s1.to_string());
    // Filtered by the replica holding it, on either replica: a remote view on cp-b,
    // cp-a's own on cp-a.
    for (admin, text, total) in [
        (b.admin, "CP-A", 1),
        (a.admin, "cp-a", 1),
        (b.admin, "cp-b", 0),
    ] {
        let found = get(admin, &format!("/v1/edges?state=connected&q={text}")).json();
        assert_eq!(found["total"], total, "{text}: {found}");
    }
    // cp-b's own: nothing (it never held edge-1).
    let own = get(b.admin, "/v1/edges?scope=local").json();
    assert_eq!(own["edges"], serde_json::json!([]), "{own}");
    assert_eq!(get(b.admin, "/v1/edges?scope=mine").status, 400);
    assert_eq!(get(b.admin, "/v1/edges/edge-1").json()["replica"], "cp-a");
    let status = get(b.admin, "/v1/edges/edge-1/status");
    assert_eq!(status.status, 200, "{}", status.body);
    assert_eq!(status.json()["nodes"].as_array().unwrap().len(), 2);
    let sent = post(
        b.admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"edge.ping"}"#,
    );
    assert_eq!(sent.status, 200, "{}", sent.body);
    assert_eq!(sent.json()["response"]["accepted"], true);
    let missing = get(b.admin, "/v1/edges/edge-nobody/status");
    assert_eq!(missing.status, 404, "{}", missing.body);
    // Health and figures of the cluster.
    assert_eq!(get(a.admin, "/healthz").json()["cluster"], "ok");
    let metrics = get(a.admin, "/metrics").body;
    assert!(metrics.contains("iop_cluster_engine_up 1"), "{metrics}");
    assert!(
        metrics.contains("iop_cluster_claims_granted_total 1"),
        "{metrics}"
    );
    let metrics = get(b.admin, "/metrics").body;
    assert!(
        metrics.contains("iop_cluster_routed_requests_total"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("iop_cluster_routed_requests_total 0\n"),
        "{metrics}"
    );

    // The same Edge id at cp-b supersedes the session at cp-a.
    let (_second, _log) = edge(b.edges, "edge-1", &example_config(), &[]);
    wait_until("cp-b holds edge-1", || {
        (get(b.admin, "/v1/edges/edge-1").json()["replica"] == "cp-b").then_some(())
    });
    let s2 = session_of(b.admin, "edge-1");
    assert!(s2 > s1, "{s1} then {s2}");
    assert_eq!(get(b.admin, "/v1/edges/edge-1").json()["replica"], "cp-b");
    // cp-a lets its session go, and now shows the Edge as cp-b's.
    wait_until("cp-a lets its session go", || {
        let v = get(a.admin, "/v1/edges/edge-1").json();
        (v["replica"] == "cp-b" && v["sessionId"].as_str() == Some(s2.to_string().as_str()))
            .then_some(())
    });
    drop(first);
    // cp-b's session stays (the old session's close changed nothing).
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(session_of(b.admin, "edge-1"), s2);
    assert_eq!(get(b.admin, "/v1/edges/edge-1").json()["connected"], true);
}

#[test]
fn cluster_flags_are_checked_at_start() {
    let out = Command::new(CP_BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(["--cluster", "nats://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replica-id"));

    let out = Command::new(CP_BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(["--cluster", "nats://127.0.0.1:1", "--replica-id", "cp a"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replica-id \"cp a\""));

    // An engine that does not answer: the replica does not start.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(CP_BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args([
            "--cluster",
            &format!("nats://127.0.0.1:{port}"),
            "--replica-id",
            "cp-a",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("--cluster nats://127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn every_replica_streams_the_whole_fleets_events_once() {
    let nats = NatsServer::start_with_accounts();
    let url = nats.url();
    let nkey = seed_file(&nats);
    let a = control_plane(&replica(&url, "cp-a", &nkey));
    let b = control_plane(&replica(&url, "cp-b", &nkey));
    let mut on_a = Sse::open(a.admin, "/v1/events");
    let mut on_b = Sse::open(b.admin, "/v1/events?kinds=edge_connected,node_event");
    // Both streams are open (their consumers exist) before anything happens.
    on_a.wait_for("text/event-stream");
    on_b.wait_for("text/event-stream");

    let (_edge, _log) = edge(a.edges, "edge-1", &example_config(), &[]);
    wait_connected(a.admin, "edge-1");
    let s1 = session_of(a.admin, "edge-1");
    let connected =
        format!("event: edge_connected\ndata: {{\"edgeId\":\"edge-1\",\"sessionId\":\"{s1}\"");
    // cp-b hears of an Edge it never saw, from cp-a's events on the engine.
    on_b.wait_for(&connected);
    on_b.wait_for("NODE_EVENT_KIND_EDGE_READY");
    on_a.wait_for(&connected);
    // ... each once (cp-a's own stream does not add its local copy).
    on_a.wait_for("NODE_EVENT_KIND_EDGE_READY");
    for sse in [&mut on_a, &mut on_b] {
        sse.read_for(std::time::Duration::from_millis(600));
    }
    for (name, sse) in [("cp-a", &on_a), ("cp-b", &on_b)] {
        assert_eq!(
            sse.seen.matches(&connected).count(),
            1,
            "{name}: {}",
            sse.seen
        );
        assert_eq!(
            sse.seen.matches("NODE_EVENT_KIND_EDGE_READY").count(),
            1,
            "{name}: {}",
            sse.seen
        );
    }
    // The kinds filter holds for the fleet's stream too.
    assert!(!on_b.seen.contains("event: command_event"));

    // Each event's id is its place on the fleet's stream: a client resuming before
    // the connection event gets it again, first.
    let at = on_b.seen.find(&connected).unwrap();
    let id: u64 = on_b.seen[..at]
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("an id before the event")
        .parse()
        .unwrap();
    let mut resumed = Sse::open(
        b.admin,
        &format!("/v1/events?kinds=edge_connected&since={}", id - 1),
    );
    resumed.wait_for(&connected);
    assert!(
        resumed.seen.contains(&format!("id: {id}\n")),
        "{}",
        resumed.seen
    );
    let bad = get(b.admin, "/v1/events?since=tomorrow");
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn the_edges_of_a_killed_replica_reconnect_to_another() {
    let nats = NatsServer::start_with_accounts();
    let url = nats.url();
    let nkey = seed_file(&nats);
    let mut a = control_plane(&replica(&url, "cp-a", &nkey));
    let b = control_plane(&replica(&url, "cp-b", &nkey));
    // The Edge knows both replicas (a load balancer's job in production).
    let fallback = b.edges.to_string();
    let (_edge, _log) = edge(
        a.edges,
        "edge-1",
        &example_config(),
        &["--control-plane", &fallback],
    );
    wait_connected(a.admin, "edge-1");
    let s1 = session_of(a.admin, "edge-1");
    // A command sent through cp-a, answered just before it dies.
    let sent = post(
        a.admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"edge.ping"}"#,
    );
    assert_eq!(sent.status, 200, "{}", sent.body);
    let command_id = sent.json()["commandId"].as_str().unwrap().to_owned();

    // SIGKILL: no goodbye, no release; the record still names cp-a.
    a.proc.0.kill().unwrap();
    let _ = a.proc.0.wait();
    wait_until("edge-1 on cp-b", || {
        let v = get(b.admin, "/v1/edges/edge-1").json();
        (v["replica"] == "cp-b" && v["connected"] == true).then_some(())
    });
    let s2 = session_of(b.admin, "edge-1");
    assert!(s2 > s1, "{s1} then {s2}");
    // The command keeps its outcome: from the engine's record, or carried on by cp-b
    // from it when cp-a died before writing the last event.
    let record = wait_until("the command's outcome through cp-b", || {
        let r = get(b.admin, &format!("/v1/commands/{command_id}"));
        (r.status == 200 && r.json()["terminal"] == true).then(|| r.json())
    });
    assert_eq!(record["edgeId"], "edge-1", "{record}");
    let last = record["events"].as_array().unwrap().last().cloned();
    assert_eq!(
        last.map(|e| e["phase"].clone()),
        Some(serde_json::json!("COMMAND_PHASE_SUCCEEDED")),
        "{record}"
    );
}

#[test]
fn without_a_nats_server_the_cluster_demo_says_how_to_install_one() {
    let out = Command::new(cli_support::DEMO_BIN)
        .arg("--cluster")
        .env("IOP_NATS_SERVER", "/nonexistent/nats-server")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("IOP_NATS_SERVER"));
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn the_cluster_demo_walks_through_its_sections() {
    if let Err(why) = iop_cluster::testing::find_nats_server() {
        panic!("{why}; scripts/test.sh installs it");
    }
    let out = Command::new(cli_support::DEMO_BIN)
        .arg("--cluster")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for section in iop_server::demo::cluster::SECTIONS {
        assert!(
            stdout.contains(&format!("== {section}")),
            "missing {section}:\n{stdout}"
        );
    }
    assert!(stdout.contains("accepted"), "{stdout}");
    assert!(stdout.contains("with a higher session id"), "{stdout}");
}

/// Waits (at most 30 s) for `child` to exit; its exit code and stderr.
fn exit_of(mut child: std::process::Child) -> (Option<i32>, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the second process never exited");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    use std::io::Read as _;
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    (status.code(), stderr)
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn two_processes_never_both_run_as_one_replica() {
    let nats = NatsServer::start_with_accounts();
    let url = nats.url();
    let nkey = seed_file(&nats);
    let a = control_plane(&replica(&url, "cp-a", &nkey));

    // A second process with cp-a's id, while cp-a renews its liveness entry: exit 2.
    let second = Command::new(CP_BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(replica(&url, "cp-a", &nkey))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, stderr) = exit_of(second);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("another process runs as replica \"cp-a\""),
        "{stderr}"
    );
    assert_eq!(get(a.admin, "/healthz").json()["cluster"], "ok");

    // cp-a paused past its liveness: a new cp-a starts; the old one, resumed, finds
    // its entry taken and stops deciding claims and answering routes.
    signal(&a.proc, "-STOP");
    std::thread::sleep(std::time::Duration::from_secs(7));
    let successor = control_plane(&replica(&url, "cp-a", &nkey));
    signal(&a.proc, "-CONT");
    wait_until("the paused cp-a fenced", || {
        (get(a.admin, "/healthz").json()["cluster"] == "fenced").then_some(())
    });
    assert!(
        get(a.admin, "/metrics")
            .body
            .contains("iop_cluster_fenced 1")
    );
    assert_eq!(get(successor.admin, "/healthz").json()["cluster"], "ok");
    let (_edge, _log) = edge(successor.edges, "edge-1", &example_config(), &[]);
    wait_connected(successor.admin, "edge-1");

    // A crashed process's successor starts once the entry it left is stale.
    let mut successor = successor;
    successor.proc.0.kill().unwrap();
    let _ = successor.proc.0.wait();
    let started = std::time::Instant::now();
    let third = control_plane(&replica(&url, "cp-a", &nkey));
    assert_eq!(get(third.admin, "/healthz").json()["cluster"], "ok");
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn a_job_runs_on_the_replica_that_accepted_it_and_reaches_every_replicas_edges() {
    let nats = NatsServer::start_with_accounts();
    let url = nats.url();
    let nkey = seed_file(&nats);
    let a = control_plane(&replica(&url, "cp-a", &nkey));
    let b = control_plane(&replica(&url, "cp-b", &nkey));
    let (_e1, _) = edge(a.edges, "edge-1", &example_config(), &[]);
    let (_e2, _) = edge(b.edges, "edge-2", &example_config(), &[]);
    wait_connected(a.admin, "edge-1");
    wait_connected(b.admin, "edge-2");
    // cp-a sees both (edge-2 through the engine) before the job selects.
    wait_until("cp-a sees edge-2 live", || {
        (get(a.admin, "/v1/edges/edge-2").json()["connected"] == true).then_some(())
    });
    let started = post(
        a.admin,
        "/v1/jobs",
        r#"{"jobId":"ping-all","operation":"edge.ping","edges":"*","maxConcurrent":1}"#,
    );
    assert_eq!(started.status, 200, "{}", started.body);
    let done = wait_until("the job done", || {
        let job = get(a.admin, "/v1/jobs/ping-all").json();
        (job["state"] == "done").then_some(job)
    });
    assert_eq!(done["progress"]["succeeded"], 2, "{done}");
    let edges = done["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 2, "{done}");
    // Every command it started has its own record, which any replica reads: edge-2's
    // (routed to cp-b) from cp-a, edge-1's (sent by cp-a) from cp-b.
    for run in edges {
        let id = run["commandId"].as_str().unwrap();
        for admin in [a.admin, b.admin] {
            let record = wait_until("the command's record", || {
                let r = get(admin, &format!("/v1/commands/{id}")).json();
                (r["outcome"] == "COMMAND_PHASE_SUCCEEDED").then_some(r)
            });
            assert_eq!(record["edgeId"], run["edgeId"], "{record}");
        }
    }
    // The job is cp-a's: cp-b does not run it.
    assert_eq!(get(b.admin, "/v1/jobs/ping-all").status, 404);
    // A caller retrying through cp-b (cp-a's answer lost) starts it there under the
    // same id: the same commands, whose ids are keys the engine already holds, so
    // each answers from its record (run once; see cluster_commands) and the job
    // ends the same.
    let retried = post(
        b.admin,
        "/v1/jobs",
        r#"{"jobId":"ping-all","operation":"edge.ping","edges":"*","maxConcurrent":1}"#,
    );
    assert_eq!(retried.status, 200, "{}", retried.body);
    let again = wait_until("the retried job done", || {
        let job = get(b.admin, "/v1/jobs/ping-all").json();
        (job["state"] == "done").then_some(job)
    });
    assert_eq!(again["progress"]["succeeded"], 2, "{again}");
    assert_eq!(again["edges"], done["edges"], "{again}\n{done}");
}
