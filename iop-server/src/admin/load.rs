//! The fleet's load in the admin API: `GET /v1/fleet/load` (totals now),
//! `GET /v1/fleet/history` and `GET /v1/edges/{edge_id}/history` (over the last hour).
//! In a cluster any replica answers for the whole fleet: it sums what each live replica
//! answers for its own Edges ([`iop_cluster::Router::load_of_others`]) with its own
//! share; an Edge's history comes from the replica holding it.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, Query, State};
use iop_cluster::{LoadQuery, RouteErrorKind};
use iop_core::cp::Absence;
use iop_tokio::ControlPlaneHandle;
use serde_json::{Value, json};

use super::error::ApiError;
use super::{AdminState, fleet, load_json};

/// The most samples a history answer holds (a day of 10 s samples).
pub(super) const MAX_SAMPLES: usize = 8_640;

/// Now, as Unix ms.
pub(super) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Answers other replicas' load queries for this replica's Control Plane `cp`, in the
/// admin API's shape ([`iop_cluster::Replica::serve_load`]).
pub fn load_encoder(
    cp: ControlPlaneHandle,
) -> impl Fn(LoadQuery<'_>) -> Option<Value> + Send + Sync {
    move |query| match query {
        LoadQuery::Fleet => Some(load_json::fleet(&cp.fleet_load())),
        LoadQuery::FleetHistory => {
            let every = cp.history_intervals().0.as_millis() as u64;
            Some(load_json::fleet_history(&cp.fleet_history(), every))
        }
        LoadQuery::Edge(edge_id) => cp
            .edge_load(edge_id)
            .map(|load| load_json::edge_load(&load)),
        LoadQuery::EdgeHistory(edge_id) => own_edge_history(&cp, edge_id),
        _ => None,
    }
}

fn own_edge_history(cp: &ControlPlaneHandle, edge_id: &str) -> Option<Value> {
    let history = cp.edge_history(edge_id)?;
    let view = cp.edge_load(edge_id);
    let every = cp.history_intervals().1.as_millis() as u64;
    Some(load_json::edge_history(
        edge_id,
        &history,
        view.as_ref().map(|v| &**v.load()),
        every,
    ))
}

/// Whether to ask the other replicas: `scope=fleet` (the default) or `local` (what
/// this Control Plane itself knows).
pub(super) fn whole_fleet(query: &HashMap<String, String>) -> Result<bool, ApiError> {
    match query.get("scope").map(String::as_str) {
        None | Some("fleet") => Ok(true),
        Some("local") => Ok(false),
        Some(other) => Err(ApiError::bad_request(format!(
            "scope {other:?}: use fleet (every replica's, the default) or local"
        ))),
    }
}

/// `GET /v1/fleet/load`: the fleet's totals now, by category, model and label, with
/// how many replicas answered for their share (`replicas`).
pub(super) async fn fleet_load(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let fleet = whole_fleet(&query)?;
    let mut whole = load_json::fleet(&s.cp.fleet_load());
    let mut answered = 1;
    let mut asked = 1;
    if let Some(router) = s.router.as_ref().filter(|_| fleet) {
        asked += router.other_replicas().len();
        for share in router.load_of_others(LoadQuery::Fleet).await {
            load_json::add_shares(&mut whole, &share);
            answered += 1;
        }
    }
    if let Some(o) = whole.as_object_mut() {
        o.insert("asOfUnixMs".into(), unix_ms().into());
        o.insert(
            "replicas".into(),
            json!({"asked": asked, "answered": answered}),
        );
    }
    Ok(Json(whole))
}

/// `GET /v1/fleet/history`: the fleet's totals over the last hour, one sample per
/// interval (10 s), summed over the replicas sample by sample.
pub(super) async fn fleet_history(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let fleet = whole_fleet(&query)?;
    let every = s.cp.history_intervals().0.as_millis() as u64;
    let mut whole = load_json::fleet_history(&s.cp.fleet_history(), every);
    if let Some(router) = s.router.as_ref().filter(|_| fleet) {
        for share in router.load_of_others(LoadQuery::FleetHistory).await {
            load_json::add_histories(&mut whole, &share);
        }
    }
    Ok(Json(whole))
}

/// `GET /v1/edges/{edge_id}/history`: one Edge's totals over the last hour (one sample
/// per 2 min) and each provider's use (`in_flight / capacity`, `null` while offline).
pub(super) async fn edge_history(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if let Some(router) = s
        .router
        .as_ref()
        .filter(|_| !fleet::held_here(&s, &edge_id))
    {
        match router.edge_load(LoadQuery::EdgeHistory(&edge_id)).await {
            Ok(Some(history)) => return Ok(Json(history)),
            Ok(None) => {}
            Err(e) if e.kind == RouteErrorKind::Absent(Absence::NotConnected) => {}
            Err(e) => return Err(ApiError::from_route(&edge_id, &e)),
        }
    }
    if s.cp.edge(&edge_id).is_none() {
        return Err(ApiError::unknown_edge(&edge_id));
    }
    let every = s.cp.history_intervals().1.as_millis() as u64;
    Ok(Json(own_edge_history(&s.cp, &edge_id).unwrap_or_else(
        || json!({"edgeId": edge_id, "intervalMs": every, "samples": [], "providers": []}),
    )))
}
