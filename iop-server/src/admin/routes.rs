//! The admin API's routes and handlers.

use std::collections::HashMap;
use std::convert::Infallible;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_lite::StreamExt;
use iop_core::cp::{Absence, CommandSpec};
use iop_core::proto::EdgeCommandRequest;
use serde_json::{Value, json};

use super::error::ApiError;
use super::{AdminState, fleet, jobs, json as shape, metrics};
use iop_cluster::RouteErrorKind;
use iop_cluster::events::FleetItem;
use iop_tokio::{Notice, SubscribeOptions};

/// The admin API's router over `state`, every route behind its access rules
/// ([`access::guard`](super::access::guard)).
pub fn router(state: AdminState) -> Router {
    let access = state.access.clone();
    Router::new()
        .route("/v1/edges", get(super::edges::list_edges))
        .route("/v1/edges/{edge_id}", get(super::edges::get_edge))
        .route("/v1/edges/{edge_id}/status", get(super::edges::edge_status))
        .route(
            "/v1/edges/{edge_id}/history",
            get(super::load::edge_history),
        )
        .route("/v1/fleet/load", get(super::load::fleet_load))
        .route("/v1/fleet/history", get(super::load::fleet_history))
        // The body rules sit on the handler of the one method that takes a body, so
        // that a method a route does not have is a plain 405.
        .route(
            "/v1/edges/{edge_id}/commands",
            post(post_command).layer(axum::middleware::from_fn(super::access::body_guard)),
        )
        .route("/v1/commands/{command_id}", get(get_command))
        .route(
            "/v1/commands/{command_id}/cancel",
            post(super::cancel::cancel_command),
        )
        .route(
            "/v1/jobs",
            post(super::jobs::post_job).layer(axum::middleware::from_fn(super::access::body_guard)),
        )
        .route("/v1/jobs/{job_id}", get(super::jobs::get_job))
        .route("/v1/jobs/{job_id}/cancel", post(super::jobs::cancel_job))
        .route("/v1/events", get(events))
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(healthz))
        .route("/v1/openapi.json", get(openapi))
        .merge(super::dashboard::router())
        .fallback(not_found)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            access,
            super::access::guard,
        ))
        .layer(axum::middleware::map_response(no_store))
}

/// Every answer, refusals included: never kept by a cache (fleet data, tokens in
/// requests), and never sniffed into another type than the one it says.
async fn no_store(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    response
}

/// The OpenAPI 3 description of this API (`openapi.json`, checked against the routes
/// by a test, and the responses against it by schemathesis in CI).
pub(super) const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn post_command(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
    headers: axum::http::HeaderMap,
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
    // The caller's idempotency key (PROTOCOL.md §4.4): `commandId`, or the
    // `Idempotency-Key` header (the IETF httpapi draft's name for it).
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::bad_request("Idempotency-Key is not ASCII"))?
                .to_owned(),
        ),
    };
    let command_id = match (request.command_id.as_str(), key) {
        ("", key) => key,
        (id, Some(key)) if key != id => {
            return Err(ApiError::bad_request(
                "`commandId` and the Idempotency-Key header name different commands",
            ));
        }
        (id, _) => Some(id.to_owned()),
    };
    if let Some(id) = &command_id {
        iop_core::ids::validate_id("commandId", id)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    let mut spec = CommandSpec::from_request(request);
    spec.command_id = command_id;
    let (command_id, response) = send_and_answer(&s, &edge_id, spec).await?;
    Ok((
        StatusCode::OK,
        Json(json!({
            "commandId": command_id,
            "edgeId": edge_id,
            "response": response,
        })),
    )
        .into_response())
}

/// Sends `spec` to `edge_id` (from here, or through the replica holding it) and
/// waits for the Edge's answer: the command's id and the answer in JSON.
pub(super) async fn send_and_answer(
    s: &AdminState,
    edge_id: &str,
    spec: CommandSpec,
) -> Result<(String, Value), ApiError> {
    // `timeout_ms` bounds the command's run on the Edge, not its answer: the answer
    // (accepted or rejected) is awaited for `command_answer_timeout`.
    let wait = s.command_answer_timeout;
    if let Some(router) = s.router.as_ref().filter(|_| !fleet::held_here(s, edge_id)) {
        return match router.command(edge_id, spec, wait).await {
            Ok(sent) => Ok((
                sent.command_id,
                serde_json::to_value(&sent.response).unwrap_or(Value::Null),
            )),
            Err(e)
                if e.kind == RouteErrorKind::Absent(Absence::NotConnected)
                    && s.cp.edge(edge_id).is_none() =>
            {
                Err(ApiError::unknown_edge(edge_id))
            }
            Err(e) => Err(ApiError::from_route(edge_id, &e)),
        };
    }
    if s.cp.edge(edge_id).is_none() {
        return Err(ApiError::unknown_edge(edge_id));
    }
    let mut tracker =
        s.cp.send_command(edge_id, spec)
            .map_err(|e| ApiError::from_command(edge_id, &e))?;
    let command_id = tracker.command_id().to_owned();
    let response = tracker
        .first_answer(wait)
        .await
        .map_err(|e| ApiError::from_no_answer(edge_id, &command_id, &e))?;
    let with_id = |e: ApiError| ApiError {
        command_id: Some(command_id.clone()),
        ..e
    };
    // In a cluster the answer goes out once the command's record holds it: a replica
    // that takes the Edge over finds it.
    if let Some(router) = &s.router
        && !router.commands().flushed(edge_id, &command_id).await
    {
        return Err(with_id(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "engine_unavailable",
            format!(
                "the edge answered, but its answer could not be recorded in the cluster \
                 engine; the command stays tracked: GET /v1/commands/{command_id}"
            ),
        )));
    }
    Ok((command_id, shape::command_response(&response)))
}

async fn get_command(
    State(s): State<AdminState>,
    Path(command_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    find_command(&s, &command_id)
        .await?
        .map(|r| Json(shape::command_record(&r)))
        .ok_or_else(|| unknown_command(&command_id))
}

/// The 404 of a command id nobody knows.
pub(super) fn unknown_command(command_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_command",
        format!("no command {command_id:?} is known to this control plane"),
    )
}

/// A command's record: this replica's, or in a cluster the engine's.
pub(super) async fn find_command(
    s: &AdminState,
    command_id: &str,
) -> Result<Option<iop_tokio::CommandRecord>, ApiError> {
    let mut record = s.cp.command(command_id);
    // Not sent from here (this replica could not record it, and a retry of its
    // caller's went through another) says nothing of the command itself.
    let not_sent_here = record
        .as_ref()
        .is_some_and(|r| r.outcome == Some(iop_core::cp::CommandOutcome::Unrecorded));
    if (record.is_none() || not_sent_here)
        && let Some(router) = &s.router
    {
        // Sent by another replica, or by one that is gone: the cluster's record.
        let stored = router
            .commands()
            .get(command_id)
            .await
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e.0))?;
        record = stored.or(record);
    }
    Ok(record)
}

async fn events(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    // In a cluster each event's id is its place on the fleet's stream: a client that
    // reconnects (`Last-Event-ID`, as EventSource sends it, or `?since=`) resumes after
    // it, or is told how many it missed.
    let after = match headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(query.get("since").map(String::as_str))
    {
        None => None,
        Some(id) => Some(id.trim().parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("event id {id:?} is not an event id this API gave"))
        })?),
    };
    // Job progress comes from this API's jobs, not from the control plane's events.
    let job_progress = query
        .get("kinds")
        .is_none_or(|list| list.split(',').any(|name| name == jobs::JOB_PROGRESS));
    let progress = job_progress.then(|| s.jobs.subscribe());
    let kinds = match query.get("kinds") {
        None => shape::STREAM_KINDS.iter().map(|(_, k)| *k).collect(),
        Some(list) => list
            .split(',')
            .filter(|name| !name.is_empty() && *name != jobs::JOB_PROGRESS)
            .map(|name| {
                shape::stream_kind(name).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "unknown event kind {name:?}; kinds: {}",
                        shape::STREAM_KINDS
                            .iter()
                            .map(|(n, _)| *n)
                            .chain([jobs::JOB_PROGRESS])
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let Ok(slot) = s.event_streams.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!(
                "{} event streams are open already",
                super::MAX_EVENT_STREAMS
            ),
        ));
    };
    if let Some(router) = &s.router {
        // In a cluster, every replica's events come from the engine, each once.
        let names: Vec<&'static str> = shape::STREAM_KINDS
            .iter()
            .filter(|(_, k)| kinds.contains(k))
            .map(|(n, _)| *n)
            .collect();
        let fleet = router
            .events(after)
            .await
            .map_err(|e| ApiError::from_route("", &e))?;
        let stream = fleet
            .filter(move |item| match item {
                FleetItem::Event { name, .. } => names.contains(&name.as_str()),
                FleetItem::Missed { .. } => true,
            })
            .map(move |item| {
                // The stream's place is held while it is open.
                let _held = &slot;
                Ok::<_, Infallible>(match item {
                    FleetItem::Event {
                        sequence,
                        name,
                        data,
                    } => Event::default()
                        .id(sequence.to_string())
                        .event(name)
                        .data(data.to_string()),
                    FleetItem::Missed { count } => Event::default()
                        .event("missed")
                        .data(json!({ "missed": count.to_string() }).to_string()),
                })
            });
        return Ok(Sse::new(until_revoked(
            &s,
            &headers,
            woven(Box::pin(stream), progress),
        ))
        .keep_alive(KeepAlive::default())
        .into_response());
    }
    // Only the kinds asked for are ever copied for this stream (a status answer never
    // is), within a byte budget.
    let options = SubscribeOptions::default()
        .kinds(kinds)
        .byte_budget(s.event_stream_bytes);
    let subscription = s.cp.subscribe_with(options);
    let stream = futures_lite::stream::unfold(Some((subscription, slot)), |open| async move {
        let (mut subscription, slot) = open?;
        loop {
            match subscription.next().await? {
                Notice::Event(e) => {
                    if let Some((name, data)) = shape::cp_event(&e) {
                        let event = Event::default().event(name).data(data.to_string());
                        return Some((Ok::<_, Infallible>(event), Some((subscription, slot))));
                    }
                }
                // Too slow: told, then ended (its place freed); the client reconnects
                // and reloads rather than trusting a view with holes.
                Notice::Lagged(n) => {
                    let data = json!({ "dropped": n.to_string() }).to_string();
                    return Some((Ok(Event::default().event("lagged").data(data)), None));
                }
                _ => {}
            }
        }
    });
    Ok(Sse::new(until_revoked(
        &s,
        &headers,
        woven(Box::pin(stream), progress),
    ))
    .keep_alive(KeepAlive::default())
    .into_response())
}

type EventStream =
    std::pin::Pin<Box<dyn futures_lite::Stream<Item = Result<Event, Infallible>> + Send>>;

/// `stream` with the jobs' progress in it, when the client asked for it.
fn woven(
    stream: EventStream,
    progress: Option<tokio::sync::broadcast::Receiver<Value>>,
) -> EventStream {
    match progress {
        Some(progress) => Box::pin(jobs::with_progress(stream, progress)),
        None => stream,
    }
}

/// `stream`, ended once the token it was opened with is no longer in force.
fn until_revoked<S>(
    s: &AdminState,
    headers: &axum::http::HeaderMap,
    stream: S,
) -> std::pin::Pin<Box<dyn futures_lite::Stream<Item = S::Item> + Send>>
where
    S: futures_lite::Stream + Send + Unpin + 'static,
{
    match (&s.access.tokens, super::access::bearer_of(headers)) {
        (Some(book), Some(token)) => Box::pin(book.until_revoked(stream, token.to_vec())),
        _ => Box::pin(stream),
    }
}

async fn metrics_text(State(s): State<AdminState>) -> Response {
    // Taken at once (shared views, no copy of them), rendered off the runtime's
    // threads: a scrape of 50 000 series is megabytes of text.
    let gauges = metrics::AdminGauges {
        status_callers_waiting: s.cp.status_callers_waiting(),
        event_streams: super::MAX_EVENT_STREAMS - s.event_streams.available_permits(),
    };
    let mut scrape = metrics::Scrape::new(
        s.cp.stats(),
        gauges,
        &s.metrics,
        s.cp.fleet_load(),
        s.cp.edge_loads(),
        s.metrics_max_series,
    );
    scrape.cluster = s.cluster_stats.as_ref().map(|c| c.snapshot());
    let text = tokio::task::spawn_blocking(move || metrics::render(scrape))
        .await
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
}

async fn healthz(State(s): State<AdminState>) -> Response {
    let mut body = if s.cp.is_draining() {
        json!({ "status": "draining" })
    } else {
        json!({ "status": "ok" })
    };
    if let (Some(cluster), Some(obj)) = (&s.cluster_stats, body.as_object_mut()) {
        let snapshot = cluster.snapshot();
        let engine = if snapshot.fenced {
            "fenced"
        } else if snapshot.engine_up {
            "ok"
        } else {
            "degraded"
        };
        obj.insert("cluster".into(), Value::String(engine.into()));
    }
    if let (false, Some(obj)) = (s.warnings.is_empty(), body.as_object_mut()) {
        obj.insert("warnings".into(), json!(s.warnings));
    }
    let status = if s.cp.is_draining() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// `(method, path)` of every route this file builds, read from its source.
    fn routes_in_source() -> BTreeSet<(String, String)> {
        let source = include_str!("routes.rs");
        let body = source.split("#[cfg(test)]").next().unwrap_or_default();
        let mut routes = BTreeSet::new();
        for chunk in body.split(".route(").skip(1) {
            let path = chunk.split('"').nth(1).unwrap_or_default().to_owned();
            let rest = chunk.split('"').nth(2).unwrap_or_default();
            let method = ["get(", "post("]
                .iter()
                .filter_map(|m| rest.find(m).map(|at| (at, m.trim_end_matches('('))))
                .min()
                .map(|(_, m)| m.to_owned())
                .unwrap_or_default();
            routes.insert((method, path));
        }
        routes
    }

    #[test]
    fn the_openapi_document_names_every_error_code_and_every_ending_of_a_command() {
        let doc: serde_json::Value = serde_json::from_str(super::OPENAPI).unwrap();
        let codes = doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]
            ["code"]["description"]
            .as_str()
            .unwrap();
        let listed = |code: &str| codes.split([' ', ',', '.', ':']).any(|word| word == code);
        for (_, code) in iop_cluster::RouteErrorKind::all() {
            assert!(listed(code), "the Error schema does not list {code}");
        }
        let admin_only = [
            "already_finished",
            "not_cancellable",
            "unknown_job",
            "not_found",
        ];
        for code in admin_only {
            assert!(listed(code), "the Error schema does not list {code}");
        }
        // Every way a command can go unanswered is a documented response of the routes
        // that wait for its answer.
        let wait = std::time::Duration::from_secs(1);
        let endings = [
            iop_tokio::NoAnswer::Lost,
            iop_tokio::NoAnswer::Undeliverable {
                sessions: 3,
                session_ids: vec![1, 2, 3],
            },
            iop_tokio::NoAnswer::Forgotten,
            iop_tokio::NoAnswer::Abandoned {
                disconnected_for: wait,
            },
            iop_tokio::NoAnswer::Unrecorded { reason: "x".into() },
            iop_tokio::NoAnswer::Conflict,
            iop_tokio::NoAnswer::Stopped,
            iop_tokio::NoAnswer::Untracked,
            iop_tokio::NoAnswer::TimedOut { wait },
        ];
        for route in [
            "/v1/edges/{edge_id}/commands",
            "/v1/commands/{command_id}/cancel",
        ] {
            let responses = &doc["paths"][route]["post"]["responses"];
            for ending in &endings {
                let api = super::super::error::ApiError::from_no_answer("e", "c", ending);
                let status = api.status.as_u16().to_string();
                assert!(
                    responses.get(&status).is_some(),
                    "POST {route} does not document {status} ({ending:?})"
                );
            }
        }
    }

    #[test]
    fn the_openapi_document_describes_exactly_the_routes() {
        let doc: serde_json::Value = serde_json::from_str(super::OPENAPI).unwrap();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                documented.insert((method.clone(), path.clone()));
            }
        }
        let routes = routes_in_source();
        assert!(routes.len() >= 9, "{routes:?}");
        assert_eq!(documented, routes);
    }
}
