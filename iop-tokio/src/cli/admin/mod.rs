//! The control plane's admin HTTP API (axum), JSON per the protobuf JSON mapping.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/edges` | `{"edges": [view...]}` every Edge known, connected or not |
//! | `GET /v1/edges/{edge_id}` | one Edge's view (404 unknown) |
//! | `GET /v1/edges/{edge_id}/status` | a live status round trip: the Edge's `EdgeStatusResponse` (`?nodes=a,b` for some nodes) |
//! | `POST /v1/edges/{edge_id}/commands` | body `{"operation", "targetSelector", "metadata", "timeoutMs"}` (snake_case names accepted too): sends the command, waits for the Edge's answer, returns `{"commandId", "edgeId", "response"}` |
//! | `GET /v1/commands/{command_id}` | the command's response, every event so far, latest phase, outcome |
//! | `GET /v1/events` | server-sent events: `edge_connected`, `edge_disconnected`, `edge_unreachable`, `edge_reachable`, `edge_superseded`, `node_event`, `command_event`, `lagged` |
//! | `GET /metrics` | Prometheus text |
//! | `GET /healthz` | `{"status": "ok"}` (503 `draining` once draining) |
//!
//! Errors are `{"error": {"code", "message"}}`: 400 `bad_request` /
//! `unknown_operation`, 404 `unknown_edge` / `unknown_command` / `not_found`, 409
//! `not_connected`, 503 `busy` / `session_ended` / `shutting_down`, 504 `timeout`.

mod error;
mod json;
mod metrics;
mod routes;

use std::sync::Arc;
use std::time::Duration;

pub use error::ApiError;
pub use json::{command_record, command_response, cp_event, edge_view};
pub use metrics::{AdminMetrics, Histogram, render as render_metrics};
pub use routes::router;

use crate::ControlPlaneHandle;

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
}

impl AdminState {
    /// State over `cp` with a 10 s command answer wait.
    pub fn new(cp: ControlPlaneHandle) -> Self {
        Self {
            cp,
            metrics: Arc::new(AdminMetrics::default()),
            command_answer_timeout: Duration::from_secs(10),
        }
    }
}
