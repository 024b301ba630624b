//! `POST /v1/commands/{command_id}/cancel`: asks the Edge running a command to stop it
//! (PROTOCOL.md §4.4, `command.cancel`), from this replica or through the one holding
//! the Edge.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use iop_cluster::RouteErrorKind;
use iop_core::cancel::CANCEL_OPERATION;
use iop_core::cp::CommandSpec;
use serde_json::json;

use super::json as shape;
use super::send::{find_command, send_and_answer, unknown_command};
use crate::admin::AdminState;
use crate::admin::http::error::ApiError;

/// Sends the cancellation of `command_id` and answers with the Edge's answer to it:
/// `{"commandId" (the cancellation's), "edgeId", "cancels", "response"}`. The
/// cancellation's id is the target's with `.cancel` (the same request twice is one
/// cancellation); its record ends SUCCEEDED once the target ended, FAILED if the Edge
/// no longer ran it. 404 `unknown_command`, 409 `already_finished` (with the record),
/// 422 `not_cancellable` (the Edge does not advertise `command.cancel`).
pub(in crate::admin) async fn cancel_command(
    State(s): State<AdminState>,
    Path(command_id): Path<String>,
) -> Result<Response, ApiError> {
    let record = find_command(&s, &command_id)
        .await?
        .ok_or_else(|| unknown_command(&command_id))?;
    if record.outcome.is_some() {
        let mut body = ApiError::new(
            StatusCode::CONFLICT,
            "already_finished",
            format!("command {command_id:?} already ended: there is nothing to cancel"),
        )
        .into_json();
        body["record"] = shape::command_record(&record);
        return Ok((StatusCode::CONFLICT, Json(body)).into_response());
    }
    let edge_id = record.edge_id;
    let (cancel_id, response) =
        match send_and_answer(&s, &edge_id, CommandSpec::cancel(&command_id)).await {
            Err(e) if e.kind == Some(RouteErrorKind::UnknownOperation) => {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "not_cancellable",
                    format!(
                        "edge {edge_id:?} does not advertise {CANCEL_OPERATION}: it cannot \
                         stop a running command"
                    ),
                ));
            }
            other => other?,
        };
    Ok((
        StatusCode::OK,
        Json(json!({
            "commandId": cancel_id,
            "edgeId": edge_id,
            "cancels": command_id,
            "response": response,
        })),
    )
        .into_response())
}
