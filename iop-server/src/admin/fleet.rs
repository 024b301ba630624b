//! The admin API over a cluster (`--cluster`): an Edge held by another replica is
//! listed, read, asked for its status and sent commands through that replica
//! ([`iop_cluster::Router`]); without a cluster, or for an Edge this Control Plane
//! holds, everything stays local.

use std::collections::HashMap;

use iop_core::cp::{EdgeView, Reachability};
use iop_tokio::LoadView;
use serde_json::Value;

use super::error::ApiError;
use super::{AdminState, json as shape, load_json};

/// An Edge's view, with the replica holding its live session in a cluster and a
/// summary of its load (`load`) when it has one.
pub(super) fn local_view(s: &AdminState, v: &EdgeView) -> Value {
    let load = s.cp.edge_load(&v.edge_id);
    view_with_load(
        s.replica_id.as_deref(),
        v,
        load.as_ref().map(|(l, p)| (&**l, *p)),
    )
}

/// An Edge's view as this replica lists it: the view, the replica holding its live
/// session (`replica`), and its load's summary (`load`).
pub fn view_with_load(
    replica: Option<&str>,
    v: &EdgeView,
    load: Option<(&iop_core::cp::load::EdgeLoad, bool)>,
) -> Value {
    let mut out = shape::edge_view(v);
    if let Some(obj) = out.as_object_mut() {
        if let Some(replica) = replica
            && v.reachability != Reachability::Disconnected
        {
            obj.insert("replica".into(), Value::String(replica.to_owned()));
        }
        if let Some((load, partial)) = load {
            obj.insert("load".into(), load_json::edge_load_summary(load, partial));
        }
    }
    out
}

/// Every view of this Control Plane, with their loads' summaries (the loads taken
/// once for all of them).
pub(super) fn local_views(s: &AdminState) -> Vec<Value> {
    let loads: HashMap<String, LoadView> =
        s.cp.edge_loads()
            .into_iter()
            .map(|l| (l.load.edge_id().to_owned(), l))
            .collect();
    s.cp.edges()
        .iter()
        .map(|v| {
            let load = loads.get(&v.edge_id).map(|l| (&*l.load, l.partial));
            view_with_load(s.replica_id.as_deref(), v, load)
        })
        .collect()
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
    let mut all = local_views(s);
    let Some(router) = &s.router else {
        return all;
    };
    let mut at: HashMap<String, usize> = all
        .iter()
        .enumerate()
        .map(|(i, v)| (v["edgeId"].as_str().unwrap_or_default().to_owned(), i))
        .collect();
    for remote in router.remote_views().await {
        let id = remote["edgeId"].as_str().unwrap_or_default().to_owned();
        match at.get(&id).and_then(|i| all.get_mut(*i)) {
            Some(mine) if mine["connected"] == true && session_of(mine) >= session_of(&remote) => {}
            Some(mine) => *mine = remote,
            None => {
                at.insert(id, all.len());
                all.push(remote);
            }
        }
    }
    // In Edge id order, as the list pages by it.
    all.sort_by(|a, b| a["edgeId"].as_str().cmp(&b["edgeId"].as_str()));
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
