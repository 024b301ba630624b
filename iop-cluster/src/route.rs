//! Requests for an Edge held by another replica (PROTOCOL.md §8 "Routing").
//!
//! Every replica serves one request/reply subject, `iop.cluster.<replica>.edge`, for
//! the Edges whose live session it holds. A caller reads the Edge's ownership record:
//! no live record means *not connected*, answered at once; otherwise it sends the
//! request to the record's replica with the record's revision as the expected session
//! id, and that replica answers only for that session — a superseded owner, or one
//! that lost the record and has not closed yet, answers *not connected*, never with
//! stale data. A replica that is gone has no responder: *not connected* too.
//!
//! Headers carry the request's kind, Edge id and expected session, and the version of
//! the replicas' schema (`Iop-Schema`); bodies are protobuf: the wire's
//! `EdgeStatusRequest` → `EdgeStatusResponse`, `EdgeCommandRequest` →
//! `EdgeCommandResponse`, and the messages of `iop_proto::cluster` for the fleet's
//! load and views ([`route_load`](crate::route_load)). Errors come back as a code and
//! a message ([`RouteError`], its [`RouteErrorKind`]).

use std::sync::Arc;
use std::time::Duration;

use async_nats::HeaderMap;
use futures_lite::StreamExt;
use iop_driver::iop_core;
use iop_driver::iop_core::cp::{Absence, CommandSpec, Reachability};
use iop_driver::iop_core::proto::{
    EdgeCommandRequest, EdgeCommandResponse, EdgeStatusRequest, EdgeStatusResponse, Message,
    cluster, limits,
};
use iop_driver::{ControlPlaneHandle, Runtime};

use crate::driver::{HolderRef, held_session, lock};
use crate::key::edge_key;
use crate::nats::NatsStore;
use crate::ownership::OwnershipStore;
use crate::record::Current;
pub use crate::route_error::{RouteError, RouteErrorKind};
use crate::route_load::{LoadQuery, SCHEMA, own_load, own_view, own_views};

pub(crate) const KIND: &str = "Iop-Kind";
const EDGE: &str = "Iop-Edge-Id";
const SESSION: &str = "Iop-Session-Id";
const WAIT: &str = "Iop-Wait-Ms";
pub(crate) const ERROR: &str = "Iop-Error";
const COMMAND_ID: &str = "Iop-Command-Id";

/// The subject replica `replica` serves.
pub(crate) fn subject(replica: &str) -> String {
    format!("iop.cluster.{}.edge", edge_key(replica))
}

/// The live owner a record names, with its session id (the record's revision).
fn live_owner(current: Current) -> Option<(String, u64)> {
    match current.record {
        Some(r) if r.live => Some((r.replica, current.revision)),
        _ => None,
    }
}

/// A command's first answer through another replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedCommand {
    /// The id the holding replica gave it.
    pub command_id: String,
    /// The Edge's answer.
    pub response: EdgeCommandResponse,
}

/// Reaches any Edge of the cluster through the replica that holds it. Cloneable.
#[derive(Clone)]
pub struct Router {
    pub(crate) client: async_nats::Client,
    js: async_nats::jetstream::Context,
    store: NatsStore,
    pub(crate) me: String,
    pub(crate) timeout: Duration,
    pub(crate) holder: HolderRef,
    stats: Arc<crate::ClusterStats>,
    commands: crate::CommandLog,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router").field("replica", &self.me).finish()
    }
}

impl Router {
    pub(crate) fn new(
        client: async_nats::Client,
        js: async_nats::jetstream::Context,
        store: NatsStore,
        me: String,
        holder: HolderRef,
        stats: Arc<crate::ClusterStats>,
        commands: crate::CommandLog,
    ) -> Self {
        Self {
            client,
            js,
            store,
            me,
            timeout: Duration::from_secs(15),
            holder,
            stats,
            commands,
        }
    }

    /// The command records of the cluster: what this replica writes, and every
    /// replica's records to read ([`CommandLog::get`](crate::CommandLog::get)).
    pub fn commands(&self) -> &crate::CommandLog {
        &self.commands
    }

    /// The replicas other than this one that hold a live session, by the records.
    pub fn other_replicas(&self) -> Vec<String> {
        lock(&self.holder).other_replicas()
    }

    /// The replica holding `edge_id`'s live session and that session's id, by its
    /// record; `None` when it has none.
    pub async fn owner(&self, edge_id: &str) -> Result<Option<(String, u64)>, RouteError> {
        Ok(self.record_of(edge_id).await?.and_then(live_owner))
    }

    /// `edge_id`'s ownership record as the engine holds it (live or closed): `None`
    /// when no replica has ever recorded the Edge.
    async fn record_of(&self, edge_id: &str) -> Result<Option<Current>, RouteError> {
        self.store
            .entry(&edge_key(edge_id))
            .await
            .map_err(|e| RouteError::unavailable(e.to_string()))
    }

    pub(crate) async fn call(
        &self,
        kind: &str,
        edge_id: &str,
        extra: &[(&str, String)],
        body: Vec<u8>,
        wait: Duration,
    ) -> Result<(HeaderMap, bytes::Bytes), RouteError> {
        let result = self.route(kind, edge_id, extra, &body, wait).await;
        self.stats.routed(result.is_ok());
        result
    }

    /// Asks the holder this replica's watch last saw, which saves reading the record;
    /// if that is stale the holder answers `not_connected` (it checks the session), and
    /// the holder the record itself names, when another, is asked.
    async fn route(
        &self,
        kind: &str,
        edge_id: &str,
        extra: &[(&str, String)],
        body: &[u8],
        wait: Duration,
    ) -> Result<(HeaderMap, bytes::Bytes), RouteError> {
        let watched = self.watched_owner(edge_id);
        if let Some(owner) = &watched {
            match self
                .call_once(kind, edge_id, extra, body, wait, owner)
                .await
            {
                Err(e) if e.kind == RouteErrorKind::Absent(Absence::NotConnected) => {}
                done => return done,
            }
        }
        let record = self.record_of(edge_id).await?;
        // PROTOCOL.md §8: an Edge some replica recorded is not connected (it redials);
        // one no replica ever recorded is unknown to the cluster.
        let recorded = record.is_some() || lock(&self.holder).record(edge_id).is_some();
        match record.and_then(live_owner) {
            Some(owner) if watched.as_ref() != Some(&owner) => {
                self.call_once(kind, edge_id, extra, body, wait, &owner)
                    .await
            }
            _ if recorded => Err(RouteError::not_connected(edge_id)),
            _ => Err(RouteError::new(
                RouteErrorKind::Absent(Absence::Unknown),
                format!("no replica has ever recorded edge {edge_id:?}"),
            )),
        }
    }

    /// The live owner of `edge_id` by this replica's watch of the records.
    fn watched_owner(&self, edge_id: &str) -> Option<(String, u64)> {
        lock(&self.holder).owner(edge_id)
    }

    async fn call_once(
        &self,
        kind: &str,
        edge_id: &str,
        extra: &[(&str, String)],
        body: &[u8],
        wait: Duration,
        (replica, session_id): &(String, u64),
    ) -> Result<(HeaderMap, bytes::Bytes), RouteError> {
        let mut headers = crate::route_load::request_headers(kind);
        headers.insert(EDGE, edge_id);
        headers.insert(SESSION, session_id.to_string().as_str());
        for (name, value) in extra {
            headers.insert(*name, value.as_str());
        }
        let request = async_nats::Request::new()
            .headers(headers)
            .payload(bytes::Bytes::copy_from_slice(body))
            .timeout(Some(wait));
        let reply = match self.client.send_request(subject(replica), request).await {
            Ok(reply) => reply,
            Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                return Err(RouteError::not_connected(edge_id));
            }
            Err(e) if e.kind() == async_nats::RequestErrorKind::TimedOut => {
                return Err(RouteError::new(
                    RouteErrorKind::Timeout,
                    format!("replica {replica:?} holding edge {edge_id:?} did not answer in time"),
                ));
            }
            Err(e) => return Err(RouteError::unavailable(e.to_string())),
        };
        let headers = reply.headers.unwrap_or_default();
        if let Some(code) = headers.get(ERROR) {
            // Passed on as far as it is one a replica sends: a known code, a message
            // of text within the limits, a valid command id.
            let mut message = String::from_utf8_lossy(&reply.payload).into_owned();
            limits::send::truncate_text(&mut message, iop_core::proto::limits::MAX_TEXT_LEN);
            let kind =
                RouteErrorKind::from_code(code.as_str()).unwrap_or(RouteErrorKind::Unavailable);
            let mut e = RouteError::new(kind, message);
            e.command_id = headers
                .get(COMMAND_ID)
                .map(|v| v.as_str().to_owned())
                .filter(|id| iop_core::ids::validate_id("Iop-Command-Id", id).is_ok());
            return Err(e);
        }
        Ok((headers, reply.payload))
    }

    /// A status round trip to `edge_id` through the replica holding it.
    pub async fn status(
        &self,
        edge_id: &str,
        node_ids: Vec<String>,
    ) -> Result<EdgeStatusResponse, RouteError> {
        let body = EdgeStatusRequest {
            node_ids,
            ..Default::default()
        }
        .encode_to_vec();
        let (_, payload) = self
            .call("status", edge_id, &[], body, self.timeout)
            .await?;
        // Within the protocol's limits, as an Edge's own would have to be.
        limits::send::status_response_body(&payload, payload.len())
            .map_err(|e| RouteError::unavailable(format!("status over the limits: {e}")))?;
        EdgeStatusResponse::decode(payload)
            .map_err(|e| RouteError::unavailable(format!("undecodable status: {e}")))
    }

    /// Sends `spec` to `edge_id` through the replica holding it and waits (at most
    /// `wait`) for the Edge's answer.
    pub async fn command(
        &self,
        edge_id: &str,
        spec: CommandSpec,
        wait: Duration,
    ) -> Result<RoutedCommand, RouteError> {
        let body = spec.into_request().encode_to_vec();
        let extra = [(WAIT, wait.as_millis().to_string())];
        let (headers, payload) = self
            .call(
                "command",
                edge_id,
                &extra,
                body,
                wait + Duration::from_secs(2),
            )
            .await?;
        let command_id = headers
            .get(COMMAND_ID)
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default();
        let response = EdgeCommandResponse::decode(payload)
            .map_err(|e| RouteError::unavailable(format!("undecodable answer: {e}")))?;
        // An id the holder could not have made, or an answer over the limits, is not
        // passed on.
        iop_core::ids::validate_id("Iop-Command-Id", &command_id)
            .map_err(|e| RouteError::unavailable(format!("bad answer: {e}")))?;
        limits::send::command_response(&response)
            .map_err(|e| RouteError::unavailable(format!("bad answer: {e}")))?;
        Ok(RoutedCommand {
            command_id,
            response,
        })
    }

    /// The whole fleet's events, as every replica publishes them
    /// ([`Replica::publish_events`](crate::Replica::publish_events)), each once: from
    /// now on, or after the event whose id (stream sequence) is `after`.
    pub async fn events(
        &self,
        after: Option<u64>,
    ) -> Result<impl futures_lite::Stream<Item = crate::events::FleetItem> + Send + use<>, RouteError>
    {
        crate::events::fleet_events(&self.js, after)
            .await
            .map_err(|e| RouteError::unavailable(e.to_string()))
    }

    /// This router's replica.
    pub fn replica_id(&self) -> &str {
        &self.me
    }
}

/// What a replica needs to answer requests for its Edges.
pub(crate) struct Server<R: Runtime> {
    pub(crate) client: async_nats::Client,
    pub(crate) cp: ControlPlaneHandle<R>,
    pub(crate) holder: HolderRef,
    /// This replica's id, which its views name as their holder.
    pub(crate) me: String,
    pub(crate) commands: crate::CommandLog,
    pub(crate) stats: Arc<crate::ClusterStats>,
    /// One per request being answered ([`ClusterConfig::max_routed_requests`](crate::ClusterConfig::max_routed_requests)).
    pub(crate) permits: Arc<tokio::sync::Semaphore>,
    /// The longest a routed command waits ([`ClusterConfig::max_routed_wait`](crate::ClusterConfig::max_routed_wait)).
    pub(crate) max_wait: Duration,
    /// Where this replica's load publishing stands ([`load_bus`](crate::load_bus)).
    pub(crate) load_bus: Arc<crate::load_bus::LoadBus>,
}

/// Answers the requests of `sub` (this replica's subject), each in its own task, as
/// many at once as it has permits; past that, `busy` at once.
pub(crate) async fn serve<R: Runtime>(mut sub: async_nats::Subscriber, server: Arc<Server<R>>) {
    while let Some(message) = sub.next().await {
        if server.stats.snapshot().fenced {
            // Another process runs as this replica: it answers.
            continue;
        }
        let Some(reply) = message.reply.clone() else {
            continue;
        };
        let Ok(permit) = server.permits.clone().try_acquire_owned() else {
            let busy = RouteError::new(
                RouteErrorKind::Busy,
                "this replica is answering as many requests as it may",
            );
            server.reply(reply, Err(busy)).await;
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let answer = answer(&server, &message).await;
            server.reply(reply, answer).await;
            drop(permit);
        });
    }
}

impl<R: Runtime> Server<R> {
    async fn reply(
        &self,
        reply: async_nats::Subject,
        answer: Result<(HeaderMap, Vec<u8>), RouteError>,
    ) {
        let (mut headers, body) = match answer {
            Ok((headers, body)) => (headers, body),
            Err(e) => {
                let mut headers = HeaderMap::new();
                headers.insert(ERROR, e.kind.code());
                if let Some(id) = &e.command_id {
                    headers.insert(COMMAND_ID, id.as_str());
                }
                (headers, e.message.into_bytes())
            }
        };
        headers.insert(SCHEMA, cluster::SCHEMA);
        let _ = self
            .client
            .publish_with_headers(reply, headers, body.into())
            .await;
    }
}

async fn answer<R: Runtime>(
    server: &Server<R>,
    message: &async_nats::Message,
) -> Result<(HeaderMap, Vec<u8>), RouteError> {
    let headers = message.headers.clone().unwrap_or_default();
    let get = |name: &str| headers.get(name).map(|v| v.as_str().to_owned());
    let kind = get(KIND).unwrap_or_default();
    if kind == "views" {
        return Ok(own_views(server, &headers));
    }
    if kind == "load-views" {
        return Ok(crate::load_bus::own_page(server, &headers));
    }
    if kind == "list" {
        return crate::route_list::own_list(server, &message.payload);
    }
    let edge_id = get(EDGE).unwrap_or_default();
    // The fleet's load is this replica's share, whoever holds which Edge.
    let load = LoadQuery::from_kind(&kind, &edge_id);
    if let Some(query @ (LoadQuery::Fleet | LoadQuery::FleetHistory)) = load {
        return Ok(own_load(server, query));
    }
    let session_id: u64 = get(SESSION).and_then(|s| s.parse().ok()).unwrap_or(0);
    // Only the session the caller read from the record, and only while it is live here.
    let live = held_session(&server.holder, &edge_id) == Some(session_id)
        && server.cp.edge(&edge_id).is_some_and(|v| {
            v.session_id == session_id && v.reachability != Reachability::Disconnected
        });
    if !live {
        return Err(RouteError::not_connected(&edge_id));
    }
    match kind.as_str() {
        "status" => {
            let request = EdgeStatusRequest::decode(message.payload.clone())
                .map_err(|e| RouteError::new(RouteErrorKind::BadRequest, e.to_string()))?;
            let status = server
                .cp
                .request_status(&edge_id, request.node_ids)
                .await
                .map_err(|e| RouteError::from_status(&e))?;
            Ok((HeaderMap::new(), status.encode_to_vec()))
        }
        "command" => {
            let request = EdgeCommandRequest::decode(message.payload.clone())
                .map_err(|e| RouteError::new(RouteErrorKind::BadRequest, e.to_string()))?;
            // The asking replica's wait, never past this one's bound.
            let wait =
                Duration::from_millis(get(WAIT).and_then(|w| w.parse().ok()).unwrap_or(10_000))
                    .min(server.max_wait);
            let spec = CommandSpec::from(request);
            let mut tracker = server
                .cp
                .send_command(&edge_id, spec)
                .map_err(|e| RouteError::from_command(&e))?;
            let command_id = tracker.command_id().to_owned();
            let response = tracker
                .first_answer(wait)
                .await
                .map_err(|e| RouteError::from_no_answer(&e).about(&command_id))?;
            // Answered once its record, with the answer, is in the engine.
            if !server.commands.flushed(&edge_id, &command_id).await {
                return Err(RouteError::new(
                    RouteErrorKind::Ended(iop_core::cp::EndingKind::Unrecorded),
                    "the edge answered, but its answer could not be recorded in the cluster \
                     engine; the command stays tracked",
                )
                .about(&command_id));
            }
            let mut headers = HeaderMap::new();
            headers.insert(COMMAND_ID, command_id.as_str());
            Ok((headers, response.encode_to_vec()))
        }
        "view" => own_view(server, &edge_id),
        _ => match load {
            // An Edge's load, from the replica holding its live session.
            Some(query) => Ok(own_load(server, query)),
            None => Err(RouteError::new(
                RouteErrorKind::BadRequest,
                "unknown request kind",
            )),
        },
    }
}
