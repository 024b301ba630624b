//! A command as the application sees it: what it asks an Edge to do
//! ([`CommandSpec`]), what the Control Plane knows of it since ([`CommandState`],
//! [`CommandAnswer`]), and how it ended ([`CommandOutcome`], with its one encoding for
//! records kept outside the core).

use iop_proto::{CommandPhase, CommandRejectReason, EdgeCommandRequest};

use super::ending::{Ending, EndingKind};

/// What the application asks an Edge to do: the wire's request
/// ([`EdgeCommandRequest`]), whose `command_id` is the caller's idempotency key or empty
/// for an id the Control Plane chooses. A spec is the request itself, read and
/// changed through it (`Deref`), so nothing converts one into the other.
///
/// Built with [`CommandSpec::new`] and the `with_*` methods.
///
/// ```
/// use iop_core::cp::CommandSpec;
///
/// let spec = CommandSpec::new("node.drain")
///     .with_target("label:zone=a")
///     .with_metadata("reason", "maintenance")
///     .with_timeout_ms(30_000);
/// assert_eq!(spec.operation, "node.drain");
/// assert!(spec.command_id.is_empty(), "the Control Plane chooses the id");
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandSpec(EdgeCommandRequest);

impl std::ops::Deref for CommandSpec {
    type Target = EdgeCommandRequest;

    fn deref(&self) -> &EdgeCommandRequest {
        &self.0
    }
}

impl std::ops::DerefMut for CommandSpec {
    fn deref_mut(&mut self) -> &mut EdgeCommandRequest {
        &mut self.0
    }
}

impl From<EdgeCommandRequest> for CommandSpec {
    /// The spec of what `request` asks, its `command_id` the caller's key (none when
    /// empty): the admin API's body and a routed command arrive as the wire's request.
    fn from(request: EdgeCommandRequest) -> Self {
        Self(request)
    }
}

impl CommandSpec {
    /// A command for `operation`, targeting the whole Edge (empty selector), with the
    /// Edge's default timeout.
    pub fn new(operation: impl Into<String>) -> Self {
        Self(EdgeCommandRequest {
            operation: operation.into(),
            ..EdgeCommandRequest::default()
        })
    }

    /// A cancellation of `command_id` (PROTOCOL.md §4.4, [`crate::cancel`]): the
    /// operation [`CANCEL_OPERATION`](crate::cancel::CANCEL_OPERATION) with the target
    /// named in its metadata, under the id [`cancel_id`](crate::cancel::cancel_id)
    /// gives (so asking twice is one command).
    pub fn cancel(command_id: &str) -> Self {
        let spec = Self::new(crate::cancel::CANCEL_OPERATION)
            .with_metadata(crate::cancel::CANCEL_TARGET_KEY, command_id);
        match crate::cancel::cancel_id(command_id) {
            Some(id) => spec.with_id(id),
            None => spec,
        }
    }

    /// Sets the target selector (PROTOCOL.md §6), e.g. `node:gpu-1` or `label:zone=a`.
    pub fn with_target(mut self, selector: impl Into<String>) -> Self {
        self.0.target_selector = selector.into();
        self
    }

    /// Adds a metadata entry for the Edge's handler.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.0.metadata.insert(key.into(), value.into());
        self
    }

    /// Sets the timeout on the Edge, in milliseconds (0: the Edge's default).
    pub fn with_timeout_ms(mut self, timeout_ms: u32) -> Self {
        self.0.timeout_ms = timeout_ms;
        self
    }

    /// Sets the command id: the caller's idempotency key (`[A-Za-z0-9._-]{1,128}`).
    /// A caller that lost an answer sends again with the same key and never runs the
    /// command twice. A spec sent again under a key the Control Plane knows for the
    /// Edge, with the same content, is that command (nothing is sent again); with other
    /// content it is refused as a conflict.
    pub fn with_id(mut self, command_id: impl Into<String>) -> Self {
        self.0.command_id = command_id.into();
        self
    }

    /// The caller's key, `None` when the Control Plane is to choose the id.
    pub fn key(&self) -> Option<&str> {
        Some(self.0.command_id.as_str()).filter(|id| !id.is_empty())
    }

    /// The request this spec is.
    pub fn into_request(self) -> EdgeCommandRequest {
        self.0
    }

    /// Whether `request` asks for what this spec asks (its id aside): the same
    /// operation, selector, metadata and timeout.
    pub fn same_content(&self, request: &EdgeCommandRequest) -> bool {
        self.operation == request.operation
            && self.target_selector == request.target_selector
            && self.metadata == request.metadata
            && self.timeout_ms == request.timeout_ms
    }
}

/// The Edge's answer to a command, as far as the Control Plane knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandAnswer {
    /// No response yet.
    Pending,
    /// Accepted.
    Accepted,
    /// Rejected with this reason.
    Rejected(CommandRejectReason),
}

/// What the Control Plane knows about one command
/// ([`ControlPlane::command`](super::ControlPlane::command)), and all another Control
/// Plane needs to carry it on (PROTOCOL.md §8 "Command records").
///
/// The replica holding an Edge keeps each command's state in a shared store as it
/// changes; the replica that next wins the Edge's ownership claim hands the unfinished
/// ones to its core with
/// [`ControlPlane::adopt_commands`](super::ControlPlane::adopt_commands) before it
/// grants the claim. When the hello is then accepted, the adopted commands join the
/// Edge's own (the further advanced of two copies of one command wins) before the
/// hello's `inflight_command_ids` are compared with them: a command never answered is
/// re-sent, one believed accepted that the Edge no longer holds is marked lost, and the
/// Edge's replayed events of those it holds are de-duplicated against what was adopted.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CommandState {
    /// The request as sent (re-sent as it is when it was never answered).
    pub request: EdgeCommandRequest,
    /// The Edge's answer.
    pub answer: CommandAnswer,
    /// The latest phase seen (UNSPECIFIED before any event).
    pub phase: CommandPhase,
    /// The latest event sequence seen (0 before any event).
    pub last_sequence: u32,
    /// Set once the command is finished for good.
    pub outcome: Option<CommandOutcome>,
    /// Sessions its request was sent on that ended without its response.
    pub unanswered_sessions: u32,
}

impl CommandState {
    /// A command sent and not answered yet.
    pub fn new(request: EdgeCommandRequest) -> Self {
        Self {
            request,
            answer: CommandAnswer::Pending,
            phase: CommandPhase::Unspecified,
            last_sequence: 0,
            outcome: None,
            unanswered_sessions: 0,
        }
    }

    /// Whether it ended without ever being sent ([`Ending::Unrecorded`],
    /// [`Ending::Conflict`]): its id may be sent anew.
    pub fn ended_unsent(&self) -> bool {
        self.outcome
            .as_ref()
            .is_some_and(CommandOutcome::never_sent)
    }

    /// The command id.
    pub fn command_id(&self) -> &str {
        &self.request.command_id
    }

    /// Its operation.
    pub fn operation(&self) -> &str {
        &self.request.operation
    }

    /// How far the command got: a copy further on replaces an older one.
    pub(crate) fn progress(&self) -> (bool, bool, u32) {
        progress(self.outcome.is_some(), self.answer, self.last_sequence)
    }
}

/// The order in which a command's copies are compared: finished, answered, then by
/// the latest event sequence seen.
pub(crate) fn progress(
    finished: bool,
    answer: CommandAnswer,
    last_sequence: u32,
) -> (bool, bool, u32) {
    (finished, answer != CommandAnswer::Pending, last_sequence)
}

/// How a command left the Control Plane's books for good.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandOutcome {
    /// The Edge rejected it.
    Rejected(CommandRejectReason),
    /// A terminal event arrived with this phase.
    Finished(CommandPhase),
    /// It ended without the Edge's word ([`Ending`]): FAILED.
    Ended(Ending),
}

impl CommandOutcome {
    /// Whether the command ended without ever being sent ([`Ending::Unrecorded`],
    /// [`Ending::Conflict`]).
    pub(crate) fn never_sent(&self) -> bool {
        matches!(
            self,
            CommandOutcome::Ended(Ending::Unrecorded { .. } | Ending::Conflict)
        )
    }

    /// The outcome's one encoding for records kept outside the core (a cluster's
    /// engine): a code (never 0, which such a record keeps for "unfinished") and a
    /// value: 1 rejected (the `CommandRejectReason`), 2 finished (the terminal
    /// `CommandPhase`), 3 lost, 4 undeliverable (the sessions), 5 forgotten,
    /// 6 unrecorded, 7 abandoned, 8 conflict (value 0). An ending's other details
    /// (session ids, how long, the journal's words) are not kept.
    pub fn encode(&self) -> (u32, u32) {
        let enum_value = |v: i32| u32::try_from(v).unwrap_or(0);
        match self {
            Self::Rejected(reason) => (1, enum_value(*reason as i32)),
            Self::Finished(phase) => (2, enum_value(*phase as i32)),
            Self::Ended(ending) => {
                let code = match ending.kind() {
                    EndingKind::Lost => 3,
                    EndingKind::Undeliverable => 4,
                    EndingKind::Forgotten => 5,
                    EndingKind::Unrecorded => 6,
                    EndingKind::Abandoned => 7,
                    EndingKind::Conflict => 8,
                };
                (code, ending.value())
            }
        }
    }

    /// The outcome [`encode`](Self::encode) wrote as `(code, value)`; `None` for what it
    /// never writes (code 0, an unknown code, a reason or phase out of range, a phase
    /// that is not terminal).
    pub fn decode(code: u32, value: u32) -> Option<Self> {
        let enum_value = i32::try_from(value).ok();
        let ended = |kind| Ending::read(kind, value).map(Self::Ended);
        match code {
            1 => CommandRejectReason::try_from(enum_value?)
                .ok()
                .map(Self::Rejected),
            2 => CommandPhase::try_from(enum_value?)
                .ok()
                .filter(|p| p.is_terminal())
                .map(Self::Finished),
            3 => ended(EndingKind::Lost),
            4 => ended(EndingKind::Undeliverable),
            5 => ended(EndingKind::Forgotten),
            6 => ended(EndingKind::Unrecorded),
            7 => ended(EndingKind::Abandoned),
            8 => ended(EndingKind::Conflict),
            _ => None,
        }
    }

    /// Its ending, when it ended without the Edge's word.
    pub fn ending(&self) -> Option<&Ending> {
        match self {
            Self::Ended(ending) => Some(ending),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_copy_is_further_on_than_any_unfinished_one() {
        let request = EdgeCommandRequest::default();
        let mut running = CommandState::new(request.clone());
        running.answer = CommandAnswer::Accepted;
        running.last_sequence = 9;
        let mut done = CommandState::new(request);
        done.outcome = Some(CommandOutcome::Ended(Ending::Lost));
        assert!(done.progress() > running.progress());
    }

    #[test]
    fn every_outcome_reads_back_from_its_encoding_and_nothing_else_does() {
        let all = [
            CommandOutcome::Rejected(CommandRejectReason::Busy),
            CommandOutcome::Finished(CommandPhase::Succeeded),
            CommandOutcome::Finished(CommandPhase::TimedOut),
        ]
        .into_iter()
        .chain(EndingKind::ALL.map(|k| {
            let value = u32::from(k == EndingKind::Undeliverable) * 3;
            CommandOutcome::Ended(Ending::read(k, value).unwrap())
        }));
        for outcome in all {
            let (code, value) = outcome.encode();
            assert_ne!(code, 0);
            assert_eq!(CommandOutcome::decode(code, value), Some(outcome));
        }
        let running = CommandPhase::Running as u32;
        for (code, value) in [
            (0, 0),
            (9, 0),
            (7, 1),
            (2, running),
            (2, 99),
            (1, 99),
            (3, 1),
        ] {
            assert_eq!(CommandOutcome::decode(code, value), None, "{code}/{value}");
        }
    }
}
