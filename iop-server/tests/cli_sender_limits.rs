//! PROTOCOL.md §4.6 over the real binaries: an admin request the Edge would have to refuse is
//! answered 400 `exceeds_limit` and nothing reaches the Edge, whose one session goes
//! on (before, the command was sent, the Edge closed the session on it, and the
//! Control Plane re-sent it on every new one).

mod cli_support;

use std::path::PathBuf;

use cli_support::{control_plane, edge, get, post, wait_connected};

fn metric(admin: std::net::SocketAddr, name: &str) -> u64 {
    let text = get(admin, "/metrics").body;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[test]
fn an_oversized_command_is_refused_and_the_edge_keeps_its_one_session() {
    let cp = control_plane(&[]);
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edge.toml");
    let (_edge, _log) = edge(cp.edges, "edge-1", &config, &["--simulate"]);
    wait_connected(cp.admin, "edge-1");
    assert_eq!(metric(cp.admin, "iop_sessions_accepted_total"), 1);

    // The issue's reproduction: one metadata value of 5 000 bytes (over 4 KiB).
    let body = format!(
        r#"{{"operation":"edge.ping","metadata":{{"k":"{}"}}}}"#,
        "x".repeat(5_000)
    );
    let answer = post(cp.admin, "/v1/edges/edge-1/commands", &body);
    assert_eq!(answer.status, 400, "{}", answer.body);
    let error = &answer.json()["error"];
    assert_eq!(error["code"], "exceeds_limit");
    assert_eq!(error["field"], "iop.EdgeCommandRequest.metadata.value");
    assert_eq!(
        (error["size"].as_u64(), error["limit"].as_u64()),
        (Some(5_000), Some(4_096))
    );
    assert!(
        error.get("commandId").is_none(),
        "no command was made: {error}"
    );

    // Every other field over its cap the same way.
    for (body, field) in [
        (
            format!(
                r#"{{"operation":"edge.ping","targetSelector":"{}"}}"#,
                "s".repeat(4_097)
            ),
            "iop.EdgeCommandRequest.target_selector",
        ),
        (
            format!(
                r#"{{"operation":"edge.ping","metadata":{{"{}":"v"}}}}"#,
                "k".repeat(129)
            ),
            "iop.EdgeCommandRequest.metadata.key",
        ),
        (
            format!(
                r#"{{"operation":"edge.ping","metadata":{{{}}}}}"#,
                (0..65)
                    .map(|i| format!(r#""k{i}":"v""#))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            "iop.EdgeCommandRequest.metadata",
        ),
    ] {
        let answer = post(cp.admin, "/v1/edges/edge-1/commands", &body);
        assert_eq!(answer.status, 400, "{}", answer.body);
        assert_eq!(answer.json()["error"]["field"], field);
    }
    // A status for a node id longer than an Edge decodes.
    let answer = get(
        cp.admin,
        &format!("/v1/edges/edge-1/status?nodes={}", "n".repeat(129)),
    );
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(
        answer.json()["error"]["field"],
        "iop.EdgeStatusRequest.node_ids"
    );
    // More node ids than one status carries are paged, not refused.
    let ids: Vec<String> = (0..10_001).map(|i| format!("n{i}")).collect();
    let answer = get(
        cp.admin,
        &format!("/v1/edges/edge-1/status?nodes={}", ids.join(",")),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);

    // The Edge still has its one session and answers: a command within the limits
    // goes through, and no session was ever lost.
    let ok = post(
        cp.admin,
        "/v1/edges/edge-1/commands",
        r#"{"operation":"edge.ping"}"#,
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(metric(cp.admin, "iop_sessions_accepted_total"), 1);
    assert_eq!(metric(cp.admin, "iop_protocol_errors_total"), 0);
}
