//! The admin API's routes and handlers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_lite::{Stream, StreamExt};
use iop_core::cp::CommandSpec;
use iop_core::proto::EdgeCommandRequest;
use serde_json::{Value, json};

use super::error::ApiError;
use super::{AdminState, json as shape, metrics};
use crate::{CommandUpdate, Notice};

/// The admin API's router over `state`.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/v1/edges", get(list_edges))
        .route("/v1/edges/{edge_id}", get(get_edge))
        .route("/v1/edges/{edge_id}/status", get(edge_status))
        .route("/v1/edges/{edge_id}/commands", post(post_command))
        .route("/v1/commands/{command_id}", get(get_command))
        .route("/v1/events", get(events))
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn list_edges(State(s): State<AdminState>) -> Json<Value> {
    let edges: Vec<Value> = s.cp.edges().iter().map(shape::edge_view).collect();
    Json(json!({ "edges": edges }))
}

async fn get_edge(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    s.cp.edge(&edge_id)
        .map(|v| Json(shape::edge_view(&v)))
        .ok_or_else(|| ApiError::unknown_edge(&edge_id))
}

async fn edge_status(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    if s.cp.edge(&edge_id).is_none() {
        return Err(ApiError::unknown_edge(&edge_id));
    }
    let nodes: Vec<String> = query
        .get("nodes")
        .map(|n| {
            n.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let started = Instant::now();
    let result = s.cp.request_status(&edge_id, nodes).await;
    let took = started.elapsed();
    match result {
        Ok(status) => {
            s.metrics.status_ok.observe(took);
            Ok(Json(serde_json::to_value(&status).unwrap_or(Value::Null)))
        }
        Err(e) => {
            s.metrics.status_failed.observe(took);
            Err(ApiError::from_status(&edge_id, &e))
        }
    }
}

async fn post_command(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    // The body is an `EdgeCommandRequest` in the protobuf JSON mapping (which also
    // accepts the proto field names, e.g. `target_selector`).
    let request: EdgeCommandRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid command body: {e}")))?;
    if request.operation.is_empty() {
        return Err(ApiError::bad_request(
            "invalid command body: `operation` is required",
        ));
    }
    if !request.command_id.is_empty() {
        return Err(ApiError::bad_request(
            "invalid command body: `commandId` is chosen by the control plane",
        ));
    }
    if s.cp.edge(&edge_id).is_none() {
        return Err(ApiError::unknown_edge(&edge_id));
    }
    // `timeout_ms` bounds the command's run on the Edge, not its answer: the answer
    // (accepted or rejected) is awaited for `command_answer_timeout`.
    let wait = s.command_answer_timeout;
    let mut spec = CommandSpec::new(request.operation)
        .with_target(request.target_selector)
        .with_timeout_ms(request.timeout_ms);
    spec.metadata = request.metadata;
    let mut tracker =
        s.cp.send_command(&edge_id, spec)
            .map_err(|e| ApiError::from_command(&edge_id, &e))?;
    let command_id = tracker.command_id().to_owned();
    let first = tokio::time::timeout(wait, async {
        while let Some(update) = tracker.next().await {
            match update {
                CommandUpdate::Response(r) => return Some(Some(r)),
                CommandUpdate::Lost => return Some(None),
                _ => {}
            }
        }
        None
    })
    .await;
    match first {
        Ok(Some(Some(response))) => Ok((
            StatusCode::OK,
            Json(json!({
                "commandId": command_id,
                "edgeId": edge_id,
                "response": shape::command_response(&command_id, &response),
            })),
        )
            .into_response()),
        Ok(Some(None)) => Err(ApiError {
            command_id: Some(command_id),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "command_lost",
                "the edge reconnected without the command: it was lost",
            )
        }),
        Ok(None) => Err(ApiError {
            command_id: Some(command_id),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the control plane stopped before the edge answered",
            )
        }),
        Err(_) => Err(ApiError {
            command_id: Some(command_id.clone()),
            ..ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                format!(
                    "edge {edge_id:?} did not answer command {command_id} within {} ms; \
                     it stays tracked: GET /v1/commands/{command_id}",
                    wait.as_millis()
                ),
            )
        }),
    }
}

async fn get_command(
    State(s): State<AdminState>,
    Path(command_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    s.cp.command(&command_id)
        .map(|r| Json(shape::command_record(&r)))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_command",
                format!("no command {command_id:?} is known to this control plane"),
            )
        })
}

async fn events(State(s): State<AdminState>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream =
        s.cp.subscribe()
            .filter_map(|notice| match notice {
                Notice::Event(e) => shape::cp_event(&e)
                    .map(|(name, data)| Event::default().event(name).data(data.to_string())),
                Notice::Lagged(n) => Some(
                    Event::default()
                        .event("lagged")
                        .data(json!({ "dropped": n.to_string() }).to_string()),
                ),
                _ => None,
            })
            .map(Ok);
    Sse::new(stream).keep_alive(KeepAlive::default())
}

async fn metrics_text(State(s): State<AdminState>) -> Response {
    // Counts only: no copy of every Edge's view per scrape.
    let text = metrics::render(&s.cp.stats(), s.cp.status_callers_waiting(), &s.metrics);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn healthz(State(s): State<AdminState>) -> Response {
    if s.cp.is_draining() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "draining" })),
        )
            .into_response()
    } else {
        Json(json!({ "status": "ok" })).into_response()
    }
}
