//! `/metrics`: the Control Plane's counters, the admin layer's own latencies, a
//! cluster replica's figures and the fleet's load ([`super::metrics_fleet`]), in the
//! OpenMetrics text format through `prometheus-client`. A scrape takes what it shows
//! under the server's lock in one go ([`Scrape`]) and renders it outside: a collector
//! reads it as it encodes, so no series is kept between scrapes.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use iop_cluster::ClusterSnapshot;
use iop_core::cp::CpStats;
use iop_tokio::fleet::{FleetLoad, LoadView};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric as _, LabelValueEncoder,
    NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;

/// The content type of what [`render`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds (seconds) of the latency histogram buckets.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// A latency histogram with fixed buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    inner: Mutex<HistogramData>,
}

#[derive(Debug, Default, Clone)]
struct HistogramData {
    /// Observations per bucket, the last past every bound.
    counts: [u64; BUCKETS.len() + 1],
    count: u64,
    sum: f64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Ok(mut h) = self.inner.lock() {
            let i = BUCKETS
                .iter()
                .position(|b| secs <= *b)
                .unwrap_or(BUCKETS.len());
            if let Some(c) = h.counts.get_mut(i) {
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

    fn snapshot(&self) -> HistogramData {
        self.inner.lock().map(|h| h.clone()).unwrap_or_default()
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

/// Gauges of the admin API itself, sampled when metrics are scraped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdminGauges {
    /// `request_status` calls not returned yet.
    pub status_callers_waiting: usize,
    /// Event streams (`GET /v1/events`) open.
    pub event_streams: usize,
}

/// Everything one scrape shows, taken at once.
#[derive(Debug)]
#[non_exhaustive]
pub struct Scrape {
    /// The Control Plane's counters.
    pub stats: CpStats,
    /// The admin API's gauges.
    pub gauges: AdminGauges,
    /// A cluster replica's figures (`--cluster`).
    pub cluster: Option<ClusterSnapshot>,
    /// The fleet's totals.
    pub fleet: FleetLoad,
    /// Every Edge's view of its load, for the per-Edge and per-provider series.
    pub loads: Vec<LoadView>,
    /// The most per-Edge and per-provider series shown (`--metrics-max-series`).
    pub max_series: usize,
    ok: HistogramData,
    failed: HistogramData,
}

impl Scrape {
    /// A scrape of what the admin API holds: `admin`'s latencies, the rest as given.
    pub fn new(
        stats: CpStats,
        gauges: AdminGauges,
        admin: &AdminMetrics,
        fleet: FleetLoad,
        loads: Vec<LoadView>,
        max_series: usize,
    ) -> Self {
        Self {
            stats,
            gauges,
            cluster: None,
            fleet,
            loads,
            max_series,
            ok: admin.status_ok.snapshot(),
            failed: admin.status_failed.snapshot(),
        }
    }
}

/// Renders a scrape in the OpenMetrics text format ([`CONTENT_TYPE`]).
pub fn render(scrape: Scrape) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::with_capacity(64 * 1024);
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let s = &self.stats;
        gauge(
            &mut e,
            "iop_edges_connected",
            "Edges with a live session.",
            s.live_sessions,
        )?;
        gauge(
            &mut e,
            "iop_edges_known",
            "Edges the control plane has a view of, connected or not.",
            s.edges_known,
        )?;
        gauge(
            &mut e,
            "iop_status_requests_waiting",
            "Status requests whose caller has not had its outcome yet.",
            self.gauges.status_callers_waiting,
        )?;
        gauge(
            &mut e,
            "iop_connections",
            "Transport connections held.",
            s.connections,
        )?;
        gauge(
            &mut e,
            "iop_admin_event_streams",
            "Admin event streams (GET /v1/events) open.",
            self.gauges.event_streams,
        )?;
        for (name, help, value) in protocol_counters(s) {
            counter(&mut e, name, help, value)?;
        }
        counter(
            &mut e,
            "iop_commands_issued",
            "Commands taken for an Edge (sent, or held for their record first).",
            s.commands_issued,
        )?;
        let finished = e.encode_descriptor(
            "iop_commands_finished",
            "Commands ended by the Edge's answer, by outcome (rejected, succeeded, failed, cancelled, timed_out); lost, undeliverable and abandoned ones have counters of their own.",
            None,
            MetricType::Counter,
        );
        let mut finished = finished?;
        for (outcome, value) in [
            ("rejected", s.commands_rejected),
            ("succeeded", s.commands_succeeded),
            ("failed", s.commands_failed),
            ("cancelled", s.commands_cancelled),
            ("timed_out", s.commands_timed_out),
        ] {
            ConstCounter::new(value).encode(finished.encode_family(&[("outcome", outcome)])?)?;
        }
        self.encode_latencies(&mut e)?;
        if let Some(c) = &self.cluster {
            encode_cluster(&mut e, c)?;
        }
        super::metrics_fleet::encode(&mut e, &self.fleet, &self.loads, self.max_series)
    }
}

impl Scrape {
    fn encode_latencies(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut m = e.encode_descriptor(
            "iop_admin_status_request_duration_seconds",
            "Status round trips through the admin API, from request to answer.",
            None,
            MetricType::Histogram,
        )?;
        for (result, h) in [("ok", &self.ok), ("error", &self.failed)] {
            let buckets: Vec<(f64, u64)> = BUCKETS
                .iter()
                .copied()
                .chain([f64::MAX])
                .zip(h.counts)
                .collect();
            m.encode_family(&[("result", result)])?
                .encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)?;
        }
        Ok(())
    }
}

/// One gauge without labels.
pub(super) fn gauge(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: impl Into<f64Or>,
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    match value.into() {
        f64Or::Int(v) => m.encode_gauge(&v),
        f64Or::Float(v) => m.encode_gauge(&v),
    }
}

/// A gauge's value: a count, or a measure.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy)]
pub(super) enum f64Or {
    Int(u64),
    Float(f64),
}

impl From<u64> for f64Or {
    fn from(v: u64) -> Self {
        Self::Int(v)
    }
}

impl From<usize> for f64Or {
    fn from(v: usize) -> Self {
        Self::Int(v as u64)
    }
}

impl From<u8> for f64Or {
    fn from(v: u8) -> Self {
        Self::Int(u64::from(v))
    }
}

impl From<f64> for f64Or {
    fn from(v: f64) -> Self {
        Self::Float(v)
    }
}

/// One counter without labels, `name` without its `_total` (the encoder adds it).
fn counter(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(m)
}

/// A gauge family: one series per label set.
pub(super) fn gauges<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        m.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

/// A label value from a peer (an Edge's ids, model names, labels): escaped as the
/// exposition format asks, so that no value can end its label or line.
#[derive(Debug, Clone, Copy)]
pub(super) struct Text<'a>(pub(super) &'a str);

impl EncodeLabelValue for Text<'_> {
    fn encode(&self, e: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => e.write_str("\\\\")?,
                '"' => e.write_str("\\\"")?,
                '\n' => e.write_str("\\n")?,
                c => e.write_char(c)?,
            }
        }
        Ok(())
    }
}

fn protocol_counters(s: &CpStats) -> [(&'static str, &'static str, u64); 25] {
    [
        (
            "iop_connections_accepted",
            "Connections accepted.",
            s.connections_accepted,
        ),
        (
            "iop_sessions_accepted",
            "Edge sessions accepted (hellos accepted).",
            s.sessions_accepted,
        ),
        (
            "iop_hello_rejections",
            "Hellos refused.",
            s.hello_rejections,
        ),
        ("iop_frames_received", "Frames decoded.", s.frames_in),
        (
            "iop_frames_sent",
            "Frames queued for sending.",
            s.frames_out,
        ),
        (
            "iop_bytes_received",
            "Bytes received from Edges.",
            s.bytes_in,
        ),
        ("iop_bytes_sent", "Bytes sent to Edges.", s.bytes_out),
        (
            "iop_protocol_errors",
            "Connections closed for breaking the protocol.",
            s.protocol_errors,
        ),
        (
            "iop_hello_timeouts",
            "Connections closed for not sending a hello in time.",
            s.hello_timeouts,
        ),
        (
            "iop_heartbeat_timeouts",
            "Sessions ended by the liveness window.",
            s.heartbeat_timeouts,
        ),
        (
            "iop_supersessions",
            "Sessions replaced by a newer one of the same Edge.",
            s.supersessions,
        ),
        (
            "iop_overloaded",
            "Connections refused at the connection cap.",
            s.overloaded,
        ),
        (
            "iop_slow_peers",
            "Connections dropped because the Edge read too slowly.",
            s.slow_peers,
        ),
        (
            "iop_status_timeouts",
            "Status requests that timed out.",
            s.status_timeouts,
        ),
        (
            "iop_late_status_responses",
            "Status responses that came after their request timed out.",
            s.late_status_responses,
        ),
        (
            "iop_unknown_command_ids",
            "Command responses/events for unknown command ids, dropped.",
            s.unknown_command_ids,
        ),
        (
            "iop_duplicate_command_events",
            "Duplicate command events dropped.",
            s.duplicate_command_events,
        ),
        (
            "iop_commands_resent",
            "Commands re-sent on a new session.",
            s.commands_resent,
        ),
        (
            "iop_commands_lost",
            "Commands marked lost by the Edge.",
            s.commands_lost,
        ),
        (
            "iop_commands_abandoned",
            "Commands FAILED as abandoned: their Edge stayed away longer than it remembers them.",
            s.commands_abandoned,
        ),
        (
            "iop_event_gaps",
            "Node event sequence gaps seen.",
            s.event_gaps,
        ),
        (
            "iop_commands_undeliverable",
            "Commands failed undeliverable: sent on too many sessions that ended unanswered.",
            s.commands_undeliverable,
        ),
        (
            "iop_views_forgotten",
            "Views of disconnected Edges forgotten by age or count.",
            s.views_forgotten,
        ),
        (
            "iop_pending_hellos_refused",
            "Connections refused because too many hellos were pending.",
            s.pending_hellos_refused,
        ),
        (
            "iop_connections_refused",
            "Connections refused OVERLOADED by the runtime (too many pending hellos from one address).",
            s.connections_refused,
        ),
    ]
}

fn encode_cluster(
    e: &mut DescriptorEncoder<'_>,
    c: &ClusterSnapshot,
) -> Result<(), std::fmt::Error> {
    gauge(
        e,
        "iop_cluster_engine_up",
        "1 while this replica's last liveness renewal reached the cluster engine (NATS).",
        u8::from(c.engine_up),
    )?;
    gauge(
        e,
        "iop_cluster_engine_rtt_seconds",
        "Round-trip time of the last liveness renewal.",
        c.engine_rtt_us as f64 / 1e6,
    )?;
    gauge(
        e,
        "iop_cluster_fenced",
        "1 once another process took this replica's liveness entry (same --replica-id): it decides no more claims.",
        u8::from(c.fenced),
    )?;
    gauge(
        e,
        "iop_cluster_events_outbox",
        "Events waiting in this replica's outbox for the fleet's stream.",
        c.events_outbox,
    )?;
    let counters: [(&str, &str, u64); 19] = [
        (
            "iop_cluster_commands_recorded",
            "Command records written to the cluster engine.",
            c.commands_recorded,
        ),
        (
            "iop_cluster_command_records_failed",
            "Command records that could not be written to the cluster engine.",
            c.command_records_failed,
        ),
        (
            "iop_cluster_commands_adopted",
            "Unfinished commands another replica sent, carried on by this one.",
            c.commands_adopted,
        ),
        (
            "iop_cluster_claims_granted",
            "Ownership claims granted.",
            c.claims_granted,
        ),
        (
            "iop_cluster_claims_held",
            "Ownership claims refused: a live replica holds the Edge.",
            c.claims_held,
        ),
        (
            "iop_cluster_claims_unavailable",
            "Ownership claims the engine could not decide (OVERLOADED).",
            c.claims_unavailable,
        ),
        (
            "iop_cluster_cas_conflicts",
            "Compare-and-set writes that found the record moved on.",
            c.cas_conflicts,
        ),
        (
            "iop_cluster_ownership_lost",
            "Sessions closed because another replica took their Edge.",
            c.ownership_lost,
        ),
        (
            "iop_cluster_routed_requests",
            "Requests sent to the replica holding an Edge.",
            c.routed_requests,
        ),
        (
            "iop_cluster_routed_failures",
            "Routed requests without an answer from the Edge.",
            c.routed_failures,
        ),
        (
            "iop_cluster_events_published",
            "Events published on the fleet's stream.",
            c.events_published,
        ),
        (
            "iop_cluster_events_lost",
            "Events lost before the fleet's stream had them (outbox full or past its horizon, or a lagging subscription).",
            c.events_lost,
        ),
        (
            "iop_cluster_events_retried",
            "Publishes of the event outbox that failed and were retried.",
            c.events_retried,
        ),
        (
            "iop_cluster_claims_overtaken",
            "Ownership claims refused because their record moved on while they were pending.",
            c.claims_overtaken,
        ),
        (
            "iop_cluster_releases_failed",
            "Releases of an ownership record that failed and were retried.",
            c.releases_failed,
        ),
        (
            "iop_cluster_phantoms_released",
            "Live ownership records naming this replica without a session here, released.",
            c.phantoms_released,
        ),
        (
            "iop_cluster_rollbacks",
            "Sessions closed because the engine's record was behind them (lost writes).",
            c.rollbacks,
        ),
        (
            "iop_cluster_watch_restarts",
            "Watches of the ownership records that ended or failed and were restarted.",
            c.watch_restarts,
        ),
        (
            "iop_cluster_reconciles",
            "Ownership reconciles run (periodic, after a watch restart, after a reconnect).",
            c.reconciles,
        ),
    ];
    for (name, help, value) in counters {
        counter(e, name, help, value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct One(&'static str);

    impl Collector for One {
        fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
            gauges(&mut e, "x", "help", [([("v", Text(self.0))], 1)])
        }
    }

    #[test]
    fn a_label_value_cannot_end_its_label_or_its_line() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(One("a\"b\\c\nd")));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains(r#"x{v="a\"b\\c\nd"} 1"#), "{out}");
        assert_eq!(out.lines().filter(|l| l.starts_with("x{")).count(), 1);
    }
}
