//! Sending a command and reading it back: `POST /v1/edges/{edge_id}/commands` waits
//! for the Edge's answer, from this replica or through the one holding the Edge;
//! `GET /v1/commands/{command_id}` reads its record, this replica's or the cluster's.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use iop_cluster::RouteErrorKind;
use iop_core::cp::CommandSpec;
use iop_core::proto::EdgeCommandRequest;
use serde_json::{Value, json};

use super::json as shape;
use crate::admin::AdminState;
use crate::admin::http::error::ApiError;
use crate::admin::views::listing;

pub(in crate::admin) async fn post_command(
    State(s): State<AdminState>,
    Path(edge_id): Path<String>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // The body is an `EdgeCommandRequest` in the protobuf JSON mapping (which also
    // accepts the proto field names, e.g. `target_selector`).
    let request: EdgeCommandRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid command body: {e}")))?;
    if request.operation.is_empty() {
        return Err(ApiError::bad_request(
            "invalid command body: `operation` is required",
        ));
    }
    // The caller's idempotency key (PROTOCOL.md §4.4): `commandId`, or the
    // `Idempotency-Key` header (the IETF httpapi draft's name for it).
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::bad_request("Idempotency-Key is not ASCII"))?
                .to_owned(),
        ),
    };
    let command_id = match (request.command_id.as_str(), key) {
        ("", key) => key,
        (id, Some(key)) if key != id => {
            return Err(ApiError::bad_request(
                "`commandId` and the Idempotency-Key header name different commands",
            ));
        }
        (id, _) => Some(id.to_owned()),
    };
    if let Some(id) = &command_id {
        iop_core::ids::validate_id("commandId", id)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    let mut spec = CommandSpec::from(request);
    spec.command_id = command_id.unwrap_or_default();
    let (command_id, response) = send_and_answer(&s, &edge_id, spec).await?;
    Ok((
        StatusCode::OK,
        Json(json!({
            "commandId": command_id,
            "edgeId": edge_id,
            "response": response,
        })),
    )
        .into_response())
}

/// Sends `spec` to `edge_id` (from here, or through the replica holding it) and
/// waits for the Edge's answer: the command's id and the answer in JSON.
pub(in crate::admin) async fn send_and_answer(
    s: &AdminState,
    edge_id: &str,
    spec: CommandSpec,
) -> Result<(String, Value), ApiError> {
    // `timeout_ms` bounds the command's run on the Edge, not its answer: the answer
    // (accepted or rejected) is awaited for `command_answer_timeout`.
    let wait = s.command_answer_timeout;
    if let Some(router) = s
        .router
        .as_ref()
        .filter(|_| !listing::held_here(s, edge_id))
    {
        return match router.command(edge_id, spec, wait).await {
            Ok(sent) => Ok((
                sent.command_id,
                serde_json::to_value(&sent.response).unwrap_or(Value::Null),
            )),
            // Not connected when some replica ever recorded the Edge, unknown
            // otherwise (PROTOCOL.md §8): the router reads the records.
            Err(e) => Err(ApiError::from_route(edge_id, &e)),
        };
    }
    if s.cp.edge(edge_id).is_none() {
        return Err(ApiError::unknown_edge(edge_id));
    }
    let mut tracker =
        s.cp.send_command(edge_id, spec)
            .map_err(|e| ApiError::from_command(edge_id, &e))?;
    let command_id = tracker.command_id().to_owned();
    let response = tracker
        .first_answer(wait)
        .await
        .map_err(|e| ApiError::from_no_answer(edge_id, &command_id, &e))?;
    let with_id = |e: ApiError| ApiError {
        command_id: Some(command_id.clone()),
        ..e
    };
    // In a cluster the answer goes out once the command's record holds it: a replica
    // that takes the Edge over finds it.
    if let Some(router) = &s.router
        && !router.commands().flushed(edge_id, &command_id).await
    {
        return Err(with_id(ApiError::of_kind(
            RouteErrorKind::Ended(iop_core::cp::EndingKind::Unrecorded),
            format!(
                "the edge answered, but its answer could not be recorded in the cluster \
                 engine; the command stays tracked: GET /v1/commands/{command_id}"
            ),
        )));
    }
    Ok((command_id, shape::command_response(&response)))
}

pub(in crate::admin) async fn get_command(
    State(s): State<AdminState>,
    Path(command_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    find_command(&s, &command_id)
        .await?
        .map(|r| Json(shape::command_record(&r)))
        .ok_or_else(|| unknown_command(&command_id))
}

/// The 404 of a command id nobody knows.
pub(in crate::admin) fn unknown_command(command_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_command",
        format!("no command {command_id:?} is known to this control plane"),
    )
}

/// A command's record: this replica's, or in a cluster the engine's.
///
/// In a cluster the engine's ending is the command's (PROTOCOL.md §8 "Command
/// records"): its first ending to land stands, and a replica whose own record ended
/// otherwise — it adopted the command before that ending landed, or lost its Edge to a
/// newer session before its own ending could land — shows the engine's. So the engine
/// is read whenever this replica's record is missing, ended, or of an Edge it no
/// longer holds; a command running on an Edge held here is read from here (its
/// record in the engine follows this replica's). Unreachable, the engine's word is
/// missing: a record known here is shown as it is known here.
pub(in crate::admin) async fn find_command(
    s: &AdminState,
    command_id: &str,
) -> Result<Option<iop_tokio::CommandRecord>, ApiError> {
    let mine = s.cp.command(command_id);
    let Some(router) = &s.router else {
        return Ok(mine);
    };
    // Not sent from here (this replica could not record it, and a retry of its
    // caller's went through another) says nothing of the command itself.
    let not_sent_here = mine
        .as_ref()
        .and_then(|r| r.outcome.as_ref())
        .and_then(iop_core::cp::CommandOutcome::ending)
        .is_some_and(|e| e.kind() == iop_core::cp::EndingKind::Unrecorded);
    let current_here = mine
        .as_ref()
        .is_some_and(|r| r.outcome.is_none() && listing::held_here(s, &r.edge_id));
    if current_here {
        return Ok(mine);
    }
    let stored = match router.commands().get(command_id).await {
        Ok(stored) => stored,
        Err(_) if mine.is_some() => return Ok(mine),
        Err(e) => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                e.0,
            ));
        }
    };
    let progressed = |r: &iop_tokio::CommandRecord| r.response().is_some() || r.outcome.is_some();
    Ok(match (stored, mine) {
        // Ended in the engine: that is the command's end, whichever replica wrote it.
        (Some(stored), _) if stored.outcome.is_some() => Some(stored),
        // One this replica refused is shown as it knows it (never sent) while the
        // engine's copy says no more than that it was written ahead; answered, the
        // engine's copy is the command's (a caller's retry sent it).
        (Some(stored), Some(mine)) if not_sent_here => {
            Some(if progressed(&stored) { stored } else { mine })
        }
        // Running, of an Edge another replica holds now: that replica carries it on.
        (Some(stored), Some(mine)) if mine.outcome.is_none() => Some(stored),
        // Ended here, not yet there: this replica's own write is on its way.
        (stored, mine) => mine.or(stored),
    })
}
