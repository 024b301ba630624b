//! The fleet across replicas (PROTOCOL.md §8 "Routing"): each replica answers for the
//! Edges whose views it holds — its share of the fleet's load and history, an Edge's
//! load, history and view — and the replica asked adds up what every other live
//! replica answers. Answers are the typed messages of `iop_proto::cluster`, made and
//! added up by `iop-fleet`; every request and answer names the schema's version
//! (`Iop-Schema`), and an answer of another version, undecodable, or past the bounds
//! of a page is left out, never trusted.

use std::time::Duration;

use async_nats::HeaderMap;
use iop_driver::iop_core::cp::Reachability;
use iop_driver::iop_core::proto::{Message, cluster};
use iop_driver::iop_fleet::load::{edge_history_message, history_share};
use iop_driver::iop_fleet::{ListedEdge, LoadView};
use iop_driver::{ControlPlaneHandle, Runtime};

use crate::driver::lock;
use crate::route::{ERROR, KIND, Router, Server, subject};
use crate::route_error::RouteError;

/// The schema's version, on every request and answer between replicas.
pub(crate) const SCHEMA: &str = "Iop-Schema";
/// Views a page of a `views` answer holds at most (a page stays well under NATS's
/// default 1 MiB message limit).
pub(crate) const VIEWS_PAGE: usize = 500;
/// The last Edge id of the previous page (a `views` request), or of this one when
/// more follow (its answer).
const AFTER: &str = "Iop-After";
/// How long another replica has to answer for its share of the fleet.
const SHARE_WAIT: Duration = Duration::from_secs(2);

/// What a replica is asked of the fleet's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadQuery<'a> {
    /// Its share of the fleet's load now.
    Fleet,
    /// Its share of the fleet's load over time.
    FleetHistory,
    /// One Edge's load now: its nodes and providers (the Edge's live session is held
    /// there).
    Edge(&'a str),
    /// One Edge's load over time.
    EdgeHistory(&'a str),
}

impl LoadQuery<'_> {
    /// The request kind on the wire between replicas.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Self::Fleet => "fleet-load",
            Self::FleetHistory => "fleet-history",
            Self::Edge(_) => "edge-load",
            Self::EdgeHistory(_) => "edge-history",
        }
    }

    /// The query a request of `kind` makes (about `edge_id` for an Edge's), if it is
    /// one.
    pub(crate) fn from_kind<'a>(kind: &str, edge_id: &'a str) -> Option<LoadQuery<'a>> {
        [
            LoadQuery::Fleet,
            LoadQuery::FleetHistory,
            LoadQuery::Edge(edge_id),
            LoadQuery::EdgeHistory(edge_id),
        ]
        .into_iter()
        .find(|q| q.kind() == kind)
    }
}

/// Headers of a request of `kind` between replicas: its kind and the schema.
pub(crate) fn request_headers(kind: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(KIND, kind);
    headers.insert(SCHEMA, cluster::SCHEMA);
    headers
}

/// Whether an answer speaks this replica's schema and is not an error.
fn understood(headers: Option<&HeaderMap>) -> bool {
    headers.is_some_and(|h| {
        h.get(ERROR).is_none() && h.get(SCHEMA).is_some_and(|s| s.as_str() == cluster::SCHEMA)
    })
}

/// `payload` as an `M`, when `headers` say it is one of this schema.
pub(crate) fn decode<M: Message + Default>(
    headers: Option<&HeaderMap>,
    payload: &[u8],
) -> Option<M> {
    understood(headers)
        .then(|| M::decode(payload).ok())
        .flatten()
}

impl Router {
    /// Every other live replica's answer to `query` (`Fleet` or `FleetHistory`), in
    /// replica id order; a replica that does not answer within 2 s, or answers with
    /// anything but the message asked for, is left out (the caller says the total is
    /// partial by comparing the count with [`other_replicas`](Self::other_replicas)).
    async fn shares<M: Message + Default>(&self, query: LoadQuery<'_>) -> Vec<M> {
        let replicas: Vec<String> = lock(&self.holder).others_live().into_keys().collect();
        let mut answers = Vec::new();
        for replica in replicas {
            let request = async_nats::Request::new()
                .headers(request_headers(query.kind()))
                .timeout(Some(SHARE_WAIT));
            let Ok(reply) = self.client.send_request(subject(&replica), request).await else {
                continue;
            };
            if let Some(answer) = decode(reply.headers.as_ref(), &reply.payload) {
                answers.push(answer);
            }
        }
        answers
    }

    /// Every other live replica's share of the fleet's load now (see
    /// [`FleetLoad::add_share`](iop_driver::iop_fleet::FleetLoad::add_share)).
    pub async fn fleet_shares(&self) -> Vec<cluster::FleetShare> {
        self.shares(LoadQuery::Fleet).await
    }

    /// Every other live replica's share of the fleet's history (see
    /// [`add_history_share`](iop_driver::iop_fleet::load::add_history_share)).
    pub async fn fleet_history_shares(&self) -> Vec<cluster::FleetHistoryShare> {
        self.shares(LoadQuery::FleetHistory).await
    }

    /// `edge_id`'s load from the replica holding its live session; `None` when that
    /// replica has no view of it.
    pub async fn edge_load(&self, edge_id: &str) -> Result<Option<LoadView>, RouteError> {
        let query = LoadQuery::Edge(edge_id);
        let answer: Option<cluster::EdgeLoad> = self.held(query.kind(), edge_id).await?;
        Ok(answer.as_ref().and_then(LoadView::from_message))
    }

    /// `edge_id`'s history from the replica holding its live session; `None` when that
    /// replica has none.
    pub async fn edge_history(
        &self,
        edge_id: &str,
    ) -> Result<Option<cluster::EdgeHistory>, RouteError> {
        self.held(LoadQuery::EdgeHistory(edge_id).kind(), edge_id)
            .await
    }

    /// `edge_id`'s view from the replica holding its live session; `None` when no
    /// replica holds a live session of it.
    pub async fn view(&self, edge_id: &str) -> Result<Option<ListedEdge>, RouteError> {
        match self.held::<cluster::EdgeView>("view", edge_id).await {
            Ok(view) => Ok(view.and_then(ListedEdge::from_message)),
            Err(e)
                if e.kind
                    == crate::RouteErrorKind::Absent(
                        iop_driver::iop_core::cp::Absence::NotConnected,
                    ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `kind` answered by the replica holding `edge_id`'s live session: `None` for an
    /// empty answer (nothing of it there).
    async fn held<M: Message + Default>(
        &self,
        kind: &str,
        edge_id: &str,
    ) -> Result<Option<M>, RouteError> {
        let (headers, body) = self
            .call(kind, edge_id, &[], Vec::new(), self.timeout)
            .await?;
        if body.is_empty() {
            return Ok(None);
        }
        decode(Some(&headers), &body)
            .map(Some)
            .ok_or_else(|| RouteError::unavailable(format!("undecodable {kind} answer")))
    }

    /// The views of every Edge the other replicas hold, asked for in pages of 500 (a
    /// replica that does not answer a page in 2 s is left out from there). What
    /// another replica answers is bounded: a page of more than 500 views, or one that
    /// does not decode, ends its listing, and so do a next page that does not advance
    /// or is not an Edge id, and pages past those its live records need (with one page
    /// of slack for records this replica has not seen yet). A view whose ids break the
    /// grammar is left out.
    pub async fn remote_views(&self) -> Vec<ListedEdge> {
        let mut all = Vec::new();
        let others = lock(&self.holder).others_live();
        for (replica, live) in others {
            // Page by page, each after the last Edge id of the one before.
            let mut after = String::new();
            for _ in 0..live.div_ceil(VIEWS_PAGE) + 2 {
                let mut headers = request_headers("views");
                headers.insert(AFTER, after.as_str());
                let request = async_nats::Request::new()
                    .headers(headers)
                    .timeout(Some(SHARE_WAIT));
                let Ok(reply) = self.client.send_request(subject(&replica), request).await else {
                    break;
                };
                match decode::<cluster::EdgeViewPage>(reply.headers.as_ref(), &reply.payload) {
                    Some(page) if page.views.len() <= VIEWS_PAGE => {
                        all.extend(page.views.into_iter().filter_map(ListedEdge::from_message))
                    }
                    _ => break,
                }
                match reply.headers.as_ref().and_then(|h| h.get(AFTER)) {
                    Some(next)
                        if next.as_str() > after.as_str()
                            && iop_driver::iop_core::ids::validate_id(
                                "Iop-After",
                                next.as_str(),
                            )
                            .is_ok() =>
                    {
                        after = next.as_str().to_owned()
                    }
                    _ => break,
                }
            }
        }
        all
    }
}

/// An answer: its headers, and `message` encoded (the schema header is added to
/// every answer as it is sent).
fn typed(message: &impl Message, more: Option<(&'static str, String)>) -> (HeaderMap, Vec<u8>) {
    let mut headers = HeaderMap::new();
    if let Some((name, value)) = more {
        headers.insert(name, value.as_str());
    }
    (headers, message.encode_to_vec())
}

/// An Edge of `cp`, held by replica `me`, as the fleet's list shows it.
pub(crate) fn listed<R: Runtime>(
    cp: &ControlPlaneHandle<R>,
    me: &str,
    view: iop_driver::iop_core::cp::EdgeView,
) -> ListedEdge {
    let load = cp.edge_load(&view.edge_id);
    ListedEdge::new(view, Some(me), load.as_ref())
}

/// One page of the views of the live sessions this replica holds, in Edge id order
/// after the request's `Iop-After`, and the last id when more follow.
pub(crate) fn own_views<R: Runtime>(
    server: &Server<R>,
    headers: &HeaderMap,
) -> (HeaderMap, Vec<u8>) {
    let after = headers.get(AFTER).map(|v| v.as_str()).unwrap_or_default();
    let mut held: Vec<(String, u64)> = lock(&server.holder)
        .sessions()
        .filter(|(edge_id, _)| *edge_id > after)
        .map(|(edge_id, session_id)| (edge_id.to_owned(), session_id))
        .collect();
    held.sort_unstable();
    let more = held.len() > VIEWS_PAGE;
    held.truncate(VIEWS_PAGE);
    let next = more.then(|| held.last().map(|(k, _)| k.clone())).flatten();
    let views = held
        .iter()
        .filter_map(|(edge_id, session_id)| {
            server.cp.edge(edge_id).filter(|v| {
                v.session_id == *session_id && v.reachability != Reachability::Disconnected
            })
        })
        .map(|v| listed(&server.cp, &server.me, v).to_message())
        .collect();
    let page = cluster::EdgeViewPage {
        views,
        ..Default::default()
    };
    typed(&page, next.map(|n| (AFTER, n)))
}

/// This replica's view of `edge_id` (its live session checked by the caller).
pub(crate) fn own_view<R: Runtime>(
    server: &Server<R>,
    edge_id: &str,
) -> Result<(HeaderMap, Vec<u8>), RouteError> {
    let view = server
        .cp
        .edge(edge_id)
        .ok_or_else(|| RouteError::not_connected(edge_id))?;
    Ok(typed(
        &listed(&server.cp, &server.me, view).to_message(),
        None,
    ))
}

/// This replica's answer to a load query: an empty body when it has nothing of it.
pub(crate) fn own_load<R: Runtime>(
    server: &Server<R>,
    query: LoadQuery<'_>,
) -> (HeaderMap, Vec<u8>) {
    let cp = &server.cp;
    let empty = || (HeaderMap::new(), Vec::new());
    match query {
        LoadQuery::Fleet => typed(&cp.fleet_load().to_share(), None),
        LoadQuery::FleetHistory => {
            let every = cp.history_intervals().0.as_millis() as u64;
            typed(&history_share(&cp.fleet_history(), every), None)
        }
        LoadQuery::Edge(edge_id) => match cp.edge_load(edge_id) {
            Some(view) => typed(&view.to_message(), None),
            None => empty(),
        },
        LoadQuery::EdgeHistory(edge_id) => match cp.edge_history(edge_id) {
            Some(history) => {
                let view = cp.edge_load(edge_id);
                let every = cp.history_intervals().1.as_millis() as u64;
                let load = view.as_ref().map(|v| &**v.load());
                typed(&edge_history_message(edge_id, &history, load, every), None)
            }
            None => empty(),
        },
    }
}
