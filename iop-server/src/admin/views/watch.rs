//! `GET /v1/load/watch`: the fleet's load as server-sent events — a `snapshot` of every
//! Edge's providers (in parts of 100 Edges, `part` from 0, the `last` one with the
//! event id), then a `change` per view, update, disconnection or departure as
//! the fleet applies it, `?model=` and `?edge=` narrowing both. Each event's id is
//! `<epoch>.<change>`: a client that reconnects with `Last-Event-ID` resumes after it,
//! or — when the id is another process's or the fleet's bounded log no longer holds
//! what followed — gets a `resync` event and a fresh snapshot. A slow client never
//! holds memory of its own: it only falls behind the shared log.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use iop_core::cp::load::{EdgeLoad, ProviderLoad};
use iop_tokio::fleet::{ChangeKind, FleetChange, LoadView};
use iop_tokio::{LoadWatch, WatchItem};
use serde_json::{Value, json};

use super::events::until_revoked;
use crate::admin::http::error::ApiError;
use crate::admin::{AdminState, MAX_EVENT_STREAMS};

/// Edges per `snapshot` event: a few hundred KiB at most.
const SNAPSHOT_PART: usize = 100;

/// What a watch shows.
#[derive(Debug, Default)]
struct Filter {
    model: Option<String>,
    edge: Option<String>,
}

impl Filter {
    fn serves(&self, p: &ProviderLoad<'_>) -> bool {
        self.model
            .as_deref()
            .is_none_or(|m| p.models().any(|x| x == m))
    }

    fn edge(&self, edge_id: &str) -> bool {
        self.edge.as_deref().is_none_or(|e| e == edge_id)
    }
}

pub(in crate::admin) async fn watch(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(unknown) = query
        .keys()
        .find(|k| !["model", "edge"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "unknown parameter {unknown:?}: a watch takes model and edge"
        )));
    }
    let filter = Filter {
        model: query.get("model").filter(|m| !m.is_empty()).cloned(),
        edge: query.get("edge").filter(|e| !e.is_empty()).cloned(),
    };
    let epoch = s.cp.load_watch_epoch();
    // `<epoch>.<change>` of this process resumes; anything else starts afresh, told.
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let (after, resync) = match last {
        None => (None, false),
        Some(id) => match id.split_once('.') {
            Some((e, seq)) if e.parse() == Ok(epoch) => match seq.parse::<u64>() {
                Ok(seq) => (Some(seq), false),
                Err(_) => (None, true),
            },
            _ => (None, true),
        },
    };
    let Ok(slot) = s.event_streams.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!("{MAX_EVENT_STREAMS} event streams are open already"),
        ));
    };
    let watch = s.cp.watch_load_after(after);
    let first = resync.then(|| {
        Event::default()
            .event("resync")
            .data(json!({ "reason": "the event id is not this control plane's" }).to_string())
    });
    let pending: VecDeque<Event> = first.into_iter().collect();
    let open = Some((watch, pending, filter, slot));
    let stream = futures_lite::stream::unfold(open, move |open| async move {
        let (mut watch, mut pending, filter, slot) = open?;
        loop {
            if let Some(event) = pending.pop_front() {
                let open = Some((watch, pending, filter, slot));
                return Some((Ok::<_, Infallible>(event), open));
            }
            pending = events(&mut watch, &filter, epoch).await?.into();
        }
    });
    Ok(Sse::new(until_revoked(&s, &headers, Box::pin(stream)))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The events of the watch's next item that the filter lets through (possibly none);
/// `None` once the server has shut down.
async fn events(watch: &mut LoadWatch, filter: &Filter, epoch: u64) -> Option<Vec<Event>> {
    let id = |seq: u64| format!("{epoch}.{seq}");
    Some(match watch.next().await? {
        WatchItem::Snapshot { views, seq } => {
            let edges: Vec<Value> = views
                .iter()
                .filter(|v| filter.edge(v.load().edge_id()))
                .filter_map(|v| snapshot_edge(v, filter))
                .collect();
            // In parts of a bounded size; only the last carries the id, so that a
            // client cut off within a snapshot resumes from the one before.
            let parts = edges.len().div_ceil(SNAPSHOT_PART).max(1);
            let mut chunks = edges.chunks(SNAPSHOT_PART);
            (0..parts)
                .map(|part| {
                    let last = part + 1 == parts;
                    let chunk = chunks.next().unwrap_or_default();
                    let data = json!({ "seq": seq, "part": part, "last": last, "edges": chunk });
                    let event = Event::default().event("snapshot").data(data.to_string());
                    if last { event.id(id(seq)) } else { event }
                })
                .collect()
        }
        WatchItem::Gap(gap) => {
            let data = json!({ "reason": gap.to_string() });
            vec![Event::default().event("resync").data(data.to_string())]
        }
        WatchItem::Changes(changes) => changes
            .iter()
            .filter(|c| filter.edge(&c.edge_id))
            .filter_map(|c| change(c, filter))
            .map(|(seq, data)| {
                Event::default()
                    .event("change")
                    .id(id(seq))
                    .data(data.to_string())
            })
            .collect(),
        _ => Vec::new(),
    })
}

/// One Edge of a snapshot: its providers the filter shows (none: left out).
fn snapshot_edge(v: &LoadView, filter: &Filter) -> Option<Value> {
    let providers = providers(v.load(), filter, None);
    (!providers.is_empty() || filter.model.is_none()).then(|| {
        json!({
            "edgeId": v.load().edge_id(),
            "live": v.live(),
            "atUnixMs": v.received_at_unix_ms(),
            "providers": providers,
        })
    })
}

/// One change as the stream shows it: its number and JSON (`None`: nothing the
/// filter shows).
fn change(c: &FleetChange, filter: &Filter) -> Option<(u64, Value)> {
    let (kind, providers) = match &c.kind {
        ChangeKind::View(view) => ("view", providers(view, filter, None)),
        ChangeKind::Numbers { view, changed } => {
            ("numbers", providers(view, filter, Some(changed)))
        }
        ChangeKind::Offline => ("offline", Vec::new()),
        ChangeKind::Gone => ("gone", Vec::new()),
        _ => return None,
    };
    let shown = matches!(c.kind, ChangeKind::Offline | ChangeKind::Gone) || !providers.is_empty();
    shown.then(|| {
        let mut data = json!({
            "seq": c.seq,
            "edgeId": &*c.edge_id,
            "kind": kind,
            "providers": providers,
        });
        if let (Some(at), Some(o)) = (c.at_unix_ms, data.as_object_mut()) {
            o.insert("atUnixMs".into(), at.into());
        }
        (c.seq, data)
    })
}

/// The providers of `load` the filter shows (only those at `only`, when given).
fn providers(load: &EdgeLoad, filter: &Filter, only: Option<&[u32]>) -> Vec<Value> {
    let mut out = Vec::new();
    for node in load.nodes() {
        for (i, p) in node.provider_indexes().zip(node.providers()) {
            let listed = only.is_none_or(|o| o.contains(&u32::try_from(i).unwrap_or(u32::MAX)));
            if listed && filter.serves(&p) {
                let [
                    capacity,
                    in_flight,
                    queued,
                    lc_capacity,
                    lc_in_flight,
                    lc_queued,
                ] = p.numbers();
                out.push(json!({
                    "nodeId": node.node_id(),
                    "providerId": p.provider_id(),
                    "models": p.models().collect::<Vec<_>>(),
                    "offline": p.is_offline(),
                    "admissionEligible": p.admission_eligible(),
                    "capacity": capacity,
                    "inFlight": in_flight,
                    "queued": queued,
                    "longContextCapacity": lc_capacity,
                    "longContextInFlight": lc_in_flight,
                    "longContextQueued": lc_queued,
                }));
            }
        }
    }
    out
}
