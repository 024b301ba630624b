//! The Edges: the list (paged, filtered), one Edge's view with its load, and a live
//! status round trip to it.

use std::collections::HashMap;
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, Query, State};
use serde_json::{Value, json};

use iop_core::cp::Reachability;
use iop_tokio::fleet::EdgeFilter;

use super::listing as fleet;
use super::{json as shape, load};
use crate::admin::AdminState;
use crate::admin::http::error::ApiError;

/// The most Edges one page of the list holds.
pub(in crate::admin) const MAX_EDGE_PAGE: usize = 1_000;

/// `GET /v1/edges`: every Edge, or one page of them (`limit`, `after`: the last Edge id
/// of the page before), of those in a state (`state=connected,unreachable`) or whose
/// id, version, metadata or replica holds a text (`q`, any case); `total` counts the
/// Edges that pass the filters, `next` is the id to ask `after` when more follow. In a
/// cluster a page is asked of every replica at once with the same filter and cursor;
/// one that does not answer within a second is named (`silentReplicas`, `partial`).
pub(in crate::admin) async fn list_edges(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let limit = match query.get("limit") {
        None => None,
        Some(n) => match n.parse::<usize>() {
            Ok(n) if (1..=MAX_EDGE_PAGE).contains(&n) => Some(n),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "limit {n:?}: a number from 1 to {MAX_EDGE_PAGE}"
                )));
            }
        },
    };
    let states = match query.get("state") {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|state| match state {
                "connected" => Ok(Reachability::Connected),
                "unreachable" => Ok(Reachability::Unreachable),
                "disconnected" => Ok(Reachability::Disconnected),
                bad => Err(ApiError::bad_request(format!(
                    "state {bad:?}: use connected, unreachable or disconnected"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let filter = EdgeFilter::new(
        states,
        query.get("q").map(String::as_str).unwrap_or_default(),
    );
    let after = query.get("after").map(String::as_str).unwrap_or_default();
    let whole = load::whole_fleet(&query)?;
    let replica = s.replica_id.as_deref();
    let page = match (&s.router, limit) {
        // A page: each replica sends its own for the same filter and cursor.
        (Some(router), Some(limit)) if whole => {
            fleet::fleet_page(&s, router, &filter, after, limit).await
        }
        _ => {
            let all = if whole {
                fleet::edges(&s).await
            } else {
                fleet::local_edges(&s)
            };
            fleet::page_of(all, &filter, after, limit, replica)
        }
    };
    // Only the page is written as JSON.
    let edges: Vec<Value> = page.edges.into_iter().map(|e| e.render(&s)).collect();
    // More follow: the next page starts after this one's last Edge.
    let next = edges
        .last()
        .filter(|_| page.more)
        .map(|v| v["edgeId"].clone());
    let mut out = json!({ "edges": edges, "total": page.total });
    if let Some(o) = out.as_object_mut() {
        if let Some(next) = next {
            o.insert("next".into(), next);
        }
        if !page.silent.is_empty() {
            o.insert("partial".into(), true.into());
            o.insert("silentReplicas".into(), page.silent.into());
        }
    }
    Ok(Json(out))
}

/// `GET /v1/edges/{edge_id}`: the view (with its load's summary, `load`), its load's
/// nodes and providers (`loadView`) and how old that is (`loadAgeMs`).
pub(in crate::admin) async fn get_edge(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let listed = fleet::edge(&s, &edge_id)
        .await?
        .ok_or_else(|| ApiError::unknown_edge(&edge_id))?;
    let mut view = shape::listed_edge(&listed);
    let local = s.cp.edge_load(&edge_id);
    let load = match (&s.router, local) {
        (None, local) => local,
        (Some(_), Some(load)) if fleet::held_here(&s, &edge_id) => Some(load),
        // Held by another replica: its view of the load, else the last one here.
        (Some(router), local) => match router.edge_load(&edge_id).await {
            Ok(Some(remote)) => Some(remote),
            _ => local,
        },
    };
    if let (Some(load), Some(o)) = (load, view.as_object_mut()) {
        o.insert(
            "loadAgeMs".into(),
            load::unix_ms()
                .saturating_sub(load.received_at_unix_ms())
                .into(),
        );
        o.insert("loadView".into(), shape::edge_load(&load));
    }
    Ok(Json(view))
}

/// `GET /v1/edges/{edge_id}/status`: a live status round trip.
pub(in crate::admin) async fn edge_status(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let nodes: Vec<String> = query
        .get("nodes")
        .map(|n| {
            n.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if let Some(router) = s
        .router
        .as_ref()
        .filter(|_| !fleet::held_here(&s, &edge_id))
    {
        // Held by another replica, or by none (answered at once).
        return match router.status(&edge_id, nodes).await {
            Ok(status) => Ok(Json(serde_json::to_value(&status).unwrap_or(Value::Null))),
            // Not connected when some replica ever recorded the Edge, unknown
            // otherwise (PROTOCOL.md §8): the router reads the records.
            Err(e) => Err(ApiError::from_route(&edge_id, &e)),
        };
    }
    if s.cp.edge(&edge_id).is_none() {
        return Err(ApiError::unknown_edge(&edge_id));
    }
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
