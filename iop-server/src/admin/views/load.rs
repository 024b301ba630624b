//! The fleet's load in the admin API: `GET /v1/fleet/load` (totals now),
//! `GET /v1/fleet/history` and `GET /v1/edges/{edge_id}/history` (over the last hour).
//! In a cluster any replica answers for the whole fleet: it adds what each live replica
//! answers for its own Edges ([`iop_cluster::Router::fleet_shares`], typed) to its own
//! share; an Edge's history comes from the replica holding it.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, Query, State};
use iop_cluster::RouteErrorKind;
use iop_core::cp::Absence;
use iop_core::proto::cluster;
use iop_tokio::ControlPlaneHandle;
use iop_tokio::fleet::load::{add_history_share, edge_history_message};
use serde_json::{Value, json};

use super::{json as shape, listing};
use crate::admin::AdminState;
use crate::admin::http::error::ApiError;

/// Now, as Unix ms.
pub(in crate::admin) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `edge_id`'s history as this replica keeps it; `None` when it has none.
fn own_edge_history(cp: &ControlPlaneHandle, edge_id: &str) -> Option<cluster::EdgeHistory> {
    let history = cp.edge_history(edge_id)?;
    let view = cp.edge_load(edge_id);
    let every = cp.history_intervals().1.as_millis() as u64;
    let load = view.as_ref().map(|v| &**v.load());
    Some(edge_history_message(edge_id, &history, load, every))
}

/// Whether to ask the other replicas: `scope=fleet` (the default) or `local` (what
/// this Control Plane itself knows).
pub(in crate::admin) fn whole_fleet(query: &HashMap<String, String>) -> Result<bool, ApiError> {
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
pub(in crate::admin) async fn fleet_load(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let fleet = whole_fleet(&query)?;
    let mut whole = s.cp.fleet_load();
    let mut answered = 1;
    let mut asked = 1;
    if let Some(router) = s.router.as_ref().filter(|_| fleet) {
        asked += router.other_replicas().len();
        for share in router.fleet_shares().await {
            whole.add_share(&share);
            answered += 1;
        }
    }
    let mut out = shape::fleet(&whole);
    if let Some(o) = out.as_object_mut() {
        o.insert("asOfUnixMs".into(), unix_ms().into());
        o.insert(
            "replicas".into(),
            json!({"asked": asked, "answered": answered}),
        );
    }
    Ok(Json(out))
}

/// `GET /v1/fleet/history`: the fleet's totals over the last hour, one sample per
/// interval (10 s), summed over the replicas sample by sample.
pub(in crate::admin) async fn fleet_history(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let fleet = whole_fleet(&query)?;
    let every = s.cp.history_intervals().0.as_millis() as u64;
    let mut whole = s.cp.fleet_history();
    if let Some(router) = s.router.as_ref().filter(|_| fleet) {
        for share in router.fleet_history_shares().await {
            add_history_share(&mut whole, &share);
        }
    }
    Ok(Json(shape::fleet_history(&whole, every)))
}

/// `GET /v1/edges/{edge_id}/history`: one Edge's totals over the last hour (one sample
/// per 2 min) and each provider's use (`in_flight / capacity`, `null` while offline).
pub(in crate::admin) async fn edge_history(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if let Some(router) = s
        .router
        .as_ref()
        .filter(|_| !listing::held_here(&s, &edge_id))
    {
        match router.edge_history(&edge_id).await {
            Ok(Some(history)) => return Ok(Json(shape::edge_history(&history))),
            Ok(None) => {}
            Err(e) if e.kind == RouteErrorKind::Absent(Absence::NotConnected) => {}
            Err(e) => return Err(ApiError::from_route(&edge_id, &e)),
        }
    }
    if s.cp.edge(&edge_id).is_none() {
        return Err(ApiError::unknown_edge(&edge_id));
    }
    let history = own_edge_history(&s.cp, &edge_id).unwrap_or_else(|| cluster::EdgeHistory {
        edge_id: edge_id.clone(),
        interval_ms: s.cp.history_intervals().1.as_millis() as u64,
        ..Default::default()
    });
    Ok(Json(shape::edge_history(&history)))
}
