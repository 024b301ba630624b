//! A hostile Control Plane against the Edge: a fake CP on 127.0.0.1 sends garbage, a
//! 4 GiB length prefix, hello responses with absurd values, floods of status
//! requests, or never reads. The Edge closes with a typed reason (read from its event
//! subscription, and its `GoAway` off the wire), stays bounded, and reconnects with
//! backoff.

mod hostile_support;
// The runtime tests' helpers, shared with iop-tokio's own tests.
#[path = "../../iop-tokio/tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use hostile_support::*;
use iop_tokio::core::edge::{CloseReason, EdgeConfig, EdgeEvent, ProtocolViolation};
use iop_tokio::core::proto::{
    self, Body, EdgeHelloResponse, EdgeStatusRequest, Envelope, FrameError, GoAwayReason,
};
use iop_tokio::{EdgeClient, EdgeHandle, Subscription};
use support::*;
use tokio::net::{TcpListener, TcpSocket};

/// A fake Control Plane: accepts connections and hands them to the test.
struct FakeCp {
    listener: TcpListener,
}

impl FakeCp {
    async fn bind() -> Self {
        Self {
            listener: TcpListener::bind(localhost()).await.unwrap(),
        }
    }

    /// A listener whose accepted sockets have a small receive buffer, so a peer that
    /// is not read from fills it quickly.
    fn bind_small_buffers() -> Self {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4 * 1024).unwrap();
        socket.bind(localhost()).unwrap();
        Self {
            listener: socket.listen(16).unwrap(),
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.listener.local_addr().unwrap()
    }

    /// The next connection, after reading its hello.
    async fn accept_hello(&self) -> Attacker {
        let (stream, _) = bounded("edge dials", self.listener.accept()).await.unwrap();
        let mut conn = Attacker::from_stream(stream);
        match conn.next_body().await {
            Some(Body::HelloRequest(h)) => assert_eq!(h.edge_id, "victim"),
            other => panic!("expected a hello, got {other:?}"),
        }
        conn
    }

    /// Accepts the next connection and answers its hello with `response`.
    async fn accept_with(&self, response: EdgeHelloResponse) -> Attacker {
        let mut conn = self.accept_hello().await;
        conn.write(&envelope_frame(&Envelope::new(response))).await;
        conn
    }
}

fn accepted() -> EdgeHelloResponse {
    EdgeHelloResponse {
        accepted: true,
        protocol_version: proto::PROTOCOL_VERSION,
        heartbeat_interval_ms: 1_000,
        session_id: 1,
        max_frame_len: proto::DEFAULT_MAX_FRAME_LEN,
        ..Default::default()
    }
}

fn victim_config() -> EdgeConfig {
    let mut config = fast_edge("victim");
    config.hello_timeout = Duration::from_millis(500);
    config
}

fn victim(cp: &FakeCp, config: EdgeConfig) -> (EdgeHandle, Subscription<EdgeEvent>) {
    let mut client = EdgeClient::new(config);
    let events = client.events();
    (client.connect(cp.addr()).unwrap(), events)
}

async fn closed(events: &mut Subscription<EdgeEvent>) -> CloseReason {
    next_edge(events, "edge closed", |e| match e {
        EdgeEvent::Closed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await
}

async fn connected(events: &mut Subscription<EdgeEvent>) -> (Duration, u32) {
    next_edge(events, "edge connected", |e| match e {
        EdgeEvent::Connected {
            heartbeat_interval,
            max_frame_len,
            ..
        } => Some((*heartbeat_interval, *max_frame_len)),
        _ => None,
    })
    .await
}

#[tokio::test]
async fn garbage_from_the_control_plane_is_a_protocol_error_and_the_edge_reconnects() {
    let cp = FakeCp::bind().await;
    let (edge, mut events) = victim(&cp, victim_config());
    let mut conn = cp.accept_with(accepted()).await;
    connected(&mut events).await;
    conn.write(&frame(&[0xFF; 32])).await;
    let reason = closed(&mut events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::Undecodable(_)))
        ),
        "{reason:?}"
    );
    conn.expect_go_away(GoAwayReason::ProtocolError).await;
    // It dials again (and says hello again).
    let _again = cp.accept_with(accepted()).await;
    connected(&mut events).await;
    assert_eq!(edge.stats().sessions_accepted, 2);
    edge.shutdown().await;
}

#[tokio::test]
async fn a_4_gib_length_prefix_from_the_control_plane_is_refused_from_the_prefix_alone() {
    let cp = FakeCp::bind().await;
    let (edge, mut events) = victim(&cp, victim_config());
    // Even before the hello is answered.
    let mut conn = cp.accept_hello().await;
    conn.write(&[0xFF; 4]).await;
    let reason = closed(&mut events).await;
    assert!(
        matches!(
            reason,
            CloseReason::ProtocolError(ProtocolViolation::Frame(FrameError::TooLarge {
                len: 0xFFFF_FFFF,
                ..
            }))
        ),
        "{reason:?}"
    );
    conn.expect_go_away(GoAwayReason::ProtocolError).await;
    let _again = cp.accept_hello().await;
    edge.shutdown().await;
}

#[tokio::test]
async fn a_heartbeat_interval_of_0_in_the_hello_response_means_the_default() {
    let cp = FakeCp::bind().await;
    let (edge, mut events) = victim(&cp, victim_config());
    let _conn = cp
        .accept_with(EdgeHelloResponse {
            heartbeat_interval_ms: 0,
            ..accepted()
        })
        .await;
    let (interval, _) = connected(&mut events).await;
    assert_eq!(interval, Duration::from_secs(5));
    edge.shutdown().await;
}

#[tokio::test]
async fn a_heartbeat_interval_of_u32_max_is_clamped_to_60_s() {
    let cp = FakeCp::bind().await;
    let (edge, mut events) = victim(&cp, victim_config());
    let _conn = cp
        .accept_with(EdgeHelloResponse {
            heartbeat_interval_ms: u32::MAX,
            ..accepted()
        })
        .await;
    let (interval, _) = connected(&mut events).await;
    assert_eq!(interval, Duration::from_secs(60));
    edge.shutdown().await;
}

#[tokio::test]
async fn a_max_frame_len_below_the_pre_hello_cap_is_a_protocol_error() {
    let cp = FakeCp::bind().await;
    let (edge, mut events) = victim(&cp, victim_config());
    let mut conn = cp
        .accept_with(EdgeHelloResponse {
            max_frame_len: 1,
            ..accepted()
        })
        .await;
    // No frame of the Edge fits in 1 byte: a session would be mute.
    let reason = closed(&mut events).await;
    assert_eq!(
        reason,
        CloseReason::ProtocolError(ProtocolViolation::FrameLimitTooSmall(1))
    );
    conn.expect_go_away(GoAwayReason::ProtocolError).await;
    assert!(!edge.is_connected());
    let _again = cp.accept_hello().await;
    edge.shutdown().await;
}

#[tokio::test]
async fn a_flood_of_status_requests_is_answered_in_order() {
    let cp = FakeCp::bind().await;
    let (edge, mut events) = victim(&cp, victim_config());
    let mut conn = cp.accept_with(accepted()).await;
    connected(&mut events).await;
    const N: u64 = 20_000;
    let mut flood = Vec::new();
    for id in 1..=N {
        flood.extend(envelope_frame(&Envelope::correlated(
            id,
            EdgeStatusRequest::default(),
        )));
    }
    conn.write(&flood).await;
    let mut next = 1;
    while next <= N {
        match conn.next_envelope().await {
            Some(Envelope {
                correlation_id,
                body: Some(Body::StatusResponse(r)),
            }) => {
                assert_eq!(correlation_id, next);
                assert_eq!(r.edge_id, "victim");
                next += 1;
            }
            Some(_) => {}
            None => panic!("closed after {} answers", next - 1),
        }
    }
    assert!(edge.is_connected());
    edge.shutdown().await;
}

#[tokio::test]
async fn a_control_plane_that_floods_and_never_reads_is_dropped_as_slow() {
    let cp = FakeCp::bind_small_buffers();
    let mut config = victim_config();
    config.outbound_cap = 64 * 1024;
    let (edge, mut events) = victim(&cp, config);
    // 500 configured nodes: each status response is tens of KiB, so the answers
    // outgrow the kernel's socket buffers (up to 4 MiB on Linux) and the outbound cap.
    edge.with_registry(|registry, _now| {
        for i in 0..500 {
            let node = iop_tokio::core::registry::NodeConfig::new(format!("node-{i:04}"));
            let _ = registry.configure(node, 1_000).unwrap();
        }
    });
    let mut conn = cp.accept_with(accepted()).await;
    connected(&mut events).await;
    // Status requests, never reading the answers: they pile up at the Edge.
    let mut flood = Vec::new();
    for id in 1..=2_000u64 {
        flood.extend(envelope_frame(&Envelope::correlated(
            id,
            EdgeStatusRequest::default(),
        )));
    }
    let writer = tokio::spawn(async move {
        conn.write(&flood).await;
        conn
    });
    assert_eq!(closed(&mut events).await, CloseReason::SlowPeer);
    // It hangs up and comes back, although the old connection is still open and
    // its answers unread (bytes pending must not hold the driver forever).
    let _again = cp.accept_hello().await;
    let conn = bounded("writer", writer).await.unwrap();
    drop(conn);
    edge.shutdown().await;
}

#[tokio::test]
async fn a_control_plane_that_never_answers_the_hello_is_retried_with_backoff() {
    let cp = FakeCp::bind().await;
    let mut config = victim_config();
    config.hello_timeout = Duration::from_millis(200);
    config.backoff_base = Duration::from_millis(50);
    config.backoff_max = Duration::from_millis(100);
    let (edge, mut events) = victim(&cp, config);
    let start = Instant::now();
    let mut held = Vec::new();
    for _ in 0..3 {
        // Reads the hello, then nothing: neither answers nor reads again.
        held.push(cp.accept_hello().await);
        assert_eq!(closed(&mut events).await, CloseReason::HelloTimeout);
    }
    // Three hello timeouts: at least 3 × 200 ms, and each retry came promptly.
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(600), "{elapsed:?}");
    assert!(edge.stats().hellos_sent >= 3);
    assert_eq!(edge.stats().sessions_accepted, 0);
    edge.shutdown().await;
}

#[tokio::test]
async fn a_go_away_superseded_with_retry_after_is_honoured_before_redialling() {
    let cp = FakeCp::bind().await;
    let (edge, mut events) = victim(&cp, victim_config());
    let mut conn = cp.accept_with(accepted()).await;
    connected(&mut events).await;
    let told = Instant::now();
    conn.write(&envelope_frame(&Envelope::go_away(
        GoAwayReason::Superseded,
        "another process has this id",
        400,
    )))
    .await;
    let reason = closed(&mut events).await;
    assert!(
        matches!(
            reason,
            CloseReason::GoAway {
                reason: GoAwayReason::Superseded,
                ..
            }
        ),
        "{reason:?}"
    );
    let _again = cp.accept_hello().await;
    // Backoff is 20 ms here: only the retry_after can explain the wait.
    let waited = told.elapsed();
    assert!(
        waited >= Duration::from_millis(400),
        "redialled after {waited:?}"
    );
    edge.shutdown().await;
}

#[tokio::test]
async fn the_edge_binary_stays_bounded_when_its_control_plane_floods_and_never_reads() {
    let cp = FakeCp::bind_small_buffers();
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/edge.toml");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iop-edge"))
        .args([
            "--control-plane",
            &cp.addr().to_string(),
            "--edge-id",
            "victim",
        ])
        .args(["--config", config, "--log-level", "warn"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn iop-edge");
    let pid = child.id();
    let memory_kib = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap()
        };
        (field("VmRSS:"), field("VmHWM:"))
    };
    let mut conn = cp.accept_with(accepted()).await;
    // Its resync status goes unread like everything else.
    let (rss_before, _) = memory_kib();
    // 100 000 status requests (0.8 MB): their answers are far more than the 8 MiB
    // outbound cap plus the kernel's buffers.
    let mut flood = Vec::new();
    for id in 1..=100_000u64 {
        flood.extend(envelope_frame(&Envelope::correlated(
            id,
            EdgeStatusRequest::default(),
        )));
    }
    let writer = tokio::spawn(async move {
        conn.write(&flood).await;
        conn
    });
    // It drops the Control Plane and dials again.
    let again = tokio::time::timeout(Duration::from_secs(40), cp.accept_hello()).await;
    let (rss_after, hwm) = memory_kib();
    let _ = child.kill();
    let _ = child.wait();
    assert!(again.is_ok(), "the edge never redialled");
    drop(bounded("writer", writer).await);
    eprintln!(
        "edge under a deaf status flood: VmRSS before {rss_before} KiB, after {rss_after} KiB, \
         VmHWM {hwm} KiB"
    );
    assert!(
        hwm < rss_before + 32 * 1024,
        "peak RSS {hwm} KiB, from {rss_before} KiB"
    );
}
