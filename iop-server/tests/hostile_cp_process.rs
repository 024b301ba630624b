//! Hostile peers against the `iop-control-plane` binary as a process: floods with
//! its memory read from `/proc/<pid>/status` (VmRSS / VmHWM), the hello timeout and
//! connection cap set by flags, and a wrong credential that must appear nowhere (logs
//! at `RUST_LOG=trace`, responses, admin API). A good in-process Edge connected
//! beforehand must keep its session throughout.

mod hostile_support;
// The runtime tests' helpers, shared with iop-tokio's own tests.
#[path = "../../iop-tokio/tests/support/mod.rs"]
mod support;

use hostile_support::*;
use iop_tokio::core::proto::{
    self, Body, Envelope, FrameDecoder, GoAwayReason, Heartbeat, HelloRejectReason,
};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Frames in each flood.
const FLOOD: u64 = 200_000;
/// Growth of the process's peak RSS a flood may cause.
const FLOOD_RSS_BUDGET_KIB: u64 = 32 * 1024;

/// Writes `frames` in 64 KiB chunks.
async fn write_all_chunked(stream: &mut tokio::net::tcp::OwnedWriteHalf, frames: &[u8]) -> bool {
    for chunk in frames.chunks(64 * 1024) {
        if stream.write_all(chunk).await.is_err() {
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_200k_heartbeats_is_answered_or_dropped_with_bounded_memory() {
    let cp = CpProcess::start(&["--heartbeat-interval-ms", "1000"], "warn");
    let good = good_edge(cp.edges, "good").await;
    let mut attacker = Attacker::connect(cp.edges).await;
    attacker.hello("flooder").await;
    let (rss_before, _) = cp.memory_kib();

    let mut flood = Vec::new();
    for sequence in 1..=FLOOD {
        flood.extend(envelope_frame(&Envelope::new(Heartbeat {
            sequence,
            sent_at_unix_ms: 0,
        })));
    }
    let (mut rd, mut wr) = attacker.stream.into_split();
    // Count the acks while flooding; stop at the last one or at EOF.
    let reader = tokio::spawn(async move {
        let mut decoder = FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN);
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        let (mut acks, mut go_away) = (0u64, None);
        loop {
            let n = match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            let mut input = buf.as_slice();
            while let Some(e) = decoder.decode(&mut input).expect("CP sent a bad frame") {
                match e.body {
                    Some(Body::HeartbeatAck(_)) => acks += 1,
                    Some(Body::GoAway(g)) => go_away = Some(g.reason()),
                    _ => {}
                }
            }
            let consumed = buf.len() - input.len();
            buf.drain(..consumed);
            if acks == FLOOD {
                break;
            }
        }
        (acks, go_away)
    });
    let written = bounded("flood written", write_all_chunked(&mut wr, &flood)).await;
    let (acks, go_away) = bounded("flood answered", reader).await.unwrap();
    let (rss_after, hwm) = cp.memory_kib();
    eprintln!(
        "heartbeat flood: {FLOOD} frames ({} KiB), {acks} acks, go_away {go_away:?}; \
         VmRSS before {rss_before} KiB, after {rss_after} KiB, VmHWM {hwm} KiB",
        flood.len() / 1024
    );
    // Kept up (every heartbeat acknowledged), or dropped the peer: the reader only
    // stops early at EOF, and then the CP counted it as a slow peer.
    if acks < FLOOD {
        let (_, metrics) = admin_get(cp.admin, "/metrics").await;
        assert!(
            metrics.lines().any(|l| l == "iop_slow_peers_total 1"),
            "{acks} acks, written {written}, go_away {go_away:?}: {metrics}"
        );
    }
    assert!(
        hwm < rss_before + FLOOD_RSS_BUDGET_KIB,
        "peak RSS {hwm} KiB, from {rss_before} KiB before the flood"
    );
    assert_binary_undisturbed(&cp, &good).await;
    good.edge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_200k_bodiless_envelopes_is_ignored_with_bounded_memory() {
    let cp = CpProcess::start(&["--heartbeat-interval-ms", "1000"], "warn");
    let good = good_edge(cp.edges, "good").await;
    let mut attacker = Attacker::connect(cp.edges).await;
    attacker.hello("flooder").await;
    let (rss_before, _) = cp.memory_kib();
    // An envelope with a correlation id and no body: 2 bytes, counted and ignored.
    let one = envelope_frame(&Envelope {
        correlation_id: 1,
        body: None,
    });
    let flood = one.repeat(FLOOD as usize);
    bounded("flood written", attacker.stream.write_all(&flood))
        .await
        .unwrap();
    // Everything before it was read and ignored: the session still answers.
    attacker.ping(1).await;
    let (rss_after, hwm) = cp.memory_kib();
    eprintln!(
        "empty-envelope flood: {FLOOD} frames ({} KiB); VmRSS before {rss_before} KiB, \
         after {rss_after} KiB, VmHWM {hwm} KiB",
        flood.len() / 1024
    );
    assert!(
        hwm < rss_before + FLOOD_RSS_BUDGET_KIB,
        "peak RSS {hwm} KiB, from {rss_before} KiB before the flood"
    );
    assert_binary_undisturbed(&cp, &good).await;
    good.edge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_silent_connections_get_hello_timeout_with_bounded_memory() {
    let cp = CpProcess::start(
        &[
            "--heartbeat-interval-ms",
            "1000",
            "--hello-timeout-ms",
            "300",
            // All from 127.0.0.1: the per-address cap (64) is tested on its own.
            "--max-pending-hellos-per-ip",
            "1000",
        ],
        "warn",
    );
    let good = good_edge(cp.edges, "good").await;
    let (rss_before, _) = cp.memory_kib();
    let mut silent = Vec::new();
    // 500: within a default limit of 1 024 open files, on both sides.
    for _ in 0..500 {
        silent.push(Attacker::connect(cp.edges).await);
    }
    for attacker in &mut silent {
        attacker.expect_go_away(GoAwayReason::HelloTimeout).await;
    }
    let (rss_after, hwm) = cp.memory_kib();
    eprintln!(
        "500 silent connections: VmRSS before {rss_before} KiB, after {rss_after} KiB, \
         VmHWM {hwm} KiB"
    );
    assert!(hwm < rss_before + 16 * 1024, "peak RSS {hwm} KiB");
    assert_binary_undisturbed(&cp, &good).await;
    good.edge.shutdown().await;
}

/// One address may hold only so many connections awaiting their hello: past it a new
/// one is told OVERLOADED at once (and may retry after 10 s), while an Edge from
/// another address — here, one whose hello was accepted — is served as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_at_most_so_many_pending_hellos() {
    let cp = CpProcess::start(
        &[
            "--heartbeat-interval-ms",
            "1000",
            "--max-pending-hellos-per-ip",
            "3",
        ],
        "warn",
    );
    let good = good_edge(cp.edges, "good").await;
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(Attacker::connect(cp.edges).await);
    }
    // Let the three be registered before the fourth comes.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut over = Attacker::connect(cp.edges).await;
    let bodies = over.expect_go_away(GoAwayReason::Overloaded).await;
    // A burst refusal: back when the pending hellos will have been accepted at the
    // rate seen (one so far), at least 200 ms and at most `retry_after_overloaded`.
    assert!(
        matches!(bodies.last(), Some(Body::GoAway(g)) if (200..=10_000).contains(&g.retry_after_ms)),
        "{bodies:?}"
    );
    // A connection that says hello frees its place.
    silent[0].hello("freed").await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut next = Attacker::connect(cp.edges).await;
    next.hello("next").await;
    assert_binary_undisturbed(&cp, &good).await;
    good.edge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_the_binary_answers_go_away_overloaded_with_retry_after() {
    let cp = CpProcess::start(
        &["--heartbeat-interval-ms", "1000", "--max-connections", "2"],
        "warn",
    );
    let good = good_edge(cp.edges, "good").await;
    let mut holder = Attacker::connect(cp.edges).await;
    holder.hello("holder").await;
    for _ in 0..5 {
        let mut extra = Attacker::connect(cp.edges).await;
        let bodies = extra.expect_go_away(GoAwayReason::Overloaded).await;
        assert!(
            matches!(bodies.as_slice(), [Body::GoAway(g)] if g.retry_after_ms == 10_000),
            "{bodies:?}"
        );
    }
    holder.ping(1).await;
    let (_, metrics) = admin_get(cp.admin, "/metrics").await;
    assert!(
        metrics.lines().any(|l| l == "iop_overloaded_total 5"),
        "{metrics}"
    );
    assert_binary_undisturbed(&cp, &good).await;
    good.edge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_credential_is_refused_and_never_logged_or_echoed() {
    const MARKER: &str = "Hunter2-credential-marker-7f3a";
    let enrol = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/enroll.toml");
    let cp = CpProcess::start(
        &["--heartbeat-interval-ms", "1000", "--enroll", enrol],
        "trace",
    );
    // edge-1's real credential (examples/enroll.toml).
    let mut config = fast_edge("edge-1");
    config.credential = "edge-1-secret-5b0c9e2a".into();
    let mut client = iop_tokio::EdgeClient::new(config);
    let mut edge_events = client.events();
    let edge = client.connect(cp.edges).unwrap();
    let session_id = next_edge(&mut edge_events, "edge-1 connected", |e| match e {
        iop_tokio::core::edge::EdgeEvent::Connected { session_id, .. } => Some(*session_id),
        _ => None,
    })
    .await;
    let good = GoodEdge {
        edge,
        edge_id: "edge-1".into(),
        session_id,
    };

    for (edge_id, expected) in [
        ("edge-1", HelloRejectReason::BadCredential),
        ("edge-2", HelloRejectReason::BadCredential),
        ("edge-9", HelloRejectReason::UnknownEdge),
    ] {
        let mut attacker = Attacker::connect(cp.edges).await;
        attacker
            .write(&hello_frame(edge_id, MARKER.as_bytes()))
            .await;
        let (_, bodies) = attacker.go_away_then_eof().await;
        let [Body::HelloResponse(r)] = bodies.as_slice() else {
            panic!("{edge_id}: {bodies:?}");
        };
        assert!(!r.accepted);
        assert_eq!(r.reject_reason(), expected, "{edge_id}");
        assert!(!format!("{r:?}").contains(MARKER));
    }
    // The refused hello for edge-1 did not replace the live session.
    assert_binary_undisturbed(&cp, &good).await;

    // Nowhere: not in the admin API, not in the trace logs, in no encoding.
    let mut seen = String::new();
    for path in ["/v1/edges", "/v1/edges/edge-1", "/metrics"] {
        seen.push_str(&admin_get(cp.admin, path).await.1);
    }
    let logs = cp.logs();
    assert!(
        logs.contains("TRACE") || logs.contains("trace"),
        "trace logging is on"
    );
    seen.push_str(&logs);
    let bytes: Vec<u8> = MARKER.bytes().collect();
    let forms = [
        MARKER.to_owned(),
        MARKER.to_lowercase(),
        format!("{bytes:?}"),
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        bytes
            .iter()
            .map(|b| format!("\\x{b:02x}"))
            .collect::<String>(),
        "edge-1-secret-5b0c9e2a".to_owned(),
    ];
    for form in &forms {
        assert!(
            !seen.to_lowercase().contains(&form.to_lowercase()),
            "the credential leaked as {form:?}"
        );
    }
    good.edge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_of_the_binary_gets_hello_timeout() {
    let cp = CpProcess::start(
        &[
            "--heartbeat-interval-ms",
            "1000",
            "--hello-timeout-ms",
            "300",
        ],
        "warn",
    );
    let good = good_edge(cp.edges, "good").await;
    let mut attacker = Attacker::connect(cp.edges).await;
    attacker.expect_go_away(GoAwayReason::HelloTimeout).await;
    assert_binary_undisturbed(&cp, &good).await;
    good.edge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_floods_heartbeats_and_never_reads_is_dropped_with_bounded_memory() {
    let cp = CpProcess::start(&["--heartbeat-interval-ms", "1000"], "warn");
    let good = good_edge(cp.edges, "good").await;
    // A small receive buffer: the kernel absorbs little of the acks.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4 * 1024).unwrap();
    let stream = bounded("connect", socket.connect(cp.edges)).await.unwrap();
    let mut attacker = Attacker::from_stream(stream);
    attacker.hello("deaf").await;
    let (rss_before, _) = cp.memory_kib();
    // 1.5 M heartbeats (15 MB) and never a read: their acks (10 bytes each) outgrow
    // the 8 MiB outbound cap plus the kernel's buffers.
    const DEAF_FLOOD: u64 = 1_500_000;
    let mut flood = Vec::with_capacity(16 << 20);
    for sequence in 1..=DEAF_FLOOD {
        flood.extend(envelope_frame(&Envelope::new(Heartbeat {
            sequence,
            sent_at_unix_ms: 0,
        })));
    }
    // The write ends early (reset) once the CP drops the peer.
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(40),
        attacker.stream.write_all(&flood),
    )
    .await;
    // The kernel may have taken it all before the CP read it: wait for the verdict.
    // (15 MB through a debug build on a loaded machine: a longer bound than usual.)
    let verdict = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            let (_, metrics) = admin_get(cp.admin, "/metrics").await;
            if metrics.lines().any(|l| l == "iop_slow_peers_total 1") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    if verdict.is_err() {
        let (_, metrics) = admin_get(cp.admin, "/metrics").await;
        panic!("the deaf peer was never dropped: {metrics}");
    }
    let (rss_after, hwm) = cp.memory_kib();
    eprintln!(
        "deaf heartbeat flood: {DEAF_FLOOD} frames ({} KiB); VmRSS before {rss_before} KiB, \
         after {rss_after} KiB, VmHWM {hwm} KiB",
        flood.len() / 1024
    );
    // The 8 MiB cap bounds what is queued for the peer, in memory too.
    assert!(
        hwm < rss_before + FLOOD_RSS_BUDGET_KIB,
        "peak RSS {hwm} KiB, from {rss_before} KiB before the flood"
    );
    drop(attacker);
    assert_binary_undisturbed(&cp, &good).await;
    good.edge.shutdown().await;
}
