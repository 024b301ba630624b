//! JSON shapes of the admin API. Wire messages (status responses, command responses
//! and events, node events) are written with their protobuf JSON mapping (pbjson);
//! the control plane's own records use the same conventions: lowerCamelCase names,
//! enums by name, 64-bit integers as strings.

use iop_core::cp::{CommandOutcome, CpEvent, CpEventKind, EdgeView, Reachability};
use iop_core::proto::{CommandPhase, EdgeCommandResponse};
use serde_json::{Value, json};

use iop_tokio::CommandRecord;

fn reachability(r: Reachability) -> &'static str {
    match r {
        Reachability::Connected => "CONNECTED",
        Reachability::Unreachable => "UNREACHABLE",
        Reachability::Disconnected => "DISCONNECTED",
        _ => "UNKNOWN",
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// One Edge's view.
pub fn edge_view(v: &EdgeView) -> Value {
    let metadata: serde_json::Map<String, Value> = v
        .metadata
        .iter()
        .map(|(k, val)| (k.clone(), Value::String(val.clone())))
        .collect();
    let last_status = v.last_status.as_ref().map(|s| {
        json!({
            "sessionId": s.session_id.to_string(),
            "registryRevision": s.registry_revision.to_string(),
            "observedAtUnixMs": s.observed_at_unix_ms.to_string(),
            "receivedAtUnixMs": s.received_at_unix_ms.to_string(),
            "nodeCount": s.node_count,
            "connectedNodes": s.connected_nodes,
            "truncated": s.truncated,
        })
    });
    json!({
        "edgeId": v.edge_id,
        "reachability": reachability(v.reachability),
        "connected": v.reachability != Reachability::Disconnected,
        "sessionId": v.session_id.to_string(),
        "softwareVersion": v.software_version,
        "operations": v.operations,
        "metadata": metadata,
        "connectedSinceUnixMs": v.connected_since_unix_ms.to_string(),
        "fresh": v.fresh,
        "supersessions": v.supersessions.to_string(),
        "lastStatus": last_status,
    })
}

/// The Edge's answer to a command, as it sent it.
pub fn command_response(r: &EdgeCommandResponse) -> Value {
    to_value(r)
}

fn phase_name(p: CommandPhase) -> &'static str {
    p.as_str_name()
}

/// Everything known about a command: response, every event, latest phase, outcome.
pub fn command_record(r: &CommandRecord) -> Value {
    let events: Vec<Value> = r.events().map(to_value).collect();
    let last_phase = r
        .events()
        .last()
        .and_then(|e| CommandPhase::try_from(e.phase).ok());
    let lost = matches!(r.outcome, Some(CommandOutcome::Lost));
    // Given up on by the Control Plane: FAILED whatever the Edge last said.
    let given_up = matches!(
        r.outcome,
        Some(
            CommandOutcome::Lost
                | CommandOutcome::Undeliverable { .. }
                | CommandOutcome::Forgotten
                | CommandOutcome::Unrecorded
                | CommandOutcome::Abandoned
        )
    );
    let phase = match (given_up, last_phase) {
        (true, _) => phase_name(CommandPhase::Failed),
        (_, Some(p)) => phase_name(p),
        (_, None) => phase_name(CommandPhase::Unspecified),
    };
    let outcome = r.outcome.as_ref().map(|o| match o {
        CommandOutcome::Rejected(reason) => format!("REJECTED:{}", reason.as_str_name()),
        CommandOutcome::Finished(p) => p.as_str_name().to_owned(),
        CommandOutcome::Lost => "LOST".to_owned(),
        CommandOutcome::Undeliverable { .. } => "UNDELIVERABLE".to_owned(),
        CommandOutcome::Forgotten => "FORGOTTEN".to_owned(),
        CommandOutcome::Unrecorded => "UNRECORDED".to_owned(),
        CommandOutcome::Abandoned => "ABANDONED".to_owned(),
        _ => "UNKNOWN".to_owned(),
    });
    let outcome_message = r.outcome.as_ref().and_then(|o| match o {
        CommandOutcome::Lost => Some("the edge came back without the command: it was lost"),
        CommandOutcome::Undeliverable { .. } => Some(
            "sessions of the edge kept ending without answering the command: it is not sent again",
        ),
        CommandOutcome::Forgotten => Some("the edge was forgotten before the command finished"),
        CommandOutcome::Unrecorded => {
            Some("the command's record could not be written first: it was never sent")
        }
        CommandOutcome::Abandoned => Some(
            "the edge stayed disconnected longer than it remembers a command: \
             its outcome can never be learned",
        ),
        _ => None,
    });
    json!({
        "edgeId": r.edge_id,
        "commandId": r.command_id,
        "operation": r.operation,
        "response": r.response().map(command_response),
        "events": events,
        "phase": phase,
        "terminal": r.outcome.is_some(),
        "lost": lost,
        "outcome": outcome,
        "outcomeMessage": outcome_message,
        "coalescedEvents": r.coalesced_events.to_string(),
    })
}

/// The event kinds `GET /v1/events` shows, by their names in the stream.
pub const STREAM_KINDS: [(&str, CpEventKind); 10] = [
    ("edge_connected", CpEventKind::SessionAccepted),
    ("edge_disconnected", CpEventKind::EdgeDisconnected),
    ("edge_unreachable", CpEventKind::EdgeUnreachable),
    ("edge_reachable", CpEventKind::EdgeReachable),
    ("edge_superseded", CpEventKind::EdgeSuperseded),
    ("node_event", CpEventKind::NodeEvent),
    ("command_event", CpEventKind::CommandEvent),
    ("command_undeliverable", CpEventKind::CommandUndeliverable),
    ("command_abandoned", CpEventKind::CommandAbandoned),
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
        CpEvent::CommandUndeliverable {
            edge_id,
            command_id,
            sessions,
            session_ids,
        } => (
            "command_undeliverable",
            json!({
                "edgeId": edge_id,
                "commandId": command_id,
                "sessions": sessions,
                "sessionIds": session_ids.iter().map(u64::to_string).collect::<Vec<_>>(),
            }),
        ),
        CpEvent::CommandAbandoned {
            edge_id,
            command_id,
            disconnected_for,
        } => (
            "command_abandoned",
            json!({
                "edgeId": edge_id,
                "commandId": command_id,
                "disconnectedForMs": disconnected_for.as_millis().to_string(),
            }),
        ),
        CpEvent::EdgeForgotten {
            edge_id, reason, ..
        } => (
            "edge_forgotten",
            json!({ "edgeId": edge_id, "reason": format!("{reason:?}") }),
        ),
        _ => return None,
    })
}
