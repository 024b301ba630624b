//! The admin API over a cluster (`--cluster`): an Edge held by another replica is
//! listed, read, asked for its status and sent commands through that replica
//! ([`iop_cluster::Router`]); without a cluster, or for an Edge this Control Plane
//! holds, everything stays local.

use std::collections::HashMap;

use iop_core::cp::{EdgeView, Reachability};
use serde_json::Value;

use super::error::ApiError;
use super::{AdminState, json as shape, load_json};

/// An Edge's view, with the replica holding its live session in a cluster and a
/// summary of its load (`load`) when it has one.
pub(super) fn local_view(s: &AdminState, v: &EdgeView) -> Value {
    let load = s.cp.edge_load(&v.edge_id);
    view_with_load(s.replica_id.as_deref(), v, load.as_ref())
}

/// An Edge's view as this replica lists it: the view, the replica holding its live
/// session (`replica`), and its load's summary (`load`).
pub fn view_with_load(
    replica: Option<&str>,
    v: &EdgeView,
    load: Option<&iop_tokio::fleet::LoadView>,
) -> Value {
    let mut out = shape::edge_view(v);
    if let Some(obj) = out.as_object_mut() {
        if let Some(replica) = replica
            && v.reachability != Reachability::Disconnected
        {
            obj.insert("replica".into(), Value::String(replica.to_owned()));
        }
        if let Some(load) = load {
            obj.insert("load".into(), load_json::edge_load_summary(load));
        }
    }
    out
}

/// One Edge of the fleet's list: this replica's own view, whose JSON is built only
/// when it is shown ([`FleetEdge::render`]), or another replica's, which came as JSON.
/// Listing 20 000 Edges filters and pages these, not 20 000 JSON documents.
pub(super) enum FleetEdge {
    /// A view this Control Plane holds.
    Local(EdgeView),
    /// The view of the replica holding the Edge's live session.
    Remote(Value),
}

impl FleetEdge {
    /// The Edge's id.
    pub(super) fn edge_id(&self) -> &str {
        match self {
            Self::Local(v) => &v.edge_id,
            Self::Remote(v) => v["edgeId"].as_str().unwrap_or_default(),
        }
    }

    /// Whether a session of the Edge is live (connected or unreachable).
    pub(super) fn connected(&self) -> bool {
        match self {
            Self::Local(v) => v.reachability != Reachability::Disconnected,
            Self::Remote(v) => v["connected"] == true,
        }
    }

    /// The Edge's reachability as the list's `state` filter names it.
    pub(super) fn state(&self) -> &'static str {
        let reachability = match self {
            Self::Local(v) => v.reachability,
            Self::Remote(v) => match v["reachability"].as_str() {
                Some("CONNECTED") => Reachability::Connected,
                Some("UNREACHABLE") => Reachability::Unreachable,
                _ => Reachability::Disconnected,
            },
        };
        match reachability {
            Reachability::Connected => "connected",
            Reachability::Unreachable => "unreachable",
            _ => "disconnected",
        }
    }

    fn session(&self) -> u64 {
        match self {
            Self::Local(v) => v.session_id,
            Self::Remote(v) => v["sessionId"]
                .as_str()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        }
    }

    /// The software version its hello announced.
    pub(super) fn software_version(&self) -> &str {
        match self {
            Self::Local(v) => &v.software_version,
            Self::Remote(v) => v["softwareVersion"].as_str().unwrap_or_default(),
        }
    }

    /// One value of its hello metadata.
    pub(super) fn metadata(&self, key: &str) -> Option<&str> {
        match self {
            Self::Local(v) => v.metadata(key),
            Self::Remote(v) => v["metadata"][key].as_str(),
        }
    }

    /// Whether its id, version, metadata (keys or values) or the replica holding it
    /// holds `text` (lower case; `replica` is this one's id).
    pub(super) fn mentions(&self, text: &str, replica: Option<&str>) -> bool {
        let holds = |s: &str| s.to_lowercase().contains(text);
        let (holder, in_metadata) = match self {
            Self::Local(v) => (
                replica.filter(|_| self.connected()),
                v.metadata.iter().any(|(k, v)| holds(k) || holds(v)),
            ),
            Self::Remote(v) => (
                v["replica"].as_str(),
                v["metadata"].as_object().is_some_and(|m| {
                    m.iter()
                        .any(|(k, v)| holds(k) || v.as_str().is_some_and(holds))
                }),
            ),
        };
        holds(self.edge_id())
            || holds(self.software_version())
            || holder.is_some_and(holds)
            || in_metadata
    }

    /// The Edge as the list shows it (a local view with its load's summary).
    pub(super) fn render(self, s: &AdminState) -> Value {
        match self {
            Self::Local(v) => local_view(s, &v),
            Self::Remote(v) => v,
        }
    }
}

/// Every view of this Control Plane, in Edge id order (as the list pages by it).
pub(super) fn local_edges(s: &AdminState) -> Vec<FleetEdge> {
    let mut all: Vec<FleetEdge> = s.cp.edges().into_iter().map(FleetEdge::Local).collect();
    all.sort_unstable_by(|a, b| a.edge_id().cmp(b.edge_id()));
    all
}

/// Whether this Control Plane holds a live session of `edge_id`.
pub(super) fn held_here(s: &AdminState, edge_id: &str) -> bool {
    s.cp.edge(edge_id)
        .is_some_and(|v| v.reachability != Reachability::Disconnected)
}

/// Every Edge known here, and every Edge another replica holds (its view replacing
/// a disconnected one here; of two live ones, the newer session's), in Edge id order.
pub(super) async fn edges(s: &AdminState) -> Vec<FleetEdge> {
    let mut all = local_edges(s);
    let Some(router) = &s.router else {
        return all;
    };
    let mut at: HashMap<String, usize> = all
        .iter()
        .enumerate()
        .map(|(i, v)| (v.edge_id().to_owned(), i))
        .collect();
    for remote in router.remote_views().await {
        let remote = FleetEdge::Remote(remote);
        match at.get(remote.edge_id()).and_then(|i| all.get_mut(*i)) {
            Some(mine) if mine.connected() && mine.session() >= remote.session() => {}
            Some(mine) => *mine = remote,
            None => {
                at.insert(remote.edge_id().to_owned(), all.len());
                all.push(remote);
            }
        }
    }
    all.sort_unstable_by(|a, b| a.edge_id().cmp(b.edge_id()));
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
