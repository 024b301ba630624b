//! The admin API's route table: each route to the handler of its concern (views,
//! commands and jobs, metrics, the dashboard), behind the access rules; the OpenAPI
//! document; `/healthz`.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::access;
use super::error::ApiError;
use crate::admin::commands::{cancel, jobs, send};
use crate::admin::views::{edges, events, load, placement, watch};
use crate::admin::{AdminState, dashboard, metrics};

/// The admin API's router over `state`, every route behind its access rules
/// ([`access::guard`]).
pub fn router(state: AdminState) -> Router {
    let access = state.access.clone();
    Router::new()
        .route("/v1/edges", get(edges::list_edges))
        .route("/v1/edges/{edge_id}", get(edges::get_edge))
        .route("/v1/edges/{edge_id}/status", get(edges::edge_status))
        .route("/v1/edges/{edge_id}/history", get(load::edge_history))
        .route("/v1/fleet/load", get(load::fleet_load))
        .route("/v1/fleet/history", get(load::fleet_history))
        .route(
            "/v1/placement",
            get(placement::get_placement).post(placement::post_placement),
        )
        .route("/v1/load/watch", get(watch::watch))
        // The body rules sit on the handler of the one method that takes a body, so
        // that a method a route does not have is a plain 405.
        .route(
            "/v1/edges/{edge_id}/commands",
            post(send::post_command).layer(axum::middleware::from_fn(access::body_guard)),
        )
        .route("/v1/commands/{command_id}", get(send::get_command))
        .route(
            "/v1/commands/{command_id}/cancel",
            post(cancel::cancel_command),
        )
        .route(
            "/v1/jobs",
            post(jobs::post_job).layer(axum::middleware::from_fn(access::body_guard)),
        )
        .route("/v1/jobs/{job_id}", get(jobs::get_job))
        .route("/v1/jobs/{job_id}/cancel", post(jobs::cancel_job))
        .route("/v1/events", get(events::events))
        .route("/metrics", get(metrics::metrics_text))
        .route("/healthz", get(healthz))
        .route("/v1/openapi.json", get(openapi))
        .merge(dashboard::router())
        .fallback(not_found)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
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
pub(in crate::admin) const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
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
            for method in ["get(", "post("].iter().filter(|m| rest.contains(*m)) {
                routes.insert((method.trim_end_matches('(').to_owned(), path.clone()));
            }
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
        use iop_core::cp::Ending;
        let endings = [
            iop_tokio::NoAnswer::Ended(Ending::Lost),
            iop_tokio::NoAnswer::Ended(Ending::Undeliverable {
                sessions: 3,
                session_ids: vec![1, 2, 3],
            }),
            iop_tokio::NoAnswer::Ended(Ending::Forgotten),
            iop_tokio::NoAnswer::Ended(Ending::Abandoned {
                disconnected_for: wait,
            }),
            iop_tokio::NoAnswer::Ended(Ending::Unrecorded { reason: "x".into() }),
            iop_tokio::NoAnswer::Ended(Ending::Conflict),
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
                let api = super::ApiError::from_no_answer("e", "c", ending);
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
