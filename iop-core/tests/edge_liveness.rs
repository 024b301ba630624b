//! Heartbeat cadence, silent CP, reconnect backoff.

use std::time::Duration;

use iop_core::Instant;
use iop_core::edge::{CloseReason, EdgeEvent};
use iop_core::proto::{Body, Envelope, GoAwayReason, HeartbeatAck};
use iop_core::testing::scripted::control_plane::*;
use proptest::prelude::*;

fn heartbeats(frames: &[Envelope]) -> Vec<(u64, u64)> {
    frames
        .iter()
        .filter_map(|f| match &f.body {
            Some(Body::Heartbeat(h)) => Some((h.sequence, h.sent_at_unix_ms)),
            _ => None,
        })
        .collect()
}

#[test]
fn heartbeats_every_interval_from_sequence_one() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1); // interval 1 s, accepted at 0
    let mut seen = Vec::new();
    for t in (250..=4_000).step_by(250) {
        h.timeout(t);
        seen.extend(heartbeats(&h.flush()));
        // The CP acks, which keeps the session alive.
        h.deliver(Envelope::new(HeartbeatAck { sequence: 0 }));
    }
    assert_eq!(
        seen,
        [1, 2, 3, 4]
            .map(|s| (s, ORIGIN_UNIX_MS + s * 1_000))
            .to_vec()
    );
    assert!(h.edge.is_connected());
}

#[test]
fn heartbeats_go_out_whatever_else_is_sent() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    // A busy CP keeps sending status requests; heartbeats are still due on time.
    let mut beats = 0;
    for t in (100..=3_000).step_by(100) {
        h.at(t);
        h.deliver(Envelope::correlated(
            t,
            iop_core::proto::EdgeStatusRequest::default(),
        ));
        h.edge.handle_timeout(h.now);
        beats += heartbeats(&h.flush()).len();
    }
    assert_eq!(beats, 3);
}

#[test]
fn a_silent_cp_is_declared_dead_after_three_intervals() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.events();
    h.at(1_500);
    h.deliver(Envelope::new(HeartbeatAck { sequence: 1 })); // proof of life at 1.5 s
    h.timeout(4_499);
    assert!(h.edge.is_connected());
    h.timeout(4_500);
    let frames = h.flush();
    assert_eq!(
        go_away_reason(frames.last().unwrap()),
        GoAwayReason::HeartbeatTimeout
    );
    assert!(h.close_requested);
    let events = h.events();
    assert!(matches!(
        events[..],
        [EdgeEvent::Closed {
            reason: CloseReason::PeerSilent,
            reconnect_at: Some(_)
        }]
    ));
    h.transport_closed();
    assert!(h.edge.poll_connect_at().is_some());
}

#[test]
fn transport_loss_emits_one_closed_and_schedules_a_dial() {
    let mut h = Harness::default_edge();
    h.connect_and_accept(1);
    h.events();
    h.at(500);
    h.transport_closed();
    h.transport_closed();
    let events = h.events();
    assert_eq!(events.len(), 1);
    let EdgeEvent::Closed {
        reason: CloseReason::TransportClosed,
        reconnect_at: Some(at),
    } = events[0]
    else {
        panic!("{events:?}")
    };
    assert_eq!(h.edge.poll_connect_at(), Some(at));
    // First retry after an unhealthy session: within [0, 250 ms].
    assert!(at >= h.now && at <= h.now + Duration::from_millis(250));
    // Bytes with no transport are ignored.
    h.edge.handle_bytes(h.now, &[1, 2, 3]);
    assert!(h.flush().is_empty());
}

/// The delays (relative to the failure time) of `n` consecutive failed dials.
fn dial_delays(seed: u64, n: usize) -> Vec<Duration> {
    let mut c = config();
    c.seed = seed;
    let mut h = Harness::new(c, FakeRegistry::default());
    let mut out = Vec::new();
    let mut now = Instant::ZERO;
    for _ in 0..n {
        h.edge.handle_connect_failed(now);
        let at = h.edge.poll_connect_at().unwrap();
        out.push(at.saturating_duration_since(now));
        now = at;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn backoff_is_full_jitter_within_the_doubling_cap_and_deterministic(seed in any::<u64>()) {
        let delays = dial_delays(seed, 12);
        for (n, d) in delays.iter().enumerate() {
            let cap = Duration::from_millis(250 * (1u64 << n)).min(Duration::from_secs(30));
            prop_assert!(*d <= cap, "attempt {} delay {:?} over cap {:?}", n, d, cap);
        }
        prop_assert_eq!(delays, dial_delays(seed, 12));
    }

    #[test]
    fn reconnect_is_never_sooner_than_retry_after(seed in any::<u64>(), retry_ms in 1u32..120_000, fails in 0usize..8) {
        let mut c = config();
        c.seed = seed;
        let mut h = Harness::new(c, FakeRegistry::default());
        // Some failed dials first so the backoff cap has grown.
        let mut now = Instant::ZERO;
        for _ in 0..fails {
            h.edge.handle_connect_failed(now);
            now = h.edge.poll_connect_at().unwrap();
        }
        h.now = now;
        h.connect();
        h.deliver(Envelope::go_away(GoAwayReason::Draining, "", retry_ms));
        h.transport_closed();
        let at = h.edge.poll_connect_at().unwrap();
        let delay = at.saturating_duration_since(now);
        let retry = Duration::from_millis(u64::from(retry_ms));
        let cap = Duration::from_millis(250 * (1u64 << fails)).min(Duration::from_secs(30));
        prop_assert!(delay >= retry);
        prop_assert!(delay <= retry.max(cap));
    }
}

/// After 10 failed dials, one session of `session_ms` (1 s heartbeats, acked every
/// 500 ms), then a transport loss: the delay to the next dial.
fn delay_after_session(seed: u64, session_ms: u64) -> Duration {
    let mut c = config();
    c.seed = seed;
    let mut h = Harness::new(c, FakeRegistry::default());
    let mut now = Instant::ZERO;
    for _ in 0..10 {
        h.edge.handle_connect_failed(now);
        now = h.edge.poll_connect_at().unwrap();
    }
    h.now = now;
    h.connect_and_accept(1);
    let start = now.as_millis();
    let mut t = start;
    while t < start + session_ms {
        t = (t + 500).min(start + session_ms);
        h.timeout(t);
        h.deliver(Envelope::new(HeartbeatAck { sequence: 0 }));
    }
    assert!(h.edge.is_connected());
    h.transport_closed();
    h.edge
        .poll_connect_at()
        .unwrap()
        .saturating_duration_since(h.now)
}

#[test]
fn backoff_resets_after_a_healthy_session_only() {
    let mut short_over = 0;
    for seed in 0..32 {
        // Longer than the 3 s liveness window: back to the first step, [0, 250 ms].
        assert!(delay_after_session(seed, 4_000) <= Duration::from_millis(250));
        // Shorter: the cap stays at 30 s, so the jitter is rarely that small.
        if delay_after_session(seed, 2_000) > Duration::from_millis(250) {
            short_over += 1;
        }
    }
    assert!(short_over > 28, "{short_over}");
}
