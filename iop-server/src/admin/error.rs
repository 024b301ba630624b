//! JSON errors of the admin API: `{ "error": { "code": ..., "message": ... } }` with the
//! fitting HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use iop_core::cp::{CommandError, StatusError};
use iop_core::proto::ExceedsLimit;

use iop_tokio::{SendCommandError, StatusRequestError};

/// An admin API error: an HTTP status, a stable machine-readable code, and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code, e.g. `unknown_edge`, `not_connected`, `timeout`, `bad_request`,
    /// `exceeds_limit`.
    pub code: &'static str,
    /// Human-readable message (never a secret).
    pub message: String,
    /// The command concerned, when one was created (a command answer that timed out).
    pub command_id: Option<String>,
    /// For `exceeds_limit`: the field over its limit, its size and the limit.
    pub limit: Option<ExceedsLimit>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            command_id: None,
            limit: None,
        }
    }

    /// 400 `exceeds_limit`: the request would break a limit the Edge enforces (PROTOCOL.md
    /// §4.6); nothing was sent to it.
    pub fn exceeds_limit(limit: &ExceedsLimit) -> Self {
        Self {
            limit: Some(limit.clone()),
            ..Self::new(
                StatusCode::BAD_REQUEST,
                "exceeds_limit",
                format!("nothing was sent to the edge: {limit}"),
            )
        }
    }

    /// 404 `unknown_edge`.
    pub fn unknown_edge(edge_id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown_edge",
            format!("no edge {edge_id:?} is known to this control plane"),
        )
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn not_connected(edge_id: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "not_connected",
            format!(
                "edge {edge_id:?} is known but has no live session now (it redials on its own)"
            ),
        )
    }

    fn stopped() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the control plane is shutting down",
        )
    }

    /// Maps a failed status round trip.
    pub fn from_status(edge_id: &str, e: &StatusRequestError) -> Self {
        match e {
            StatusRequestError::Refused(StatusError::NotConnected(_)) => {
                Self::not_connected(edge_id)
            }
            StatusRequestError::Refused(StatusError::UnknownEdge(_)) => Self::unknown_edge(edge_id),
            StatusRequestError::Refused(StatusError::InvalidNodeId(e)) => {
                Self::bad_request(format!("node id: {e}"))
            }
            StatusRequestError::Refused(StatusError::ExceedsLimit(limit)) => {
                Self::exceeds_limit(limit)
            }
            StatusRequestError::Refused(e) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", e.to_string())
            }
            StatusRequestError::TimedOut => Self::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                format!("edge {edge_id:?} did not answer the status request in time"),
            ),
            StatusRequestError::Abandoned => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "session_ended",
                format!("the session of edge {edge_id:?} ended before it answered"),
            ),
            StatusRequestError::Stopped => Self::stopped(),
            other => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                other.to_string(),
            ),
        }
    }

    /// 409 `conflict`: the caller's command id names another command of the Edge.
    pub fn conflict() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "conflict",
            "this command id already names another command (other operation, selector, \
             metadata or timeout): the same key must mean the same command",
        )
    }

    /// Maps a command the control plane would not send.
    pub fn from_command(edge_id: &str, e: &SendCommandError) -> Self {
        match e {
            SendCommandError::Refused(CommandError::NotConnected(_)) => {
                Self::not_connected(edge_id)
            }
            SendCommandError::Refused(CommandError::UnknownEdge(_)) => Self::unknown_edge(edge_id),
            SendCommandError::Refused(e @ CommandError::OperationNotAdvertised { .. }) => {
                Self::new(StatusCode::BAD_REQUEST, "unknown_operation", e.to_string())
            }
            SendCommandError::Refused(CommandError::ExceedsLimit(limit)) => {
                Self::exceeds_limit(limit)
            }
            SendCommandError::Refused(CommandError::TooManyInFlight { limit }) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                format!("edge {edge_id:?} already has {limit} unfinished commands"),
            ),
            SendCommandError::Refused(e) => Self::bad_request(e.to_string()),
            SendCommandError::Stopped => Self::stopped(),
            SendCommandError::Conflict { .. } => Self::conflict(),
            other => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                other.to_string(),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = serde_json::json!({ "code": self.code, "message": self.message });
        if let Some(obj) = error.as_object_mut() {
            if let Some(id) = self.command_id {
                obj.insert("commandId".into(), id.into());
            }
            if let Some(limit) = self.limit {
                obj.insert("field".into(), limit.field.into());
                obj.insert("size".into(), limit.size.into());
                obj.insert("limit".into(), limit.limit.into());
                obj.insert("unit".into(), limit.unit.to_string().into());
            }
        }
        (
            self.status,
            axum::Json(serde_json::json!({ "error": error })),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_failures_map_to_their_http_status() {
        let cases = [
            (
                StatusRequestError::Refused(StatusError::NotConnected("e".into())),
                409,
                "not_connected",
            ),
            (
                StatusRequestError::Refused(StatusError::UnknownEdge("e".into())),
                404,
                "unknown_edge",
            ),
            (StatusRequestError::TimedOut, 504, "timeout"),
            (StatusRequestError::Abandoned, 503, "session_ended"),
            (StatusRequestError::Stopped, 503, "shutting_down"),
            (
                StatusRequestError::Refused(StatusError::TooManyInFlight { limit: 64 }),
                503,
                "busy",
            ),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from_status("e", &error);
            assert_eq!((api.status.as_u16(), api.code), (status, code), "{error:?}");
        }
    }

    #[test]
    fn a_request_over_a_limit_is_a_400_naming_the_field() {
        let limit = ExceedsLimit::bytes("iop.EdgeCommandRequest.metadata.value", 5_000, 4_096);
        let api = ApiError::from_command("e", &SendCommandError::Refused(limit.clone().into()));
        assert_eq!((api.status.as_u16(), api.code), (400, "exceeds_limit"));
        assert_eq!(api.limit, Some(limit.clone()));
        let api = ApiError::from_status("e", &StatusRequestError::Refused(limit.into()));
        assert_eq!((api.status.as_u16(), api.code), (400, "exceeds_limit"));
    }

    #[test]
    fn command_failures_map_to_their_http_status() {
        let cases = [
            (
                SendCommandError::Refused(CommandError::NotConnected("e".into())),
                409,
                "not_connected",
            ),
            (
                SendCommandError::Refused(CommandError::OperationNotAdvertised {
                    operation: "x".into(),
                    advertised: vec!["y".into()],
                }),
                400,
                "unknown_operation",
            ),
            (
                SendCommandError::Refused(CommandError::UnknownEdge("e".into())),
                404,
                "unknown_edge",
            ),
            (
                SendCommandError::Refused(CommandError::TooManyInFlight { limit: 256 }),
                503,
                "busy",
            ),
            (SendCommandError::Stopped, 503, "shutting_down"),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from_command("e", &error);
            assert_eq!((api.status.as_u16(), api.code), (status, code), "{error:?}");
        }
    }
}
