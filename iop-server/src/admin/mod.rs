//! The control plane's admin HTTP API (axum), JSON per the protobuf JSON mapping.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/edges` | `{"edges": [view...], "total"}` every Edge known, connected or not, each with a summary of its load (`load`); with `--cluster` every replica's, unless `?scope=local` (this replica's own only); a page of them with `?limit=N&after=ID` (`next` when more follow), filtered by `?state=connected,unreachable,disconnected` and `?q=TEXT` |
//! | `GET /v1/edges/{edge_id}` | one Edge's view (404 unknown), with its load's nodes and providers (`loadView`) and its age (`loadAgeMs`) |
//! | `GET /v1/edges/{edge_id}/status` | a live status round trip: the Edge's `EdgeStatusResponse` (`?nodes=a,b` for some nodes; every node paged together) |
//! | `GET /v1/edges/{edge_id}/history` | the Edge's totals over the last hour, a sample per 2 min, and each provider's use |
//! | `GET /v1/fleet/load` | the fleet's load now: capacity, in flight, queued, long-context numbers, room and offline capacity, in total, by category, model and label; nodes by state (with `--cluster` every replica's share summed, unless `?scope=local`) |
//! | `GET /v1/fleet/history` | the fleet's totals over the last hour, a sample per 10 s |
//! | `POST /v1/edges/{edge_id}/commands` | body `{"operation", "targetSelector", "metadata", "timeoutMs"}` (snake_case names accepted too): sends the command, waits for the Edge's answer, returns `{"commandId", "edgeId", "response"}` |
//! | `GET /v1/commands/{command_id}` | the command's response, every event so far, latest phase, outcome |
//! | `POST /v1/commands/{command_id}/cancel` | asks the Edge to stop the command (`command.cancel`, PROTOCOL.md §4.4), waits for its answer to the cancellation, returns `{"commandId" (the cancellation's: the target's id with `.cancel`), "edgeId", "cancels", "response"}`; 409 `already_finished` (with its `record`), 422 `not_cancellable` |
//! | `POST /v1/jobs` | body `{"jobId"?, "operation", "targetSelector", "metadata", "timeoutMs", "edges" ("*", ids, `meta:K=V`, `version:V`), "maxConcurrent" (10), "maxFailures" (0), "offline" ("skip" or "wait"), "offlineWaitMs"}`: starts a fleet-wide job (the same `jobId` and content again: that job; other content: 409 `conflict`), returns its summary |
//! | `GET /v1/jobs/{job_id}` | the summary (`state`, `stopped`, `progress`) and a page of per-Edge runs (`?after=EDGE&limit=N`, `next`) |
//! | `POST /v1/jobs/{job_id}/cancel` | no more Edges start, the running commands are cancelled |
//! | `GET /v1/events` | server-sent events: `edge_connected`, `edge_disconnected`, `edge_unreachable`, `edge_reachable`, `edge_superseded`, `node_event`, `command_event`, `command_ended` (a command ended without its Edge's word: `ending` is `command_lost`, `undeliverable`, `abandoned`, ...), `edge_forgotten`, `job_progress` (`?kinds=node_event,command_event` for some), then `lagged` and the end if the client reads too slowly; with `--cluster` each event's `id` is its place on the fleet's stream, and `Last-Event-ID` (or `?since=ID`) resumes after it, `missed` first saying how many the stream no longer holds |
//! | `GET /metrics` | OpenMetrics text: the protocol's counters, the fleet's load by category, model and label, each Edge's and each provider's numbers while under `--metrics-max-series` |
//! | `GET /` | the fleet dashboard, a page over this API ([`dashboard`]) |
//! | `GET /healthz` | `{"status": "ok"}` (503 `draining` once draining); with `--cluster` also `"cluster": "ok"`, `"degraded"` (the engine is unreachable: this replica serves its Edges, refuses new ones `OVERLOADED`) or `"fenced"` (another process runs with this `--replica-id`: this one decides no more claims) |
//!
//! Errors are `{"error": {"code", "message"}}`: 400 `bad_request` /
//! `unknown_operation` / `exceeds_limit` (with `field`, `size`, `limit`), 401
//! `unauthorized`, 403 `forbidden` / `forbidden_host` / `forbidden_origin`, 404
//! `unknown_edge` / `unknown_command` / `not_found`, 409 `not_connected` /
//! `conflict` / `already_finished`, 422 `undeliverable` / `not_cancellable`, 413
//! `payload_too_large`, 415 `unsupported_media_type`, 503 `busy` / `session_ended` /
//! `shutting_down` / `too_many_streams`, 504 `timeout`. Who may call what, and from
//! where, is [`access`].

mod commands;
pub mod dashboard;
pub mod http;
mod metrics;
mod views;

pub use commands::jobs::JobBook;
pub use commands::json::{command_record, command_response};
pub use http::serve;
pub use http::{access, tokens};
pub use views::events::{STREAM_KINDS, cp_event, stream_kind};
pub use views::json::edge_view;

use std::sync::Arc;
use std::time::Duration;

pub use http::access::{AdminAccess, AdminTokens, Role};
pub use http::error::ApiError;
pub use http::routes::router;
pub use http::tokens::TokenBook;
pub use metrics::{
    AdminGauges, AdminMetrics, CONTENT_TYPE as METRICS_CONTENT_TYPE, Histogram, Scrape,
    render as render_metrics,
};

/// The OpenAPI 3 description of the admin API, served at `GET /v1/openapi.json`.
pub const OPENAPI: &str = http::routes::OPENAPI;
pub use serve::AdminServerConfig;

use iop_tokio::ControlPlaneHandle;

/// The default of [`AdminState::metrics_max_series`].
pub const DEFAULT_METRICS_MAX_SERIES: usize = 50_000;

/// Event streams (`GET /v1/events`) open at once, past which a new one is 503.
pub const MAX_EVENT_STREAMS: usize = 64;

/// What every admin request needs.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// The control plane.
    pub cp: ControlPlaneHandle,
    /// The admin layer's own measurements.
    pub metrics: Arc<AdminMetrics>,
    /// How long `POST .../commands` waits for the Edge's answer (when the body gives
    /// no `timeoutMs`).
    pub command_answer_timeout: Duration,
    /// Who may use the API, and from where.
    pub access: Arc<AdminAccess>,
    /// Places for event streams ([`MAX_EVENT_STREAMS`]).
    pub event_streams: Arc<tokio::sync::Semaphore>,
    /// Bytes of events one stream may hold undelivered; past it the stream gets a
    /// `lagged` event and ends (the client reconnects and reloads).
    pub event_stream_bytes: usize,
    /// This Control Plane's replica id in a cluster (`--replica-id`): the `replica` of
    /// the Edges whose live session it holds.
    pub replica_id: Option<String>,
    /// The cluster's router (`--cluster`): Edges held by other replicas are reached
    /// through it.
    pub router: Option<iop_cluster::Router>,
    /// The cluster replica's counters: `/healthz` says whether the engine is
    /// reachable, `/metrics` shows them.
    pub cluster_stats: Option<Arc<iop_cluster::ClusterStats>>,
    /// What the operator should fix, said at start and by `/healthz` (`warnings`):
    /// admin tokens over plain HTTP on a network, say.
    pub warnings: Vec<String>,
    /// The jobs started through `POST /v1/jobs`.
    pub jobs: Arc<JobBook>,
    /// The most per-Edge and per-provider series `/metrics` shows
    /// (`--metrics-max-series`); past it the per-provider ones go, then the per-Edge
    /// ones.
    pub metrics_max_series: usize,
}

impl AdminState {
    /// State over `cp` with a 10 s command answer wait, no tokens (for a loopback
    /// address), 64 event streams of 4 MiB each.
    pub fn new(cp: ControlPlaneHandle) -> Self {
        Self::with_access(cp, AdminAccess::default())
    }

    /// State over `cp` with `access`.
    pub fn with_access(cp: ControlPlaneHandle, access: AdminAccess) -> Self {
        Self {
            cp,
            metrics: Arc::new(AdminMetrics::default()),
            command_answer_timeout: Duration::from_secs(10),
            access: Arc::new(access),
            event_streams: Arc::new(tokio::sync::Semaphore::new(MAX_EVENT_STREAMS)),
            event_stream_bytes: 4 * 1024 * 1024,
            replica_id: None,
            router: None,
            cluster_stats: None,
            warnings: Vec::new(),
            jobs: Arc::new(JobBook::default()),
            metrics_max_series: DEFAULT_METRICS_MAX_SERIES,
        }
    }
}
