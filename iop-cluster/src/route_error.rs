//! Why a request for an Edge has no answer ([`RouteError`]), with a typed
//! [`RouteErrorKind`]: the one classification of the driver's failures, for a routed
//! request and for one answered on the replica itself alike. Between replicas a kind
//! travels as its [code](RouteErrorKind::code).

#[cfg(test)]
use iop_driver::iop_core::cp::Ending;
use iop_driver::iop_core::cp::{Absence, CommandError, EndingKind, Fault, StatusError};
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
    /// The command ended without the Edge's word ([`Ending`](iop_driver::iop_core::cp::Ending), its kind): lost,
    /// undeliverable, abandoned, forgotten, a conflict of its id, or not recorded — the
    /// cluster's engine could not write its record, before it was sent (it was not) or
    /// with the Edge's answer (it stays tracked under its id).
    Ended(EndingKind),
    /// The command finished before its answer was seen ([`NoAnswer::Finished`]).
    FinishedUnanswered,
    /// The command's record left the bounded book ([`NoAnswer::Untracked`]).
    Untracked,
    /// The answering Control Plane is stopping.
    ShuttingDown,
    /// Anything else (a replica unreachable, an answer no replica sends).
    Unavailable,
}

/// Every kind but the endings with its code, the one table both directions read (an
/// ending's code is its own, [`EndingKind::code`]).
const CODES: [(RouteErrorKind, &str); 12] = [
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
    (RouteErrorKind::FinishedUnanswered, "finished_unanswered"),
    (RouteErrorKind::Untracked, "untracked"),
    (RouteErrorKind::ShuttingDown, "shutting_down"),
    (RouteErrorKind::Unavailable, "unavailable"),
];

impl RouteErrorKind {
    /// Every kind with its code (for documentation that must list them all).
    pub fn all() -> impl Iterator<Item = (Self, &'static str)> {
        CODES.into_iter().chain(
            EndingKind::ALL
                .into_iter()
                .map(|k| (RouteErrorKind::Ended(k), k.code())),
        )
    }

    /// The stable code, as the admin API names it and replicas send it.
    pub fn code(self) -> &'static str {
        if let Self::Ended(k) = self {
            return k.code();
        }
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
            .or_else(|| EndingKind::from_code(code).map(Self::Ended))
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
            SendCommandError::Conflict { .. } => Self::Ended(EndingKind::Conflict),
            SendCommandError::Stopped => Self::ShuttingDown,
            _ => Self::Unavailable,
        }
    }

    /// The kind of a command's missing answer.
    pub fn of_no_answer(e: &NoAnswer) -> Self {
        match e {
            NoAnswer::Ended(ending) => Self::Ended(ending.kind()),
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

    /// An ending of `kind`, its details made up.
    fn ending_of(kind: EndingKind) -> Ending {
        match kind {
            EndingKind::Lost => Ending::Lost,
            EndingKind::Undeliverable => Ending::Undeliverable {
                sessions: 3,
                session_ids: vec![1, 2, 3],
            },
            EndingKind::Abandoned => Ending::Abandoned {
                disconnected_for: std::time::Duration::from_secs(1),
            },
            EndingKind::Forgotten => Ending::Forgotten,
            EndingKind::Unrecorded => Ending::Unrecorded { reason: "x".into() },
            _ => Ending::Conflict,
        }
    }

    #[test]
    fn every_kind_has_one_code_that_reads_back() {
        for (kind, code) in RouteErrorKind::all() {
            assert_eq!(kind.code(), code);
            assert_eq!(RouteErrorKind::from_code(code), Some(kind));
        }
        let mut codes: Vec<&str> = RouteErrorKind::all().map(|(_, c)| c).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), RouteErrorKind::all().count());
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
        let mut endings: Vec<NoAnswer> = EndingKind::ALL
            .iter()
            .map(|k| NoAnswer::Ended(ending_of(*k)))
            .collect();
        endings.extend([
            NoAnswer::Stopped,
            NoAnswer::Untracked,
            NoAnswer::TimedOut {
                wait: std::time::Duration::from_secs(1),
            },
        ]);
        for e in &endings {
            // The driver's own name for an ending is the route's code for it.
            assert_eq!(RouteErrorKind::of_no_answer(e).code(), e.code(), "{e:?}");
        }
    }
}
