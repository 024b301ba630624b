//! JSON errors of the admin API: `{ "error": { "code": ..., "message": ... } }` with the
//! fitting HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use iop_core::cp::{Absence, CommandError, EndingKind, StatusError};
use iop_core::proto::ExceedsLimit;

use iop_cluster::{RouteError, RouteErrorKind};
use iop_tokio::{NoAnswer, SendCommandError, StatusRequestError};

/// An admin API error: an HTTP status, a stable machine-readable code, and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The kind of failure, for an error about an Edge, a status or a command (what
    /// a caller matches on; never the code's text).
    pub kind: Option<RouteErrorKind>,
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
            kind: None,
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

    /// 409 `conflict`: the caller's command id names another command of the Edge.
    pub fn conflict() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "conflict",
            "this command id already names another command (other operation, selector, \
             metadata or timeout): the same key must mean the same command",
        )
    }

    /// A failure of `kind`, with its HTTP status (the one table, `http_status`) and code.
    pub fn of_kind(kind: RouteErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind: Some(kind),
            ..Self::new(http_status(kind), kind.code(), message)
        }
    }

    /// A failure of `kind` about `edge_id`, in the words the admin API uses for the
    /// kinds that say where the Edge is; `fallback` for the others.
    fn about_edge(kind: RouteErrorKind, edge_id: &str, fallback: String) -> Self {
        let with_kind = |e: Self| Self {
            kind: Some(kind),
            ..e
        };
        match kind {
            RouteErrorKind::Absent(Absence::Unknown) => with_kind(Self::unknown_edge(edge_id)),
            RouteErrorKind::Ended(EndingKind::Conflict) => with_kind(Self::conflict()),
            RouteErrorKind::Absent(Absence::NotConnected) => Self::of_kind(
                kind,
                format!(
                    "edge {edge_id:?} is known but has no live session now (it redials on its own)"
                ),
            ),
            _ => Self::of_kind(kind, fallback),
        }
    }

    /// Maps a failed status round trip.
    pub fn from_status(edge_id: &str, e: &StatusRequestError) -> Self {
        let kind = RouteErrorKind::of_status(e);
        match e {
            StatusRequestError::Refused(StatusError::ExceedsLimit(limit)) => {
                Self::exceeds_limit(limit)
            }
            StatusRequestError::TimedOut => Self::of_kind(
                kind,
                format!("edge {edge_id:?} did not answer the status request in time"),
            ),
            StatusRequestError::Abandoned => Self::of_kind(
                kind,
                format!("the session of edge {edge_id:?} ended before it answered"),
            ),
            _ => Self::about_edge(kind, edge_id, e.to_string()),
        }
    }

    /// Maps a command the control plane would not send.
    pub fn from_command(edge_id: &str, e: &SendCommandError) -> Self {
        match e {
            SendCommandError::Refused(CommandError::ExceedsLimit(limit)) => {
                Self::exceeds_limit(limit)
            }
            _ => Self::about_edge(RouteErrorKind::of_command(e), edge_id, e.to_string()),
        }
    }

    /// Maps a command's missing answer (`command_id`, still tracked under it).
    pub fn from_no_answer(edge_id: &str, command_id: &str, e: &NoAnswer) -> Self {
        let kind = RouteErrorKind::of_no_answer(e);
        let message = match e {
            NoAnswer::TimedOut { wait } => format!(
                "edge {edge_id:?} did not answer command {command_id} within {} ms; \
                 it stays tracked: GET /v1/commands/{command_id}",
                wait.as_millis()
            ),
            _ => e.to_string(),
        };
        Self {
            command_id: Some(command_id.to_owned()),
            ..Self::about_edge(kind, edge_id, message)
        }
    }

    /// Maps a routed request's failure.
    pub fn from_route(edge_id: &str, e: &RouteError) -> Self {
        Self {
            command_id: e.command_id.clone(),
            ..Self::about_edge(e.kind, edge_id, e.message.clone())
        }
    }
}

/// The HTTP status of each kind of failure: the admin API's one table, for requests
/// answered here and for those routed to another replica alike.
pub(super) fn http_status(kind: RouteErrorKind) -> StatusCode {
    use RouteErrorKind as K;
    match kind {
        K::Absent(Absence::NotConnected) => StatusCode::CONFLICT,
        K::Absent(_) => StatusCode::NOT_FOUND,
        K::BadRequest | K::ExceedsLimit | K::UnknownOperation => StatusCode::BAD_REQUEST,
        K::Timeout => StatusCode::GATEWAY_TIMEOUT,
        K::Ended(ending) => ending_status(ending),
        // The command can never be answered as asked: it ended on the Edge's side.
        K::FinishedUnanswered => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The HTTP status of each way a command ends without its Edge's word: a new
/// [`EndingKind`] is added here.
fn ending_status(ending: EndingKind) -> StatusCode {
    match ending {
        EndingKind::Conflict => StatusCode::CONFLICT,
        // Never to be answered as asked: sessions kept ending without an answer.
        EndingKind::Undeliverable => StatusCode::UNPROCESSABLE_ENTITY,
        // Its Edge is gone from this Control Plane's books, or past remembering it.
        EndingKind::Forgotten | EndingKind::Abandoned => StatusCode::GONE,
        // Lost by the Edge, or not recorded: try again (under the same id).
        EndingKind::Lost | EndingKind::Unrecorded => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

impl ApiError {
    /// The body this error answers with: `{"error": {"code", "message", ...}}`.
    pub fn into_json(self) -> serde_json::Value {
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
        serde_json::json!({ "error": error })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        (status, axum::Json(self.into_json())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iop_core::cp::{EdgeAbsent, Ending};

    #[test]
    fn status_failures_map_to_their_http_status() {
        let cases = [
            (
                StatusRequestError::Refused(EdgeAbsent::not_connected("e").into()),
                409,
                "not_connected",
            ),
            (
                StatusRequestError::Refused(EdgeAbsent::unknown("e").into()),
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
    fn every_missing_answer_has_its_own_code_and_status() {
        let wait = std::time::Duration::from_secs(1);
        let ended = |e| NoAnswer::Ended(e);
        let cases = [
            (ended(Ending::Lost), 503, "command_lost"),
            (
                ended(Ending::Undeliverable {
                    sessions: 3,
                    session_ids: vec![4, 5, 6],
                }),
                422,
                "undeliverable",
            ),
            (ended(Ending::Forgotten), 410, "forgotten"),
            (
                ended(Ending::Abandoned {
                    disconnected_for: wait,
                }),
                410,
                "abandoned",
            ),
            (
                ended(Ending::Unrecorded { reason: "x".into() }),
                503,
                "engine_unavailable",
            ),
            (ended(Ending::Conflict), 409, "conflict"),
            (NoAnswer::Stopped, 503, "shutting_down"),
            (NoAnswer::Untracked, 503, "untracked"),
            (NoAnswer::TimedOut { wait }, 504, "timeout"),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from_no_answer("e", "c", &error);
            assert_eq!((api.status.as_u16(), api.code), (status, code), "{error:?}");
            assert_eq!(api.command_id.as_deref(), Some("c"));
            // Routed from another replica, the same ending answers the same.
            let routed = RouteError::new(RouteErrorKind::of_no_answer(&error), "m");
            let api = ApiError::from_route("e", &routed);
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
                SendCommandError::Refused(EdgeAbsent::not_connected("e").into()),
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
                SendCommandError::Refused(EdgeAbsent::unknown("e").into()),
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
