//! Prometheus text exposition of the control plane's counters and of the admin
//! layer's own status round-trip latencies.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use iop_core::cp::CpStats;

/// Upper bounds (seconds) of the latency histogram buckets.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// A latency histogram with fixed buckets (cumulative when rendered).
#[derive(Debug, Default)]
pub struct Histogram {
    inner: Mutex<HistogramData>,
}

#[derive(Debug, Default, Clone)]
struct HistogramData {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Ok(mut h) = self.inner.lock() {
            if let Some(i) = BUCKETS.iter().position(|b| secs <= *b)
                && let Some(c) = h.counts.get_mut(i)
            {
                *c += 1;
            }
            h.count += 1;
            h.sum += secs;
        }
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.inner.lock().map_or(0, |h| h.count)
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let h = self.inner.lock().map(|h| h.clone()).unwrap_or_default();
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(h.counts) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(
            out,
            "{name}_sum{{{}}} {}",
            labels.trim_end_matches(','),
            h.sum
        );
        let _ = writeln!(
            out,
            "{name}_count{{{}}} {}",
            labels.trim_end_matches(','),
            h.count
        );
    }
}

/// What the admin layer measures itself.
#[derive(Debug, Default)]
pub struct AdminMetrics {
    /// Status round trips answered by an Edge.
    pub status_ok: Histogram,
    /// Status round trips that failed (timeout, session ended, ...).
    pub status_failed: Histogram,
}

fn metric(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    let _ = writeln!(out, "{name} {value}");
}

/// Gauges of the admin API itself, sampled when metrics are scraped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdminGauges {
    /// `request_status` calls not returned yet.
    pub status_callers_waiting: usize,
    /// Event streams (`GET /v1/events`) open.
    pub event_streams: usize,
}

/// Renders the Prometheus text format (version 0.0.4).
pub fn render(stats: &CpStats, gauges: AdminGauges, admin: &AdminMetrics) -> String {
    let mut out = String::with_capacity(4096);
    let s = stats;
    let status_callers_waiting = gauges.status_callers_waiting;
    metric(
        &mut out,
        "iop_edges_connected",
        "gauge",
        "Edges with a live session.",
        s.live_sessions,
    );
    metric(
        &mut out,
        "iop_edges_known",
        "gauge",
        "Edges the control plane has a view of, connected or not.",
        s.edges_known,
    );
    metric(
        &mut out,
        "iop_status_requests_waiting",
        "gauge",
        "Status requests whose caller has not had its outcome yet.",
        status_callers_waiting,
    );
    metric(
        &mut out,
        "iop_connections",
        "gauge",
        "Transport connections held.",
        s.connections,
    );
    metric(
        &mut out,
        "iop_admin_event_streams",
        "gauge",
        "Admin event streams (GET /v1/events) open.",
        gauges.event_streams,
    );
    let counters: [(&str, &str, u64); 25] = [
        (
            "iop_connections_accepted_total",
            "Connections accepted.",
            s.connections_accepted,
        ),
        (
            "iop_sessions_accepted_total",
            "Edge sessions accepted (hellos accepted).",
            s.sessions_accepted,
        ),
        (
            "iop_hello_rejections_total",
            "Hellos refused.",
            s.hello_rejections,
        ),
        ("iop_frames_received_total", "Frames decoded.", s.frames_in),
        (
            "iop_frames_sent_total",
            "Frames queued for sending.",
            s.frames_out,
        ),
        (
            "iop_bytes_received_total",
            "Bytes received from Edges.",
            s.bytes_in,
        ),
        ("iop_bytes_sent_total", "Bytes sent to Edges.", s.bytes_out),
        (
            "iop_protocol_errors_total",
            "Connections closed for breaking the protocol.",
            s.protocol_errors,
        ),
        (
            "iop_hello_timeouts_total",
            "Connections closed for not sending a hello in time.",
            s.hello_timeouts,
        ),
        (
            "iop_heartbeat_timeouts_total",
            "Sessions ended by the liveness window.",
            s.heartbeat_timeouts,
        ),
        (
            "iop_supersessions_total",
            "Sessions replaced by a newer one of the same Edge.",
            s.supersessions,
        ),
        (
            "iop_overloaded_total",
            "Connections refused at the connection cap.",
            s.overloaded,
        ),
        (
            "iop_slow_peers_total",
            "Connections dropped because the Edge read too slowly.",
            s.slow_peers,
        ),
        (
            "iop_status_timeouts_total",
            "Status requests that timed out.",
            s.status_timeouts,
        ),
        (
            "iop_late_status_responses_total",
            "Status responses that came after their request timed out.",
            s.late_status_responses,
        ),
        (
            "iop_unknown_command_ids_total",
            "Command responses/events for unknown command ids, dropped.",
            s.unknown_command_ids,
        ),
        (
            "iop_duplicate_command_events_total",
            "Duplicate command events dropped.",
            s.duplicate_command_events,
        ),
        (
            "iop_commands_resent_total",
            "Commands re-sent on a new session.",
            s.commands_resent,
        ),
        (
            "iop_commands_lost_total",
            "Commands marked lost by the Edge.",
            s.commands_lost,
        ),
        (
            "iop_commands_abandoned_total",
            "Commands FAILED as abandoned: their Edge stayed away longer than it remembers them.",
            s.commands_abandoned,
        ),
        (
            "iop_event_gaps_total",
            "Node event sequence gaps seen.",
            s.event_gaps,
        ),
        (
            "iop_commands_undeliverable_total",
            "Commands failed undeliverable: sent on too many sessions that ended unanswered.",
            s.commands_undeliverable,
        ),
        (
            "iop_views_forgotten_total",
            "Views of disconnected Edges forgotten by age or count.",
            s.views_forgotten,
        ),
        (
            "iop_pending_hellos_refused_total",
            "Connections refused because too many hellos were pending.",
            s.pending_hellos_refused,
        ),
        (
            "iop_connections_refused_total",
            "Connections refused OVERLOADED by the runtime (too many pending hellos from one address).",
            s.connections_refused,
        ),
    ];
    for (name, help, value) in counters {
        metric(&mut out, name, "counter", help, value);
    }
    let name = "iop_admin_status_request_duration_seconds";
    let help = "Status round trips through the admin API, from request to answer.";
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    let mut body = String::new();
    admin
        .status_ok
        .render(&mut body, name, help, "result=\"ok\",");
    admin
        .status_failed
        .render(&mut body, name, help, "result=\"error\",");
    // One HELP/TYPE per family: drop the per-series repeats.
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Appends a cluster replica's figures (`--cluster`).
pub fn render_cluster(out: &mut String, c: &iop_cluster::ClusterSnapshot) {
    metric(
        out,
        "iop_cluster_engine_up",
        "gauge",
        "1 while this replica's last liveness renewal reached the cluster engine (NATS).",
        u8::from(c.engine_up),
    );
    metric(
        out,
        "iop_cluster_engine_rtt_seconds",
        "gauge",
        "Round-trip time of the last liveness renewal.",
        c.engine_rtt_us as f64 / 1e6,
    );
    metric(
        out,
        "iop_cluster_fenced",
        "gauge",
        "1 once another process took this replica's liveness entry (same --replica-id): it decides no more claims.",
        u8::from(c.fenced),
    );
    metric(
        out,
        "iop_cluster_events_outbox",
        "gauge",
        "Events waiting in this replica's outbox for the fleet's stream.",
        c.events_outbox,
    );
    let counters: [(&str, &str, u64); 19] = [
        (
            "iop_cluster_commands_recorded_total",
            "Command records written to the cluster engine.",
            c.commands_recorded,
        ),
        (
            "iop_cluster_command_records_failed_total",
            "Command records that could not be written to the cluster engine.",
            c.command_records_failed,
        ),
        (
            "iop_cluster_commands_adopted_total",
            "Unfinished commands another replica sent, carried on by this one.",
            c.commands_adopted,
        ),
        (
            "iop_cluster_claims_granted_total",
            "Ownership claims granted.",
            c.claims_granted,
        ),
        (
            "iop_cluster_claims_held_total",
            "Ownership claims refused: a live replica holds the Edge.",
            c.claims_held,
        ),
        (
            "iop_cluster_claims_unavailable_total",
            "Ownership claims the engine could not decide (OVERLOADED).",
            c.claims_unavailable,
        ),
        (
            "iop_cluster_cas_conflicts_total",
            "Compare-and-set writes that found the record moved on.",
            c.cas_conflicts,
        ),
        (
            "iop_cluster_ownership_lost_total",
            "Sessions closed because another replica took their Edge.",
            c.ownership_lost,
        ),
        (
            "iop_cluster_routed_requests_total",
            "Requests sent to the replica holding an Edge.",
            c.routed_requests,
        ),
        (
            "iop_cluster_routed_failures_total",
            "Routed requests without an answer from the Edge.",
            c.routed_failures,
        ),
        (
            "iop_cluster_events_published_total",
            "Events published on the fleet's stream.",
            c.events_published,
        ),
        (
            "iop_cluster_events_lost_total",
            "Events lost before the fleet's stream had them (outbox full or past its horizon, or a lagging subscription).",
            c.events_lost,
        ),
        (
            "iop_cluster_events_retried_total",
            "Publishes of the event outbox that failed and were retried.",
            c.events_retried,
        ),
        (
            "iop_cluster_claims_overtaken_total",
            "Ownership claims refused because their record moved on while they were pending.",
            c.claims_overtaken,
        ),
        (
            "iop_cluster_releases_failed_total",
            "Releases of an ownership record that failed and were retried.",
            c.releases_failed,
        ),
        (
            "iop_cluster_phantoms_released_total",
            "Live ownership records naming this replica without a session here, released.",
            c.phantoms_released,
        ),
        (
            "iop_cluster_rollbacks_total",
            "Sessions closed because the engine's record was behind them (lost writes).",
            c.rollbacks,
        ),
        (
            "iop_cluster_watch_restarts_total",
            "Watches of the ownership records that ended or failed and were restarted.",
            c.watch_restarts,
        ),
        (
            "iop_cluster_reconciles_total",
            "Ownership reconciles run (periodic, after a watch restart, after a reconnect).",
            c.reconciles,
        ),
    ];
    for (name, help, value) in counters {
        metric(out, name, "counter", help, value);
    }
}
