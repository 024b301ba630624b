//! `GET /v1/events`: the fleet's events as server-sent events — this replica's, or in a
//! cluster every replica's from the engine, resumable by event id — and the JSON of
//! each event the stream shows.

use std::collections::HashMap;
use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_lite::StreamExt;
use iop_cluster::events::FleetItem;
use iop_core::cp::{CpEvent, CpEventKind, Ending};
use iop_tokio::{Notice, SubscribeOptions};
use serde_json::{Value, json};

use super::json::to_value;
use crate::admin::commands::jobs;
use crate::admin::http::error::ApiError;
use crate::admin::{AdminState, MAX_EVENT_STREAMS};

/// The event kinds `GET /v1/events` shows, by their names in the stream.
pub const STREAM_KINDS: [(&str, CpEventKind); 9] = [
    ("edge_connected", CpEventKind::SessionAccepted),
    ("edge_disconnected", CpEventKind::EdgeDisconnected),
    ("edge_unreachable", CpEventKind::EdgeUnreachable),
    ("edge_reachable", CpEventKind::EdgeReachable),
    ("edge_superseded", CpEventKind::EdgeSuperseded),
    ("node_event", CpEventKind::NodeEvent),
    ("command_event", CpEventKind::CommandEvent),
    ("command_ended", CpEventKind::CommandEnded),
    ("edge_forgotten", CpEventKind::EdgeForgotten),
];

/// The kind a stream event name stands for (`?kinds=` of `GET /v1/events`).
pub fn stream_kind(name: &str) -> Option<CpEventKind> {
    STREAM_KINDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
}

/// An event of the stream `GET /v1/events`: its SSE event name and JSON data. `None`
/// for events the stream does not show (status and command traffic, which have their
/// own endpoints, and connection-level detail).
pub fn cp_event(e: &CpEvent) -> Option<(&'static str, Value)> {
    Some(match e {
        CpEvent::SessionAccepted {
            edge_id,
            session_id,
            superseded_session_id,
            ..
        } => (
            "edge_connected",
            json!({
                "edgeId": edge_id,
                "sessionId": session_id.to_string(),
                "supersededSessionId": superseded_session_id.map(|s| s.to_string()),
            }),
        ),
        CpEvent::EdgeDisconnected {
            edge_id,
            session_id,
            reason,
        } => (
            "edge_disconnected",
            json!({ "edgeId": edge_id, "sessionId": session_id.to_string(), "reason": format!("{reason:?}") }),
        ),
        CpEvent::EdgeUnreachable {
            edge_id,
            session_id,
            silent_for,
        } => (
            "edge_unreachable",
            json!({ "edgeId": edge_id, "sessionId": session_id.to_string(), "silentForMs": silent_for.as_millis().to_string() }),
        ),
        CpEvent::EdgeReachable {
            edge_id,
            session_id,
        } => (
            "edge_reachable",
            json!({ "edgeId": edge_id, "sessionId": session_id.to_string() }),
        ),
        CpEvent::EdgeSuperseded {
            edge_id,
            old_session_id,
            new_session_id,
            flapping,
            ..
        } => (
            "edge_superseded",
            json!({
                "edgeId": edge_id,
                "oldSessionId": old_session_id.to_string(),
                "newSessionId": new_session_id.to_string(),
                "flapping": flapping,
            }),
        ),
        CpEvent::NodeEvent { event, .. } => ("node_event", to_value(event)),
        CpEvent::CommandEvent { edge_id, event, .. } => {
            let mut v = to_value(event);
            if let Some(obj) = v.as_object_mut() {
                obj.insert("edgeId".into(), Value::String(edge_id.clone()));
            }
            ("command_event", v)
        }
        CpEvent::CommandEnded {
            edge_id,
            command_id,
            ending,
        } => {
            let mut data = json!({
                "edgeId": edge_id,
                "commandId": command_id,
                "ending": ending.code(),
                "message": ending.to_string(),
            });
            if let Some(obj) = data.as_object_mut() {
                match ending {
                    Ending::Undeliverable {
                        sessions,
                        session_ids,
                    } => {
                        obj.insert("sessions".into(), (*sessions).into());
                        let ids: Vec<String> = session_ids.iter().map(u64::to_string).collect();
                        obj.insert("sessionIds".into(), ids.into());
                    }
                    Ending::Abandoned { disconnected_for } => {
                        let ms = disconnected_for.as_millis().to_string();
                        obj.insert("disconnectedForMs".into(), ms.into());
                    }
                    _ => {}
                }
            }
            ("command_ended", data)
        }
        CpEvent::EdgeForgotten {
            edge_id, reason, ..
        } => (
            "edge_forgotten",
            json!({ "edgeId": edge_id, "reason": format!("{reason:?}") }),
        ),
        _ => return None,
    })
}

pub(in crate::admin) async fn events(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    // In a cluster each event's id is its place on the fleet's stream: a client that
    // reconnects (`Last-Event-ID`, as EventSource sends it, or `?since=`) resumes after
    // it, or is told how many it missed.
    let after = match headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(query.get("since").map(String::as_str))
    {
        None => None,
        Some(id) => Some(id.trim().parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("event id {id:?} is not an event id this API gave"))
        })?),
    };
    // Job progress comes from this API's jobs, not from the control plane's events.
    let job_progress = query
        .get("kinds")
        .is_none_or(|list| list.split(',').any(|name| name == jobs::JOB_PROGRESS));
    let progress = job_progress.then(|| s.jobs.subscribe());
    let kinds = match query.get("kinds") {
        None => STREAM_KINDS.iter().map(|(_, k)| *k).collect(),
        Some(list) => list
            .split(',')
            .filter(|name| !name.is_empty() && *name != jobs::JOB_PROGRESS)
            .map(|name| {
                stream_kind(name).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "unknown event kind {name:?}; kinds: {}",
                        STREAM_KINDS
                            .iter()
                            .map(|(n, _)| *n)
                            .chain([jobs::JOB_PROGRESS])
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let Ok(slot) = s.event_streams.clone().try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!("{} event streams are open already", MAX_EVENT_STREAMS),
        ));
    };
    if let Some(router) = &s.router {
        // In a cluster, every replica's events come from the engine, each once.
        let names: Vec<&'static str> = STREAM_KINDS
            .iter()
            .filter(|(_, k)| kinds.contains(k))
            .map(|(n, _)| *n)
            .collect();
        let fleet = router
            .events(after)
            .await
            .map_err(|e| ApiError::from_route("", &e))?;
        let stream = fleet
            .filter(move |item| match item {
                FleetItem::Event { name, .. } => names.contains(&name.as_str()),
                FleetItem::Missed { .. } => true,
            })
            .map(move |item| {
                // The stream's place is held while it is open.
                let _held = &slot;
                Ok::<_, Infallible>(match item {
                    FleetItem::Event {
                        sequence,
                        name,
                        data,
                    } => Event::default()
                        .id(sequence.to_string())
                        .event(name)
                        .data(data.to_string()),
                    FleetItem::Missed { count } => Event::default()
                        .event("missed")
                        .data(json!({ "missed": count.to_string() }).to_string()),
                })
            });
        return Ok(Sse::new(until_revoked(
            &s,
            &headers,
            woven(Box::pin(stream), progress),
        ))
        .keep_alive(KeepAlive::default())
        .into_response());
    }
    // Only the kinds asked for are ever copied for this stream (a status answer never
    // is), within a byte budget.
    let options = SubscribeOptions::default()
        .kinds(kinds)
        .byte_budget(s.event_stream_bytes);
    let subscription = s.cp.subscribe_with(options);
    let stream = futures_lite::stream::unfold(Some((subscription, slot)), |open| async move {
        let (mut subscription, slot) = open?;
        loop {
            match subscription.next().await? {
                Notice::Event(e) => {
                    if let Some((name, data)) = cp_event(&e) {
                        let event = Event::default().event(name).data(data.to_string());
                        return Some((Ok::<_, Infallible>(event), Some((subscription, slot))));
                    }
                }
                // Too slow: told, then ended (its place freed); the client reconnects
                // and reloads rather than trusting a view with holes.
                Notice::Lagged(n) => {
                    let data = json!({ "dropped": n.to_string() }).to_string();
                    return Some((Ok(Event::default().event("lagged").data(data)), None));
                }
                _ => {}
            }
        }
    });
    Ok(Sse::new(until_revoked(
        &s,
        &headers,
        woven(Box::pin(stream), progress),
    ))
    .keep_alive(KeepAlive::default())
    .into_response())
}

type EventStream =
    std::pin::Pin<Box<dyn futures_lite::Stream<Item = Result<Event, Infallible>> + Send>>;

/// `stream` with the jobs' progress in it, when the client asked for it.
fn woven(
    stream: EventStream,
    progress: Option<tokio::sync::broadcast::Receiver<Value>>,
) -> EventStream {
    match progress {
        Some(progress) => Box::pin(jobs::with_progress(stream, progress)),
        None => stream,
    }
}

/// `stream`, ended once the token it was opened with is no longer in force.
pub(in crate::admin) fn until_revoked<S>(
    s: &AdminState,
    headers: &axum::http::HeaderMap,
    stream: S,
) -> std::pin::Pin<Box<dyn futures_lite::Stream<Item = S::Item> + Send>>
where
    S: futures_lite::Stream + Send + Unpin + 'static,
{
    match (
        &s.access.tokens,
        crate::admin::http::access::bearer_of(headers),
    ) {
        (Some(book), Some(token)) => Box::pin(book.until_revoked(stream, token.to_vec())),
        _ => Box::pin(stream),
    }
}
