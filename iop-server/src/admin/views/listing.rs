//! The fleet's Edges across replicas (`--cluster`): an Edge held by another replica is
//! listed and read as that replica tells it ([`ListedEdge`], a typed message); without
//! a cluster, or for an Edge this Control Plane holds, everything stays local.

use std::collections::HashMap;

use iop_core::cp::{EdgeView, Reachability};
use iop_tokio::fleet::{EdgeFilter, ListedEdge};

use super::json;
use crate::admin::AdminState;
use crate::admin::http::error::ApiError;

/// One Edge of the fleet's list: a view this Control Plane holds, whose load summary
/// is read (and JSON written) only when it is shown, or another replica's account of
/// one, which came typed. Listing 20 000 Edges filters and pages these, not 20 000
/// JSON documents.
pub(in crate::admin) enum FleetEdge {
    /// A view this Control Plane holds.
    Local(EdgeView),
    /// The replica holding the Edge's live session told this of it.
    Remote(ListedEdge),
}

impl FleetEdge {
    fn view(&self) -> &EdgeView {
        match self {
            Self::Local(v) => v,
            Self::Remote(l) => &l.view,
        }
    }

    /// The Edge's id.
    pub(in crate::admin) fn edge_id(&self) -> &str {
        &self.view().edge_id
    }

    /// Whether a session of the Edge is live (connected or unreachable).
    pub(in crate::admin) fn connected(&self) -> bool {
        self.view().reachability != Reachability::Disconnected
    }

    /// The replica holding its live session (`me`: this one's id).
    fn holder<'a>(&'a self, me: Option<&'a str>) -> Option<&'a str> {
        match self {
            Self::Local(_) => me.filter(|_| self.connected()),
            Self::Remote(l) => l.replica.as_deref(),
        }
    }

    /// The software version its hello announced.
    pub(in crate::admin) fn software_version(&self) -> &str {
        &self.view().software_version
    }

    /// One value of its hello metadata.
    pub(in crate::admin) fn metadata(&self, key: &str) -> Option<&str> {
        self.view().metadata(key)
    }

    /// Whether it passes `filter` (`me`: this replica's id).
    pub(in crate::admin) fn passes(&self, filter: &EdgeFilter, me: Option<&str>) -> bool {
        filter.matches(self.view(), self.holder(me))
    }

    /// The Edge as the list shows it (a local view with its load's summary).
    pub(in crate::admin) fn render(self, s: &AdminState) -> serde_json::Value {
        match self {
            Self::Local(v) => json::listed_edge(&local(s, v)),
            Self::Remote(l) => json::listed_edge(&l),
        }
    }
}

/// A view of this Control Plane as the list shows it: held here (when connected), with
/// its load's summary.
fn local(s: &AdminState, v: EdgeView) -> ListedEdge {
    let load = s.cp.edge_load(&v.edge_id);
    let holder = s
        .replica_id
        .as_deref()
        .filter(|_| v.reachability != Reachability::Disconnected);
    ListedEdge::new(v, holder, load.as_ref())
}

/// Every view of this Control Plane, in Edge id order (as the list pages by it).
pub(in crate::admin) fn local_edges(s: &AdminState) -> Vec<FleetEdge> {
    let mut all: Vec<FleetEdge> = s.cp.edges().into_iter().map(FleetEdge::Local).collect();
    all.sort_unstable_by(|a, b| a.edge_id().cmp(b.edge_id()));
    all
}

/// Whether this Control Plane holds a live session of `edge_id`.
pub(in crate::admin) fn held_here(s: &AdminState, edge_id: &str) -> bool {
    s.cp.edge(edge_id)
        .is_some_and(|v| v.reachability != Reachability::Disconnected)
}

/// Every Edge known here, and every Edge another replica holds (its view replacing
/// a disconnected one here; of two live ones, the newer session's), in Edge id order.
pub(in crate::admin) async fn edges(s: &AdminState) -> Vec<FleetEdge> {
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
            Some(mine)
                if mine.connected() && mine.view().session_id >= remote.view().session_id => {}
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

/// One page of the fleet's list.
pub(in crate::admin) struct Page {
    /// Its Edges, in Edge id order.
    pub(in crate::admin) edges: Vec<FleetEdge>,
    /// How many Edges pass the filters in all.
    pub(in crate::admin) total: u64,
    /// Whether more follow its last Edge.
    pub(in crate::admin) more: bool,
    /// The replicas that did not answer: the page lacks their Edges.
    pub(in crate::admin) silent: Vec<String>,
}

/// The page of `all` (in Edge id order) after `after`, of at most `limit` (`None`: all)
/// Edges that pass `filter`.
pub(in crate::admin) fn page_of(
    all: Vec<FleetEdge>,
    filter: &EdgeFilter,
    after: &str,
    limit: Option<usize>,
    me: Option<&str>,
) -> Page {
    let mut page = Page {
        edges: Vec::new(),
        total: 0,
        more: false,
        silent: Vec::new(),
    };
    for edge in all.into_iter().filter(|e| e.passes(filter, me)) {
        page.total += 1;
        if edge.edge_id() <= after {
            continue;
        }
        if limit.is_some_and(|limit| page.edges.len() == limit) {
            page.more = true;
        } else {
            page.edges.push(edge);
        }
    }
    page
}

/// One page of the whole fleet's list in a cluster: this replica's Edges (its
/// disconnected views of Edges another replica holds live left to that replica) and
/// the page every other live replica sends for the same filter and cursor, merged in
/// Edge id order.
pub(in crate::admin) async fn fleet_page(
    s: &AdminState,
    router: &iop_cluster::Router,
    filter: &EdgeFilter,
    after: &str,
    limit: usize,
) -> Page {
    let mine = router.own_page(&s.cp, filter, after, limit);
    let theirs = router.list_edges(filter, after, limit).await;
    let mut edges: Vec<FleetEdge> = mine.views.into_iter().map(FleetEdge::Local).collect();
    edges.extend(theirs.edges.into_iter().map(FleetEdge::Remote));
    edges.sort_by(|a, b| a.edge_id().cmp(b.edge_id()));
    // One Edge listed twice (its session moved while asked): the newer session's.
    edges.dedup_by(|later, kept| {
        if later.edge_id() != kept.edge_id() {
            return false;
        }
        if later.connected() && later.view().session_id > kept.view().session_id {
            std::mem::swap(later, kept);
        }
        true
    });
    let more = mine.more || theirs.more || edges.len() > limit;
    edges.truncate(limit);
    Page {
        edges,
        total: mine.total + theirs.total,
        more,
        silent: theirs.silent,
    }
}

/// One Edge as the list shows it: this replica's if it holds the Edge, else the
/// holding replica's, else the last one seen here.
pub(in crate::admin) async fn edge(
    s: &AdminState,
    edge_id: &str,
) -> Result<Option<ListedEdge>, ApiError> {
    let mine = s.cp.edge(edge_id);
    if mine
        .as_ref()
        .is_some_and(|v| v.reachability != Reachability::Disconnected)
        || s.router.is_none()
    {
        return Ok(mine.map(|v| local(s, v)));
    }
    let remote = match &s.router {
        Some(router) => router
            .view(edge_id)
            .await
            .map_err(|e| ApiError::from_route(edge_id, &e))?,
        None => None,
    };
    Ok(remote.or_else(|| mine.map(|v| local(s, v))))
}
