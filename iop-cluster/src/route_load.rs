//! The fleet's load across replicas (PROTOCOL.md §8 "Routing"): each replica sums the
//! Edges whose views it holds and answers for them; the replica asked merges what
//! every other live replica answers with its own. An Edge's history comes from the
//! replica holding its live session. The answers are JSON as the replica's
//! [load encoder](crate::Replica::serve_load) writes them (the admin API's shape),
//! so that merging is the admin API's business; this module carries them, bounded.

use std::time::Duration;

use async_nats::HeaderMap;

use crate::driver::lock;
use crate::route::{Router, subject};
use crate::route_error::RouteError;

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

/// Writes this replica's answer to a [`LoadQuery`], `None` when it has none (an Edge
/// with no history here).
pub type LoadEncoder = Box<dyn Fn(LoadQuery<'_>) -> Option<serde_json::Value> + Send + Sync>;

/// How long another replica has to answer for its share of the fleet.
const SHARE_WAIT: Duration = Duration::from_secs(2);

impl Router {
    /// Every other live replica's answer to `query` (`Fleet` or `FleetHistory`), in
    /// replica id order; a replica that does not answer within 2 s, or answers with
    /// anything but a JSON object, is left out (the caller says the total is partial
    /// by comparing the count with [`other_replicas`](Self::other_replicas)).
    pub async fn load_of_others(&self, query: LoadQuery<'_>) -> Vec<serde_json::Value> {
        let replicas: Vec<String> = lock(&self.holder).others_live().into_keys().collect();
        let mut answers = Vec::new();
        for replica in replicas {
            let mut headers = HeaderMap::new();
            headers.insert(crate::route::KIND, query.kind());
            let request = async_nats::Request::new()
                .headers(headers)
                .timeout(Some(SHARE_WAIT));
            let Ok(reply) = self.client.send_request(subject(&replica), request).await else {
                continue;
            };
            if reply
                .headers
                .as_ref()
                .and_then(|h| h.get(crate::route::ERROR))
                .is_some()
            {
                continue;
            }
            if let Ok(value @ serde_json::Value::Object(_)) = serde_json::from_slice(&reply.payload)
            {
                answers.push(value);
            }
        }
        answers
    }

    /// `query` (`Edge` or `EdgeHistory`) answered by the replica holding the Edge's
    /// live session; `None` when that replica has none of it.
    pub async fn edge_load(
        &self,
        query: LoadQuery<'_>,
    ) -> Result<Option<serde_json::Value>, RouteError> {
        let edge_id = match query {
            LoadQuery::Edge(id) | LoadQuery::EdgeHistory(id) => id,
            _ => return Ok(None),
        };
        let (_, body) = self
            .call(query.kind(), edge_id, &[], Vec::new(), self.timeout)
            .await?;
        Ok(serde_json::from_slice(&body)
            .ok()
            .filter(|v: &serde_json::Value| v.is_object()))
    }
}
