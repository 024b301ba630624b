//! The caller's idempotency key (PROTOCOL.md §4.4) through the admin API: a command
//! sent again under the same key is the same command, answered as before and run once;
//! with other content it is a conflict.

mod cli_support;

use std::path::PathBuf;

use cli_support::{control_plane, edge, http_with, post, wait_connected, wait_until};

fn example_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edge.toml")
}

/// How many times the Edge whose log is `log` started a handler for `command_id`.
fn runs(log: &PathBuf, command_id: &str) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.contains("running command") && l.contains(&format!("command_id={command_id}"))
        })
        .count()
}

#[test]
fn a_command_sent_again_under_its_key_is_the_same_command_run_once() {
    let cp = control_plane(&[]);
    let (_edge, log) = edge(cp.edges, "edge-1", &example_config(), &[]);
    wait_connected(cp.admin, "edge-1");
    let path = "/v1/edges/edge-1/commands";

    let first = post(
        cp.admin,
        path,
        r#"{"operation":"edge.ping","commandId":"job-7.edge-1"}"#,
    );
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.json()["commandId"], "job-7.edge-1");
    wait_until("the edge to run it", || {
        (runs(&log, "job-7.edge-1") == 1).then_some(())
    });

    // Again, by body and by header: the same answer, and the Edge does not run it again.
    let again = post(
        cp.admin,
        path,
        r#"{"operation":"edge.ping","commandId":"job-7.edge-1"}"#,
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json(), first.json());
    let by_header = http_with(
        cp.admin,
        "POST",
        path,
        &[("Idempotency-Key", "job-7.edge-1")],
        Some(r#"{"operation":"edge.ping"}"#),
    );
    assert_eq!(by_header.status, 200, "{}", by_header.body);
    assert_eq!(by_header.json()["response"], first.json()["response"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(runs(&log, "job-7.edge-1"), 1);

    // The same key with other content, a key against the grammar, and two keys.
    let other = post(
        cp.admin,
        path,
        r#"{"operation":"edge.ping","commandId":"job-7.edge-1","timeoutMs":5}"#,
    );
    assert_eq!(other.status, 409, "{}", other.body);
    assert_eq!(other.json()["error"]["code"], "conflict");
    let bad = post(
        cp.admin,
        path,
        r#"{"operation":"edge.ping","commandId":"job 7"}"#,
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    let two = http_with(
        cp.admin,
        "POST",
        path,
        &[("Idempotency-Key", "job-8")],
        Some(r#"{"operation":"edge.ping","commandId":"job-9"}"#),
    );
    assert_eq!(two.status, 400, "{}", two.body);
}
