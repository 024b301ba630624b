//! The admin API over a cluster (`--cluster`): an Edge held by another replica is
//! listed, read, asked for its status and sent commands through that replica
//! ([`iop_cluster::Router`]); without a cluster, or for an Edge this Control Plane
//! holds, everything stays local.

use iop_core::cp::{EdgeView, Reachability};
use serde_json::Value;

use super::error::ApiError;
use super::{AdminState, json as shape};

/// An Edge's view, with the replica holding its live session in a cluster.
pub(super) fn local_view(s: &AdminState, v: &EdgeView) -> Value {
    let mut out = shape::edge_view(v);
    if let (Some(replica), Some(obj)) = (&s.replica_id, out.as_object_mut())
        && v.reachability != Reachability::Disconnected
    {
        obj.insert("replica".into(), Value::String(replica.clone()));
    }
    out
}

/// Whether this Control Plane holds a live session of `edge_id`.
pub(super) fn held_here(s: &AdminState, edge_id: &str) -> bool {
    s.cp.edge(edge_id)
        .is_some_and(|v| v.reachability != Reachability::Disconnected)
}

fn session_of(view: &Value) -> u64 {
    view["sessionId"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Every Edge known here, and every Edge another replica holds (its view replacing
/// a disconnected one here; of two live ones, the newer session's).
pub(super) async fn edges(s: &AdminState) -> Vec<Value> {
    let mut all: Vec<Value> = s.cp.edges().iter().map(|v| local_view(s, v)).collect();
    let Some(router) = &s.router else {
        return all;
    };
    for remote in router.remote_views().await {
        let id = remote["edgeId"].as_str().unwrap_or_default().to_owned();
        match all.iter_mut().find(|v| v["edgeId"] == id.as_str()) {
            Some(mine) if mine["connected"] == true && session_of(mine) >= session_of(&remote) => {}
            Some(mine) => *mine = remote,
            None => all.push(remote),
        }
    }
    all
}

/// One Edge's view: this replica's if it holds the Edge, else the holding replica's,
/// else the last one seen here.
pub(super) async fn edge(s: &AdminState, edge_id: &str) -> Result<Option<Value>, ApiError> {
    let local = s.cp.edge(edge_id);
    if local
        .as_ref()
        .is_some_and(|v| v.reachability != Reachability::Disconnected)
        || s.router.is_none()
    {
        return Ok(local.map(|v| local_view(s, &v)));
    }
    let remote = match &s.router {
        Some(router) => router
            .view(edge_id)
            .await
            .map_err(|e| ApiError::from_route(edge_id, &e))?,
        None => None,
    };
    Ok(remote.or_else(|| local.map(|v| local_view(s, &v))))
}
