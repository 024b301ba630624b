//! `/metrics`: the Control Plane's counters, the admin layer's own latencies, a
//! cluster replica's figures and the fleet's load ([`fleet`]), in the
//! OpenMetrics text format through `prometheus-client`. A scrape takes what it shows
//! under the server's lock in one go ([`Scrape`]) and renders it outside: a collector
//! reads it as it encodes, so no series is kept between scrapes.

use std::sync::Mutex;
use std::time::Duration;

use iop_cluster::ClusterSnapshot;
use iop_core::cp::CpStats;
use iop_tokio::fleet::{FleetLoad, LoadView};

mod cluster;
mod encode;
mod fleet;
mod placement;
mod protocol;

use cluster::encode_cluster;
use encode::{counter, gauge};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;
use protocol::protocol_counters;

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
    /// Inputs that found the server's lock held, applied by its holder
    /// ([`ControlPlaneHandle::inputs_deferred`](iop_tokio::ControlPlaneHandle::inputs_deferred)).
    pub inputs_deferred: u64,
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
    /// Edges other replicas hold, as this one's placement and load watch know them.
    pub remote_load_edges: usize,
    /// The fleet's totals.
    pub fleet: FleetLoad,
    /// Every Edge's view of its load, for the per-Edge and per-provider series.
    pub loads: Vec<LoadView>,
    /// The most per-Edge and per-provider series shown (`--metrics-max-series`).
    pub max_series: usize,
    /// What placements have done.
    pub placement: iop_tokio::fleet::PlacementStats,
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
            remote_load_edges: 0,
            fleet,
            loads,
            max_series,
            placement: Default::default(),
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
        counter(
            &mut e,
            "iop_inputs_deferred",
            "Inputs read from a connection while another task held the server's lock, applied by that task.",
            self.gauges.inputs_deferred,
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
            encode_cluster(&mut e, c, self.remote_load_edges)?;
        }
        placement::encode(&mut e, &self.placement)?;
        fleet::encode(&mut e, &self.fleet, &self.loads, self.max_series)
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

/// `GET /metrics`.
pub(in crate::admin) async fn metrics_text(
    axum::extract::State(s): axum::extract::State<crate::admin::AdminState>,
) -> axum::response::Response {
    // Taken at once (shared views, no copy of them), rendered off the runtime's
    // threads: a scrape of 50 000 series is megabytes of text.
    let gauges = AdminGauges {
        status_callers_waiting: s.cp.status_callers_waiting(),
        event_streams: crate::admin::MAX_EVENT_STREAMS - s.event_streams.available_permits(),
        inputs_deferred: s.cp.inputs_deferred(),
    };
    let mut scrape = Scrape::new(
        s.cp.stats(),
        gauges,
        &s.metrics,
        s.cp.fleet_load(),
        s.cp.edge_loads(),
        s.metrics_max_series,
    );
    scrape.cluster = s.cluster_stats.as_ref().map(|c| c.snapshot());
    scrape.remote_load_edges = s.cp.remote_load_edges();
    scrape.placement = s.cp.placement_stats();
    let text = tokio::task::spawn_blocking(move || render(scrape))
        .await
        .unwrap_or_default();
    use axum::response::IntoResponse as _;
    ([(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}
