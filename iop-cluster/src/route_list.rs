//! The fleet's list across replicas, one page at a time: the replica asked sends the
//! filter, the cursor and the limit to every other live replica at once
//! ([`Router::list_edges`]); each answers with the page of the Edges it holds live
//! that pass ([`own_list`]), and how many pass in all. The asker merges the pages with
//! its own in Edge id order. A replica that does not answer in time is named in the
//! result ([`RemoteList::silent`]), never waited for past it.

use std::collections::HashSet;
use std::time::Duration;

use async_nats::HeaderMap;
use iop_driver::iop_core::cp::{EdgeView, Reachability};
use iop_driver::iop_core::proto::{Message, cluster};
use iop_driver::iop_fleet::{EdgeFilter, EdgePage, ListedEdge};
use iop_driver::{ControlPlaneHandle, Runtime};

use crate::driver::lock;
use crate::route::{Router, Server, subject};
use crate::route_error::RouteError;
use crate::route_load::{VIEWS_PAGE, decode, listed, request_headers};

/// How long another replica has to answer for its page of the list.
const LIST_WAIT: Duration = Duration::from_secs(1);

/// What the other live replicas answered for one page of the fleet's list.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct RemoteList {
    /// Their pages, in Edge id order within each replica's (merge them with yours).
    pub edges: Vec<ListedEdge>,
    /// How many of their Edges pass the filters, summed over those that answered.
    pub total: u64,
    /// Whether some replica has Edges past its page.
    pub more: bool,
    /// The replicas that did not answer in time (or answered with what this schema
    /// does not read): the list is partial without theirs.
    pub silent: Vec<String>,
}

impl Router {
    /// Asks every other live replica, at once, for the page of at most `limit` Edges
    /// after `after` (an Edge id; empty: from the first) that pass `filter`, among
    /// those whose live session it holds. Returns within about a second whatever
    /// answered; a page of more than `limit` (or 500) views, or one that does not
    /// decode, counts as no answer.
    pub async fn list_edges(&self, filter: &EdgeFilter, after: &str, limit: usize) -> RemoteList {
        let limit = limit.clamp(1, VIEWS_PAGE);
        let body = filter.to_query(after, limit).encode_to_vec();
        let replicas = lock(&self.holder).other_replicas();
        let mut asks = tokio::task::JoinSet::new();
        for replica in replicas {
            let (client, body) = (self.client.clone(), body.clone());
            asks.spawn(async move {
                let request = async_nats::Request::new()
                    .headers(request_headers("list"))
                    .payload(body.into())
                    .timeout(Some(LIST_WAIT));
                let reply = client.send_request(subject(&replica), request);
                // The request's own timeout, and this one should the client stall.
                let reply = tokio::time::timeout(LIST_WAIT * 2, reply).await;
                let page = reply
                    .ok()
                    .and_then(Result::ok)
                    .and_then(|r| decode::<cluster::EdgeViewPage>(r.headers.as_ref(), &r.payload))
                    .filter(|p| p.views.len() <= limit);
                (replica, page)
            });
        }
        let mut out = RemoteList::default();
        while let Some(joined) = asks.join_next().await {
            let Ok((replica, page)) = joined else {
                continue;
            };
            match page {
                Some(page) => {
                    out.total += page.total;
                    out.more |= page.more;
                    (out.edges).extend(page.views.into_iter().filter_map(ListedEdge::from_message));
                }
                None => out.silent.push(replica),
            }
        }
        out.silent.sort_unstable();
        out
    }

    /// This replica's page of the fleet's list (merge it with
    /// [`list_edges`](Self::list_edges)'): the views of `cp` after `after` in Edge id
    /// order, at most `limit`, that pass `filter` — its live sessions, and its
    /// disconnected views of Edges no other replica holds live (those that one lists).
    /// Only the page's views and the disconnected ids are copied.
    pub fn own_page<R: Runtime>(
        &self,
        cp: &ControlPlaneHandle<R>,
        filter: &EdgeFilter,
        after: &str,
        limit: usize,
    ) -> EdgePage {
        let live = |v: &EdgeView| v.reachability != Reachability::Disconnected;
        let disconnected: Vec<String> = cp.visit_edges(|views| {
            (views.filter(|v| !live(v) && filter.matches(v, None)))
                .map(|v| v.edge_id.clone())
                .collect()
        });
        let elsewhere = self.live_elsewhere(disconnected.iter().map(String::as_str));
        let me = self.me.as_str();
        cp.visit_edges(|views| {
            let listed = views.filter(|v| live(v) || !elsewhere.contains(v.edge_id.as_str()));
            filter.page(listed, after, limit, |v| live(v).then_some(me))
        })
    }

    /// Those of `edge_ids` whose live session another replica holds, by the records
    /// seen: that replica lists them, not this one's disconnected views.
    fn live_elsewhere<'a>(&self, edge_ids: impl IntoIterator<Item = &'a str>) -> HashSet<&'a str> {
        let holder = lock(&self.holder);
        let me = holder.replica_id();
        (edge_ids.into_iter())
            .filter(|id| holder.owner(id).is_some_and(|(replica, _)| replica != me))
            .collect()
    }
}

/// This replica's page of a fleet listing (an `EdgeListQuery` in `payload`): the Edges
/// whose live session it holds that pass the filters, after the cursor, in Edge id
/// order, with how many pass in all.
pub(crate) fn own_list<R: Runtime>(
    server: &Server<R>,
    payload: &[u8],
) -> Result<(HeaderMap, Vec<u8>), RouteError> {
    let query = cluster::EdgeListQuery::decode(payload)
        .map_err(|_| RouteError::unavailable("undecodable list query"))?;
    let (filter, after, limit) = EdgeFilter::from_query(&query)
        .ok_or_else(|| RouteError::unavailable("a list query this schema does not send"))?;
    let limit = limit.clamp(1, VIEWS_PAGE);
    let me = server.me.as_str();
    let page = server.cp.visit_edges(|views| {
        let live = views.filter(|v| v.reachability != Reachability::Disconnected);
        filter.page(live, after, limit, |_| Some(me))
    });
    let page = cluster::EdgeViewPage {
        views: (page.views.into_iter())
            .map(|v| listed(&server.cp, me, v).to_message())
            .collect(),
        total: page.total,
        more: page.more,
    };
    Ok((HeaderMap::new(), page.encode_to_vec()))
}
