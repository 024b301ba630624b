//! The admin API's security model over the real binaries: what a web page the operator
//! has open can and cannot do (CSRF, foreign Origin, DNS rebinding), admin tokens and
//! their roles, the refusal to serve an unauthenticated API beyond loopback, secret
//! files others can read, and slow or stalled clients.

mod cli_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use cli_support::{
    CP_BIN, EDGE_BIN, Sse, control_plane, edge, get, http_with, post, secret_file, temp_file,
    wait_connected, wait_until,
};

const OPERATE: &str = "op-7f3c0a9e4b2d8c61f0e5a3b2";
const READ: &str = "ro-0b9d8e7f6a5c4b3a29187766";

fn example_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edge.toml")
}

fn provider_statuses(admin: std::net::SocketAddr, auth: &[(&str, &str)]) -> Vec<String> {
    let answer = http_with(admin, "GET", "/v1/edges/edge-1/status", auth, None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let status = answer.json();
    status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| {
            n["providerSnapshots"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|p| p["status"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_web_page_can_neither_send_commands_nor_read_the_fleet() {
    let cp = control_plane(&[]);
    let (_edge, _log) = edge(cp.edges, "edge-1", &example_config(), &[]);
    wait_connected(cp.admin, "edge-1");
    let before = provider_statuses(cp.admin, &[]);
    assert!(!before.iter().any(|s| s.contains("DEGRADED")), "{before:?}");

    // The "simple" cross-site POST a page can send without a preflight: text/plain.
    let drain = r#"{"operation":"node.drain","targetSelector":"*"}"#;
    let csrf = http_with(
        cp.admin,
        "POST",
        "/v1/edges/edge-1/commands",
        &[("Content-Type", "text/plain;charset=UTF-8")],
        Some(drain),
    );
    assert_eq!(csrf.status, 415, "{}", csrf.body);
    assert_eq!(csrf.json()["error"]["code"], "unsupported_media_type");
    // Nothing was sent: no node was drained.
    assert_eq!(provider_statuses(cp.admin, &[]), before);

    // From another site's page, even as JSON (after a preflight): 403.
    let foreign = http_with(
        cp.admin,
        "POST",
        "/v1/edges/edge-1/commands",
        &[("Origin", "https://evil.example")],
        Some(drain),
    );
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert_eq!(foreign.json()["error"]["code"], "forbidden_origin");
    assert_eq!(provider_statuses(cp.admin, &[]), before);
    // Its own origin is fine (the dashboard is served from it).
    let own = format!("http://{}", cp.admin);
    let listed = http_with(cp.admin, "GET", "/v1/edges", &[("Origin", &own)], None);
    assert_eq!(listed.status, 200, "{}", listed.body);

    // DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1.
    for path in ["/v1/edges", "/v1/events", "/v1/edges/edge-1/status"] {
        let host = format!("evil.example:{}", cp.admin.port());
        let rebound = http_with(cp.admin, "GET", path, &[("Host", &host)], None);
        assert_eq!(rebound.status, 403, "{path}: {}", rebound.body);
        assert_eq!(rebound.json()["error"]["code"], "forbidden_host");
    }
    let named = http_with(
        cp.admin,
        "GET",
        "/v1/edges",
        &[("Host", &format!("localhost:{}", cp.admin.port()))],
        None,
    );
    assert_eq!(named.status, 200);

    // Bodies over 64 KiB are refused before they are read.
    let big = format!(
        r#"{{"operation":"edge.ping","x":"{}"}}"#,
        "y".repeat(70_000)
    );
    let answer = post(cp.admin, "/v1/edges/edge-1/commands", &big);
    assert_eq!(answer.status, 413, "{}", answer.body);
    assert_eq!(answer.json()["error"]["code"], "payload_too_large");
}

#[test]
fn tokens_authenticate_and_their_roles_authorise() {
    let tokens = secret_file(
        "tokens",
        &format!("# who may use the admin API\n{OPERATE} operate\n{READ} read\n"),
    );
    let cp = control_plane(&["--admin-token-file", tokens.to_str().unwrap()]);
    let (_edge, _log) = edge(cp.edges, "edge-1", &example_config(), &[]);
    let bearer = |t: &str| format!("Bearer {t}");
    let (op, ro) = (bearer(OPERATE), bearer(READ));

    // No token, or a wrong one: 401 with the scheme to use.
    for auth in [
        None,
        Some("Bearer not-a-token-at-all"),
        Some("Basic b3A6b3A="),
    ] {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let answer = http_with(cp.admin, "GET", "/v1/edges", &headers, None);
        assert_eq!(answer.status, 401, "{auth:?}: {}", answer.body);
        assert_eq!(answer.json()["error"]["code"], "unauthorized");
        assert!(answer.body.len() < 400 && !answer.body.contains(OPERATE));
    }
    let raw = raw_get(cp.admin, "/v1/edges");
    assert!(
        raw.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{raw}"
    );
    // /healthz stays open; /metrics needs a token too.
    assert_eq!(get(cp.admin, "/healthz").status, 200);
    assert_eq!(get(cp.admin, "/metrics").status, 401);
    // The dashboard's page and assets hold no data: served without a token, with a
    // policy that keeps other origins' scripts out and the page out of frames; what
    // it shows comes through the API, which asks for one.
    for path in [
        "/",
        "/ui/app.js",
        "/ui/api.js",
        "/ui/views.js",
        "/ui/style.css",
    ] {
        let raw = raw_get(cp.admin, path).to_ascii_lowercase();
        assert!(raw.starts_with("http/1.1 200"), "{path}: {raw:.200}");
        for header in [
            "content-security-policy: default-src 'none'; script-src 'self'",
            "frame-ancestors 'none'",
            "x-frame-options: deny",
            "x-content-type-options: nosniff",
            "cache-control: no-store",
        ] {
            assert!(raw.contains(header), "{path} lacks {header:?}");
        }
        assert!(!raw.contains(&OPERATE.to_ascii_lowercase()));
    }
    // Every answer, refusals and errors too, is kept by no cache and never sniffed.
    for path in ["/healthz", "/v1/edges", "/metrics", "/v1/nothing-here"] {
        let raw = raw_get(cp.admin, path).to_ascii_lowercase();
        for header in ["cache-control: no-store", "x-content-type-options: nosniff"] {
            assert!(raw.contains(header), "{path} lacks {header:?}: {raw:.300}");
        }
    }
    assert_eq!(get(cp.admin, "/ui/other.js").status, 401);
    let rebound = http_with(cp.admin, "GET", "/", &[("Host", "evil.example:7701")], None);
    assert_eq!(rebound.status, 403, "a rebound name gets no page either");

    wait_until("edge-1 connected", || {
        let a = http_with(
            cp.admin,
            "GET",
            "/v1/edges/edge-1",
            &[("Authorization", &ro)],
            None,
        );
        (a.status == 200 && a.json()["connected"] == true).then_some(())
    });
    // A read token reads, and may not send a command.
    let ping = r#"{"operation":"edge.ping"}"#;
    let read = http_with(cp.admin, "GET", "/metrics", &[("Authorization", &ro)], None);
    assert_eq!(read.status, 200);
    let refused = http_with(
        cp.admin,
        "POST",
        "/v1/edges/edge-1/commands",
        &[("Authorization", &ro)],
        Some(ping),
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.json()["error"]["code"], "forbidden");
    // The router's API is read scope, its reserving placement included.
    let placed = http_with(
        cp.admin,
        "POST",
        "/v1/placement?model=llama-3",
        &[("Authorization", &ro)],
        None,
    );
    assert_eq!(placed.status, 200, "{}", placed.body);
    // An operate token may.
    let sent = http_with(
        cp.admin,
        "POST",
        "/v1/edges/edge-1/commands",
        &[("Authorization", &op)],
        Some(ping),
    );
    assert_eq!(sent.status, 200, "{}", sent.body);
}

fn raw_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn usage_error(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn unsafe_setups_are_refused_at_start_with_the_fix() {
    // An admin API beyond loopback needs tokens.
    let err = usage_error(CP_BIN, &["--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0"]);
    assert!(err.contains("--admin-token-file"), "{err}");
    // A token file others may read is refused, naming it and the fix.
    let open = temp_file("open-tokens", &format!("{OPERATE}\n"));
    let err = usage_error(
        CP_BIN,
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--admin-token-file",
            open.to_str().unwrap(),
        ],
    );
    assert!(
        err.contains("chmod 600") && err.contains("open-tokens"),
        "{err}"
    );
    // An Edge would send its credential in clear to another host.
    let cred = secret_file("cred", "s3cret-s3cret-s3cret\n");
    let config = example_config();
    let edge_args = [
        "--control-plane",
        "192.0.2.7:7700",
        "--edge-id",
        "edge-1",
        "--config",
        config.to_str().unwrap(),
        "--credential-file",
        cred.to_str().unwrap(),
    ];
    let err = usage_error(EDGE_BIN, &edge_args);
    assert!(
        err.contains("--tls-ca") && err.contains("--allow-plaintext"),
        "{err}"
    );
    // A credential file others may read is refused too.
    let open_cred = temp_file("open-cred", "s3cret-s3cret-s3cret\n");
    let mut args = edge_args.to_vec();
    args[7] = open_cred.to_str().unwrap();
    args.push("--allow-plaintext");
    let err = usage_error(EDGE_BIN, &args);
    assert!(err.contains("chmod 600"), "{err}");
    // A credential too short to be a secret is refused, naming its file.
    let short = secret_file("short-cred", "s3cret\n");
    let mut args = edge_args.to_vec();
    args[1] = "127.0.0.1:1";
    args[7] = short.to_str().unwrap();
    let err = usage_error(EDGE_BIN, &args);
    assert!(
        err.contains("at least 16 bytes") && err.contains("short-cred"),
        "{err}"
    );
    assert!(!err.contains("s3cret\n"), "{err}");
}

/// A client that opens the event stream and never reads it is dropped once it has
/// fallen behind, while a reading client keeps streaming, and the Control Plane's
/// memory stays bounded.
#[test]
fn a_stalled_event_stream_is_dropped_and_the_others_go_on() {
    let cp = control_plane(&["--admin-idle-timeout-ms", "1500"]);
    let (_edge, _log) = edge(cp.edges, "edge-1", &example_config(), &[]);
    wait_connected(cp.admin, "edge-1");
    let hwm_before = vm_hwm_kib(cp.proc.0.id());

    // The stalled client: a tiny receive buffer, never read.
    let mut stalled = stalled_stream(cp.admin);
    let mut reader = Sse::open(cp.admin, "/v1/events?kinds=command_event");
    wait_until("two streams open", || {
        (metric(cp.admin, "iop_admin_event_streams") == 2).then_some(())
    });
    // Commands whose events both streams asked for.
    let ping = r#"{"operation":"edge.ping"}"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut sent = 0;
    while metric(cp.admin, "iop_admin_event_streams") > 1 {
        assert!(
            Instant::now() < deadline,
            "the stalled stream was never dropped"
        );
        for _ in 0..50 {
            assert_eq!(
                post(cp.admin, "/v1/edges/edge-1/commands", ping).status,
                200
            );
            sent += 1;
        }
        reader.wait_for("cmd-");
        reader.seen.clear();
    }
    // The reader streams on.
    assert_eq!(
        post(cp.admin, "/v1/edges/edge-1/commands", ping).status,
        200
    );
    reader.wait_for("COMMAND_PHASE_SUCCEEDED");
    let hwm_after = vm_hwm_kib(cp.proc.0.id());
    eprintln!(
        "stalled stream dropped after {sent} commands; VmHWM {hwm_before} -> {hwm_after} KiB"
    );
    assert!(
        hwm_after < hwm_before + 32 * 1024,
        "peak RSS grew to {hwm_after} KiB"
    );
    // Its connection is closed too (idle, its socket full): reading what was queued
    // for it ends in EOF. (A client that reads, only too slowly, gets the `lagged`
    // event first.)
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tail = Vec::new();
    stalled.read_to_end(&mut tail).expect("EOF, not a timeout");
    assert!(String::from_utf8_lossy(&tail).contains("event: command_event"));
}

/// A connection that asked for the event stream and then stopped reading; its 4 KiB
/// receive buffer keeps the kernel from absorbing megabytes for it first.
fn stalled_stream(admin: std::net::SocketAddr) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4 * 1024).unwrap();
        socket.connect(admin).await.unwrap()
    });
    let mut s = stream.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    write!(
        s,
        "GET /v1/events HTTP/1.1\r\nHost: {admin}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    s
}

fn metric(admin: std::net::SocketAddr, name: &str) -> u64 {
    get(admin, "/metrics")
        .body
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name}"))
}

fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmHWM:")?
                .trim()
                .trim_end_matches(" kB")
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Reads until EOF; the time it took.
fn time_to_eof(s: &mut TcpStream) -> Duration {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = Vec::new();
    s.read_to_end(&mut sink).expect("EOF, not a timeout");
    start.elapsed()
}

#[test]
fn slow_headers_and_connections_past_the_cap_are_let_go() {
    let cp = control_plane(&[
        "--admin-header-timeout-ms",
        "1000",
        "--admin-max-connections",
        "2",
    ]);
    // Two connections that send half a request and stop.
    let mut slow: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(cp.admin).unwrap();
            s.write_all(b"GET /v1/edges HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // A third is over the cap: closed at once.
    let mut third = TcpStream::connect(cp.admin).unwrap();
    assert!(time_to_eof(&mut third) < Duration::from_millis(900));
    // The slow ones go at the header timeout.
    for s in &mut slow {
        let waited = time_to_eof(s);
        assert!(waited < Duration::from_secs(3), "{waited:?}");
    }
    // And then there is room again.
    wait_until("admin answers again", || {
        (get(cp.admin, "/healthz").status == 200).then_some(())
    });
}

#[test]
fn one_address_holding_its_share_of_admin_connections_leaves_another_served() {
    let cp = control_plane(&[
        "--admin-max-connections",
        "8",
        "--admin-max-connections-per-address",
        "4",
    ]);
    // 127.0.0.2 opens as many connections as the whole cap, and sends nothing: four
    // are held, the others closed at once.
    let mut held = Vec::new();
    for _ in 0..8 {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket
            .bind(&std::net::SocketAddr::from(([127, 0, 0, 2], 0)).into())
            .unwrap();
        socket.connect(&cp.admin.into()).unwrap();
        held.push(TcpStream::from(socket));
    }
    let closed = held
        .iter_mut()
        .map(|s| time_to_eof_within(s, Duration::from_millis(500)))
        .filter(|closed| *closed)
        .count();
    assert_eq!(
        closed, 4,
        "past its share, an address's connections are closed"
    );
    // 127.0.0.1 is served all the same.
    let health = get(cp.admin, "/healthz");
    assert_eq!(health.status, 200, "{}", health.body);
}

/// Whether the peer closes `s` within `wait`.
fn time_to_eof_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut sink = [0u8; 64];
    matches!(s.read(&mut sink), Ok(0))
}
