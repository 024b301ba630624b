//! Why a request for an Edge has no answer ([`RouteError`]), with a typed
//! [`RouteErrorKind`]: the one classification of the driver's failures, for a routed
//! request and for one answered on the replica itself alike. Between replicas a kind
//! travels as its [code](RouteErrorKind::code).

use iop_driver::iop_core::cp::{Absence, CommandError, Fault, StatusError};
use iop_driver::{NoAnswer, SendCommandError, StatusRequestError};

/// What kind of failure a [`RouteError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RouteErrorKind {
    /// The Edge is not there: no replica knows it ([`Absence::Unknown`]), or it has no
    /// live session on any ([`Absence::NotConnected`]). The core's own kind, so that
    /// an Edge's absence reads the same from every layer.
    Absent(Absence),
    /// The request is malformed (a bad id, say).
    BadRequest,
    /// The request is over a limit the Edge enforces; nothing was sent.
    ExceedsLimit,
    /// The Edge did not advertise the operation.
    UnknownOperation,
    /// Too much in flight (on the Edge's session, or on the answering replica).
    Busy,
    /// No answer within the wait.
    Timeout,
    /// The Edge's session ended before it answered a status request.
    SessionEnded,
    /// The Edge came back without the command ([`NoAnswer::Lost`]).
    CommandLost,
    /// Sessions ended without answering the command ([`NoAnswer::Undeliverable`]).
    Undeliverable,
    /// The Edge was forgotten before it answered ([`NoAnswer::Forgotten`]).
    Forgotten,
    /// The Edge stayed away longer than it remembers the command
    /// ([`NoAnswer::Abandoned`]).
    Abandoned,
    /// The command finished before its answer was seen ([`NoAnswer::Finished`]).
    FinishedUnanswered,
    /// The command's record left the bounded book ([`NoAnswer::Untracked`]).
    Untracked,
    /// The cluster's engine could not record what had to be recorded first.
    EngineUnavailable,
    /// The answering Control Plane is stopping.
    ShuttingDown,
    /// The command id names another command.
    Conflict,
    /// Anything else (a replica unreachable, an answer no replica sends).
    Unavailable,
}

/// Every kind with its code, the one table both directions read.
const CODES: [(RouteErrorKind, &str); 18] = [
    (
        RouteErrorKind::Absent(Absence::NotConnected),
        "not_connected",
    ),
    (RouteErrorKind::Absent(Absence::Unknown), "unknown_edge"),
    (RouteErrorKind::BadRequest, "bad_request"),
    (RouteErrorKind::ExceedsLimit, "exceeds_limit"),
    (RouteErrorKind::UnknownOperation, "unknown_operation"),
    (RouteErrorKind::Busy, "busy"),
    (RouteErrorKind::Timeout, "timeout"),
    (RouteErrorKind::SessionEnded, "session_ended"),
    (RouteErrorKind::CommandLost, "command_lost"),
    (RouteErrorKind::Undeliverable, "undeliverable"),
    (RouteErrorKind::Forgotten, "forgotten"),
    (RouteErrorKind::Abandoned, "abandoned"),
    (RouteErrorKind::FinishedUnanswered, "finished_unanswered"),
    (RouteErrorKind::Untracked, "untracked"),
    (RouteErrorKind::EngineUnavailable, "engine_unavailable"),
    (RouteErrorKind::ShuttingDown, "shutting_down"),
    (RouteErrorKind::Conflict, "conflict"),
    (RouteErrorKind::Unavailable, "unavailable"),
];

impl RouteErrorKind {
    /// Every kind with its code (for documentation that must list them all).
    pub fn all() -> impl Iterator<Item = (Self, &'static str)> {
        CODES.into_iter()
    }

    /// The stable code, as the admin API names it and replicas send it.
    pub fn code(self) -> &'static str {
        CODES
            .iter()
            .find(|(kind, _)| *kind == self)
            .map_or("unavailable", |(_, code)| code)
    }

    /// The kind `code` names; `None` for a code no replica sends.
    pub fn from_code(code: &str) -> Option<Self> {
        CODES
            .iter()
            .find(|(_, c)| *c == code)
            .map(|(kind, _)| *kind)
    }

    /// The kind of a failed status round trip.
    pub fn of_status(e: &StatusRequestError) -> Self {
        match e {
            StatusRequestError::Refused(e) => match (e.fault(), e) {
                (Fault::Absent, StatusError::Absent(a)) => Self::Absent(a.absence),
                (Fault::Busy, _) => Self::Busy,
                (_, StatusError::ExceedsLimit(_)) => Self::ExceedsLimit,
                _ => Self::BadRequest,
            },
            StatusRequestError::TimedOut => Self::Timeout,
            StatusRequestError::Abandoned => Self::SessionEnded,
            StatusRequestError::Stopped => Self::ShuttingDown,
            _ => Self::Unavailable,
        }
    }

    /// The kind of a command the Control Plane would not send.
    pub fn of_command(e: &SendCommandError) -> Self {
        match e {
            SendCommandError::Refused(e) => match (e.fault(), e) {
                (Fault::Absent, CommandError::Absent(a)) => Self::Absent(a.absence),
                (Fault::Busy, _) => Self::Busy,
                (_, CommandError::OperationNotAdvertised { .. }) => Self::UnknownOperation,
                (_, CommandError::ExceedsLimit(_)) => Self::ExceedsLimit,
                _ => Self::BadRequest,
            },
            SendCommandError::Conflict { .. } => Self::Conflict,
            SendCommandError::Stopped => Self::ShuttingDown,
            _ => Self::Unavailable,
        }
    }

    /// The kind of a command's missing answer.
    pub fn of_no_answer(e: &NoAnswer) -> Self {
        match e {
            NoAnswer::Lost => Self::CommandLost,
            NoAnswer::Undeliverable { .. } => Self::Undeliverable,
            NoAnswer::Forgotten => Self::Forgotten,
            NoAnswer::Abandoned { .. } => Self::Abandoned,
            NoAnswer::Unrecorded { .. } => Self::EngineUnavailable,
            NoAnswer::Conflict => Self::Conflict,
            NoAnswer::Finished { .. } => Self::FinishedUnanswered,
            NoAnswer::Stopped => Self::ShuttingDown,
            NoAnswer::Untracked => Self::Untracked,
            NoAnswer::TimedOut { .. } => Self::Timeout,
            _ => Self::Unavailable,
        }
    }
}

/// Why a routed request has no answer from the Edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RouteError {
    /// What kind of failure.
    pub kind: RouteErrorKind,
    /// What happened.
    pub message: String,
    /// The command it is about, when one was made (a command that timed out, or whose
    /// answer could not be recorded, is still tracked under it).
    pub command_id: Option<String>,
}

impl RouteError {
    /// A failure of `kind`.
    pub fn new(kind: RouteErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            command_id: None,
        }
    }

    pub(crate) fn about(mut self, command_id: &str) -> Self {
        self.command_id = Some(command_id.to_owned());
        self
    }

    pub(crate) fn not_connected(edge_id: &str) -> Self {
        Self::new(
            RouteErrorKind::Absent(Absence::NotConnected),
            format!("edge {edge_id:?} is not connected"),
        )
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(RouteErrorKind::Unavailable, message)
    }

    pub(crate) fn from_status(e: &StatusRequestError) -> Self {
        Self::new(RouteErrorKind::of_status(e), e.to_string())
    }

    pub(crate) fn from_command(e: &SendCommandError) -> Self {
        Self::new(RouteErrorKind::of_command(e), e.to_string())
    }

    pub(crate) fn from_no_answer(e: &NoAnswer) -> Self {
        Self::new(RouteErrorKind::of_no_answer(e), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_code_that_reads_back() {
        for (kind, code) in CODES {
            assert_eq!(kind.code(), code);
            assert_eq!(RouteErrorKind::from_code(code), Some(kind));
        }
        let mut codes: Vec<&str> = CODES.iter().map(|(_, c)| *c).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), CODES.len());
        assert_eq!(RouteErrorKind::from_code("no_such_code"), None);
    }

    #[test]
    fn a_refusal_is_classified_by_whom_it_is_down_to() {
        use iop_driver::iop_core::cp::EdgeAbsent;
        use iop_driver::iop_core::outbound::OutboundError;
        let too_large = OutboundError::FrameTooLarge { len: 2, max: 1 };
        let status = [
            (EdgeAbsent::unknown("e").into(), "unknown_edge"),
            (EdgeAbsent::not_connected("e").into(), "not_connected"),
            (StatusError::TooManyInFlight { limit: 1 }, "busy"),
            // The caller's request, never the Edge's load.
            (StatusError::TooLarge(too_large.clone()), "bad_request"),
        ];
        for (e, code) in status {
            let kind = RouteErrorKind::of_status(&StatusRequestError::Refused(e.clone()));
            assert_eq!(kind.code(), code, "{e:?}");
        }
        let command = [
            (EdgeAbsent::not_connected("e").into(), "not_connected"),
            (CommandError::TooManyInFlight { limit: 1 }, "busy"),
            (CommandError::DuplicateCommandId("c".into()), "bad_request"),
            (CommandError::TooLarge(too_large), "bad_request"),
        ];
        for (e, code) in command {
            let kind = RouteErrorKind::of_command(&SendCommandError::Refused(e.clone()));
            assert_eq!(kind.code(), code, "{e:?}");
        }
    }

    #[test]
    fn every_missing_answer_has_a_kind_of_its_own() {
        let endings = [
            NoAnswer::Lost,
            NoAnswer::Undeliverable {
                sessions: 3,
                session_ids: vec![1, 2, 3],
            },
            NoAnswer::Forgotten,
            NoAnswer::Unrecorded { reason: "x".into() },
            NoAnswer::Conflict,
            NoAnswer::Stopped,
            NoAnswer::Untracked,
            NoAnswer::TimedOut {
                wait: std::time::Duration::from_secs(1),
            },
        ];
        for e in &endings {
            // The driver's own name for an ending is the route's code for it.
            assert_eq!(RouteErrorKind::of_no_answer(e).code(), e.code(), "{e:?}");
        }
    }
}
