//! `iopctl` end to end: the real `iop-control-plane`, `iop-edge --simulate` and
//! `iopctl` binaries on 127.0.0.1; what it prints for people and for scripts, and the
//! exit code of every ending.

mod cli_support;

use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cli_support::{CTL_BIN, Proc, control_plane, edge, secret_file, temp_file, wait_connected};

const NODES: &str = r#"
[[nodes]]
id = "gpu-1"
labels = { tier = "gpu" }

[[nodes.providers]]
id = "llama"
category = "local_inference"
capacity = 4
"#;

/// `iopctl --admin http://ADMIN args...`, bounded to 30 s.
fn ctl(admin: SocketAddr, args: &[&str]) -> Output {
    ctl_with(admin, args, &[])
}

fn ctl_with(admin: SocketAddr, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(CTL_BIN)
        .args(["--admin", &format!("http://{admin}")])
        .args(args)
        .env_remove("IOP_ADMIN_TOKEN")
        .env_remove("IOP_ADMIN_URL")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn iopctl");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "iopctl {args:?} did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("an exit code")
}

#[test]
fn an_operator_lists_sends_waits_cancels_and_scripts_with_iopctl() {
    let cp = control_plane(&[]);
    let config = temp_file("iopctl-edge.toml", NODES);
    let _edge = edge(cp.edges, "edge-1", &config, &["--simulate"]);
    wait_connected(cp.admin, "edge-1");

    // The fleet, for people and for scripts.
    let listed = ctl(cp.admin, &["edges"]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(text.starts_with("EDGE"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("edge-1") && l.contains("CONNECTED")),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&ctl(cp.admin, &["edges", "-o", "json"]).stdout).unwrap();
    assert_eq!(json["edges"][0]["edgeId"], "edge-1");
    let one = stdout(&ctl(cp.admin, &["edge", "edge-1"]));
    assert!(one.contains("command.cancel"), "{one}");
    let status = ctl(cp.admin, &["status", "edge-1", "--node", "gpu-1"]);
    assert_eq!(code(&status), 0, "{}", stderr(&status));
    assert!(
        stdout(&status)
            .lines()
            .any(|l| l.starts_with("gpu-1") && l.contains("llama")),
        "{}",
        stdout(&status)
    );

    // A command followed to its end: every phase printed, exit 0.
    let ping = ctl(cp.admin, &["send", "edge-1", "edge.ping", "--wait"]);
    assert_eq!(code(&ping), 0, "{}", stderr(&ping));
    let text = stdout(&ping);
    assert!(text.contains("accepted"), "{text}");
    assert!(
        text.contains("SUCCEEDED") && text.contains("pong"),
        "{text}"
    );

    // The caller's key: sent twice, one command.
    let first = ctl(
        cp.admin,
        &["send", "edge-1", "edge.ping", "--id", "key-1", "-o", "json"],
    );
    let again = ctl(
        cp.admin,
        &["send", "edge-1", "edge.ping", "--id", "key-1", "-o", "json"],
    );
    let (first, again): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&first.stdout).unwrap(),
        serde_json::from_slice(&again.stdout).unwrap(),
    );
    assert_eq!(first["commandId"], "key-1");
    assert_eq!(first, again);
    // Other content under the key: refused, exit 4.
    let conflict = ctl(
        cp.admin,
        &[
            "send",
            "edge-1",
            "edge.ping",
            "--id",
            "key-1",
            "--timeout-ms",
            "9",
        ],
    );
    assert_eq!(code(&conflict), 4, "{}", stderr(&conflict));
    assert!(
        stderr(&conflict).contains("conflict"),
        "{}",
        stderr(&conflict)
    );

    // A rejected command: exit 1, the reason printed.
    let rejected = ctl(
        cp.admin,
        &["send", "edge-1", "node.drain", "--selector", "node:nope"],
    );
    assert_eq!(code(&rejected), 1, "{}", stderr(&rejected));
    assert!(
        stdout(&rejected).contains("rejected NO_MATCHING_TARGET"),
        "{}",
        stdout(&rejected)
    );

    // A drain waiting for a lease, cancelled from the command line.
    let leased = ctl(
        cp.admin,
        &[
            "send",
            "edge-1",
            "sim.lease",
            "--selector",
            "node:gpu-1",
            "--wait",
        ],
    );
    assert_eq!(code(&leased), 0, "{}", stdout(&leased));
    let drain = ctl(
        cp.admin,
        &[
            "send",
            "edge-1",
            "node.drain",
            "--selector",
            "node:gpu-1",
            "--timeout-ms",
            "60000",
            "-o",
            "json",
        ],
    );
    assert_eq!(code(&drain), 0, "{}", stderr(&drain));
    let drain: serde_json::Value = serde_json::from_slice(&drain.stdout).unwrap();
    let id = drain["commandId"].as_str().unwrap().to_owned();
    cli_support::wait_until("the drain waiting", || {
        stdout(&ctl(cp.admin, &["command", &id]))
            .contains("RUNNING")
            .then_some(())
    });
    let cancel = ctl(cp.admin, &["cancel", &id, "--wait"]);
    assert_eq!(code(&cancel), 0, "{}\n{}", stdout(&cancel), stderr(&cancel));
    let text = stdout(&cancel);
    assert!(
        text.contains(&format!("{id}.cancel cancels {id}: accepted")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{id} node.drain on edge-1: CANCELLED")),
        "{text}"
    );
    assert!(text.contains("stopped waiting"), "{text}");
    // Nothing left to cancel: refused, exit 4.
    let again = ctl(cp.admin, &["cancel", &id]);
    assert_eq!(code(&again), 4, "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already_finished"),
        "{}",
        stderr(&again)
    );
    let record = ctl(cp.admin, &["command", &id, "-o", "json"]);
    let record: serde_json::Value = serde_json::from_slice(&record.stdout).unwrap();
    assert_eq!(record["outcome"], "COMMAND_PHASE_CANCELLED");
    // A command waited for that does not succeed (the lease outlives its timeout): exit 1.
    let timed_out = ctl(
        cp.admin,
        &[
            "send",
            "edge-1",
            "node.drain",
            "--selector",
            "node:gpu-1",
            "--timeout-ms",
            "300",
            "--wait",
        ],
    );
    assert_eq!(code(&timed_out), 1, "{}", stdout(&timed_out));
    assert!(
        stdout(&timed_out).contains("TIMED_OUT"),
        "{}",
        stdout(&timed_out)
    );

    // Unknown things: exit 3.
    let unknown = ctl(cp.admin, &["edge", "nobody"]);
    assert_eq!(code(&unknown), 3, "{}", stderr(&unknown));
    assert_eq!(code(&ctl(cp.admin, &["command", "never-sent"])), 3);
    // Usage: exit 2.
    assert_eq!(code(&ctl(cp.admin, &["send", "edge-1"])), 2);
    assert_eq!(
        code(&ctl(
            cp.admin,
            &["send", "edge-1", "x", "--meta", "novalue"]
        )),
        2
    );
}

#[test]
fn iopctl_follows_the_event_stream_for_scripts() {
    let cp = control_plane(&[]);
    let config = temp_file("iopctl-events.toml", NODES);
    // The stream is open before the Edge comes: its connection is the first event.
    let (_follower, events) = cli_support::follow_events(cp.admin, "edge_connected,command_event");
    let _edge = edge(cp.edges, "edge-1", &config, &[]);
    wait_connected(cp.admin, "edge-1");
    assert_eq!(
        code(&ctl(cp.admin, &["send", "edge-1", "edge.ping", "--wait"])),
        0
    );
    let mut names = Vec::new();
    loop {
        let event = events
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the ping's end on the stream: {names:?}"));
        names.push(event["event"].as_str().unwrap().to_owned());
        if event["event"] == "command_event" && event["data"]["phase"] == "COMMAND_PHASE_SUCCEEDED"
        {
            break;
        }
    }
    assert_eq!(names[0], "edge_connected", "{names:?}");
    assert!(
        names.iter().skip(1).all(|n| n == "command_event"),
        "{names:?}"
    );
}

#[test]
fn iopctl_exit_codes_say_a_missing_token_and_an_unreachable_api_apart() {
    const TOKEN: &str = "tok-iopctl-0123456789abcdef";
    let tokens = secret_file("iopctl-tokens", &format!("{TOKEN} operate\n"));
    let cp = control_plane(&["--admin-token-file", tokens.to_str().unwrap()]);
    let denied = ctl(cp.admin, &["edges"]);
    assert_eq!(code(&denied), 4, "{}", stderr(&denied));
    assert!(stderr(&denied).contains("401"), "{}", stderr(&denied));
    let by_env = ctl_with(cp.admin, &["edges"], &[("IOP_ADMIN_TOKEN", TOKEN)]);
    assert_eq!(code(&by_env), 0, "{}", stderr(&by_env));
    let token_file = secret_file("iopctl-token", &format!("{TOKEN}\n"));
    let by_file = ctl(
        cp.admin,
        &["edges", "--token-file", token_file.to_str().unwrap()],
    );
    assert_eq!(code(&by_file), 0, "{}", stderr(&by_file));
    // A token file others can read is refused before any call.
    let open = temp_file("iopctl-token-open", &format!("{TOKEN}\n"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            code(&ctl(
                cp.admin,
                &["edges", "--token-file", open.to_str().unwrap()]
            )),
            2
        );
    }
    // Nothing listens here any more: exit 5.
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let unreachable = ctl(gone, &["edges"]);
    assert_eq!(code(&unreachable), 5, "{}", stderr(&unreachable));
    assert!(
        stderr(&unreachable).contains("cannot connect"),
        "{}",
        stderr(&unreachable)
    );
}

#[test]
fn a_job_drains_the_gpu_nodes_of_a_fleet_a_few_edges_at_a_time() {
    let cp = control_plane(&[]);
    let config = temp_file("iopctl-job.toml", NODES);
    let mut edges: Vec<Proc> = (0..6)
        .map(|i| edge(cp.edges, &format!("edge-{i}"), &config, &[]).0)
        .collect();
    for i in 0..6 {
        wait_connected(cp.admin, &format!("edge-{i}"));
    }
    // edge-5 leaves: the job skips it.
    drop(edges.pop());
    cli_support::wait_until("edge-5 disconnected", || {
        (cli_support::get(cp.admin, "/v1/edges/edge-5").json()["connected"] == false).then_some(())
    });
    // The list a page at a time, and filtered.
    let rows = |o: &Output| -> Vec<String> {
        stdout(o)
            .lines()
            .filter(|l| l.starts_with("edge-"))
            .map(|l| l.split_whitespace().next().unwrap().to_owned())
            .collect()
    };
    let page = ctl(cp.admin, &["edges", "--state", "connected", "--limit", "2"]);
    assert_eq!(code(&page), 0, "{}", stderr(&page));
    assert_eq!(rows(&page), ["edge-0", "edge-1"]);
    assert!(
        stdout(&page).contains("2 of 5 Edges; more: --after edge-1"),
        "{}",
        stdout(&page)
    );
    let next = ctl(
        cp.admin,
        &[
            "edges",
            "--state",
            "connected",
            "--limit",
            "2",
            "--after",
            "edge-1",
        ],
    );
    assert_eq!(rows(&next), ["edge-2", "edge-3"]);
    let gone = ctl(cp.admin, &["edges", "--state", "disconnected,unreachable"]);
    assert_eq!(rows(&gone), ["edge-5"]);
    // The whole of what the filter keeps: no count line.
    assert!(!stdout(&gone).contains(" of "), "{}", stdout(&gone));
    let found = ctl(cp.admin, &["edges", "-q", "EDGE-4", "-o", "json"]);
    let found: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert_eq!(
        (
            found["total"].as_u64(),
            found["edges"][0]["edgeId"].as_str()
        ),
        (Some(1), Some("edge-4"))
    );
    let bad = ctl(cp.admin, &["edges", "--state", "asleep"]);
    assert_eq!(code(&bad), 2, "a usage error: {}", stderr(&bad));
    assert!(stderr(&bad).contains("asleep"), "{}", stderr(&bad));
    // Its progress, as a script following the event stream sees it.
    let (follower, progress) = cli_support::follow_events(cp.admin, "job_progress");
    let run = [
        "job",
        "run",
        "node.drain",
        "--edges",
        "*",
        "--selector",
        "label:tier=gpu",
        "--max-concurrent",
        "2",
        "--id",
        "drain-gpus",
        "--wait",
    ];
    let ran = ctl(cp.admin, &run);
    // One Edge skipped: exit 1, and the table says which.
    assert_eq!(code(&ran), 1, "{}\n{}", stdout(&ran), stderr(&ran));
    let bar = stderr(&ran);
    assert!(
        bar.contains("6/6") && bar.contains("succeeded 5") && bar.contains("skipped 1"),
        "{bar}"
    );
    let table = stdout(&ran);
    assert!(
        table.contains("job drain-gpus node.drain (done)"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("edge-5") && l.contains("skipped") && l.contains("offline")),
        "{table}"
    );
    assert_eq!(
        table
            .lines()
            .filter(|l| l.starts_with("edge-") && l.contains("succeeded"))
            .count(),
        5,
        "{table}"
    );
    // Every change was on the stream: never more than 2 Edges running, the counts
    // only growing, and the end said.
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|e: &serde_json::Value| e["data"]["state"] != "done")
    {
        let event = progress
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the job's end on the event stream: {seen:?}"));
        assert_eq!(event["event"], "job_progress", "{event}");
        assert_eq!(event["data"]["jobId"], "drain-gpus", "{event}");
        seen.push(event);
    }
    let count = |e: &serde_json::Value, k: &str| e["data"]["progress"][k].as_u64().unwrap();
    assert!(seen.iter().all(|e| count(e, "running") <= 2), "{seen:?}");
    assert!(
        seen.windows(2).all(|w| {
            ["succeeded", "failed", "skipped"]
                .iter()
                .all(|k| count(&w[0], k) <= count(&w[1], k))
        }),
        "{seen:?}"
    );
    let end = seen.last().unwrap();
    assert_eq!(
        (count(end, "succeeded"), count(end, "skipped")),
        (5, 1),
        "{end}"
    );
    assert!(
        seen.len() >= 6,
        "one event per Edge's end at least: {seen:?}"
    );
    drop(follower);
    // Each Edge's command has its own record.
    let record = ctl(cp.admin, &["command", "drain-gpus-0", "-o", "json"]);
    let record: serde_json::Value = serde_json::from_slice(&record.stdout).unwrap();
    assert_eq!(record["outcome"], "COMMAND_PHASE_SUCCEEDED", "{record}");
    // The same job again is that job; other content under its id is refused.
    let again = ctl(
        cp.admin,
        &[
            "job",
            "run",
            "node.drain",
            "--edges",
            "*",
            "--selector",
            "label:tier=gpu",
            "--max-concurrent",
            "2",
            "--id",
            "drain-gpus",
            "-o",
            "json",
        ],
    );
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["state"], "done");
    let conflict = ctl(
        cp.admin,
        &[
            "job",
            "run",
            "node.drain",
            "--edges",
            "*",
            "--id",
            "drain-gpus",
        ],
    );
    assert_eq!(code(&conflict), 4, "{}", stderr(&conflict));
    // Pages of the per-Edge runs.
    let page = ctl(
        cp.admin,
        &["job", "get", "drain-gpus", "--limit", "2", "-o", "json"],
    );
    let page: serde_json::Value = serde_json::from_slice(&page.stdout).unwrap();
    assert_eq!(page["edges"].as_array().unwrap().len(), 2);
    assert_eq!(page["next"], "edge-1");
    let rest = ctl(
        cp.admin,
        &[
            "job",
            "get",
            "drain-gpus",
            "--after",
            "edge-1",
            "--limit",
            "10",
            "-o",
            "json",
        ],
    );
    let rest: serde_json::Value = serde_json::from_slice(&rest.stdout).unwrap();
    assert_eq!(rest["edges"][0]["edgeId"], "edge-2");
    assert_eq!(rest["progress"]["total"], 6);
    assert_eq!(code(&ctl(cp.admin, &["job", "get", "no-such-job"])), 3);
}

#[test]
fn iopctl_places_a_request_and_shows_the_fleets_load_live() {
    const SERVING: &str = r#"
[[nodes]]
id = "gpu-1"
labels = { zone = "a" }

[[nodes.providers]]
id = "llama"
category = "local_inference"
models = ["llama-3-8b"]
capacity = 4
"#;
    let cp = control_plane(&[]);
    let config = temp_file("iopctl-place.toml", SERVING);
    // Simulated, its node held with one request in flight (the simulation leaves it
    // alone): 1 of 4, pushed to the Control Plane.
    let _edge = edge(cp.edges, "edge-1", &config, &["--simulate"]);
    wait_connected(cp.admin, "edge-1");
    let held = ctl(
        cp.admin,
        &[
            "send",
            "edge-1",
            "sim.lease",
            "--selector",
            "node:gpu-1",
            "--wait",
        ],
    );
    assert_eq!(code(&held), 0, "{}", stderr(&held));
    cli_support::wait_until("the held request", || {
        let a = cli_support::get(cp.admin, "/v1/placement?model=llama-3-8b").json();
        (a["candidates"][0]["inFlight"] == 1).then_some(())
    });

    let placed = ctl(cp.admin, &["place", "llama-3-8b"]);
    assert_eq!(code(&placed), 0, "{}", stderr(&placed));
    let text = stdout(&placed);
    assert!(text.starts_with("EDGE"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("edge-1") && l.contains("gpu-1") && l.contains("1/4")),
        "{text}"
    );
    assert!(text.contains("1 serving"), "{text}");
    // A reservation, for scripts: the pick counted.
    let reserved = ctl(
        cp.admin,
        &["place", "llama-3-8b", "--reserve", "-o", "json"],
    );
    let json: serde_json::Value = serde_json::from_slice(&reserved.stdout).unwrap();
    assert_eq!(json["reserved"], true);
    assert_eq!(json["candidates"][0]["reserved"], 1);
    assert_eq!(json["candidates"][0]["free"], 2);
    // Drawn by free slots: the only candidate, counted again; --spread alone is a
    // usage error (it says how to reserve).
    let spread = ctl(
        cp.admin,
        &["place", "llama-3-8b", "--reserve", "--spread", "-o", "json"],
    );
    let json: serde_json::Value = serde_json::from_slice(&spread.stdout).unwrap();
    assert_eq!(json["reserved"], true);
    assert_eq!(json["candidates"][0]["reserved"], 2);
    assert_eq!(
        code(&ctl(cp.admin, &["place", "llama-3-8b", "--spread"])),
        2
    );
    // Nobody serves this one, or not in that zone: exit 1, and why.
    let none = ctl(cp.admin, &["place", "mistral"]);
    assert_eq!(code(&none), 1);
    assert!(stdout(&none).contains("no provider"), "{}", stdout(&none));
    let zoned = ctl(cp.admin, &["place", "llama-3-8b", "--label", "zone=b"]);
    assert_eq!(code(&zoned), 1);
    assert!(stdout(&zoned).contains("1 labels"), "{}", stdout(&zoned));

    // The live view: two frames, by model and by Edge.
    let top = ctl(cp.admin, &["top", "--frames", "2", "--interval-ms", "100"]);
    assert_eq!(code(&top), 0, "{}", stderr(&top));
    let text = stdout(&top);
    assert_eq!(
        text.matches("iop top: 1 Edges (1 live)").count(),
        2,
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("llama-3-8b") && l.contains(" 4 ")),
        "{text}"
    );
    let json = ctl(cp.admin, &["top", "--frames", "1", "-o", "json"]);
    let frame: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(frame["models"]["llama-3-8b"]["capacity"], 4);
}
