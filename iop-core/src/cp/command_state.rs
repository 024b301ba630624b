//! A command as the application sees it: what it asks an Edge to do
//! ([`CommandSpec`]), and what the Control Plane knows of it since ([`CommandState`],
//! [`CommandAnswer`]).

use iop_proto::{CommandPhase, CommandRejectReason};

use super::event::CommandOutcome;

/// What the application asks an Edge to do.
///
/// Built with [`CommandSpec::new`] and the `with_*` methods; `#[non_exhaustive]`, so a
/// later field is not a breaking change.
///
/// ```
/// use iop_core::cp::CommandSpec;
///
/// let spec = CommandSpec::new("node.drain")
///     .with_target("label:zone=a")
///     .with_metadata("reason", "maintenance")
///     .with_timeout_ms(30_000);
/// assert_eq!(spec.operation, "node.drain");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandSpec {
    /// An operation the Edge advertised in its hello.
    pub operation: String,
    /// A target selector (PROTOCOL.md §6), interpreted by the Edge.
    pub target_selector: String,
    /// Free-form metadata for the Edge's handler.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// Timeout on the Edge; 0 means its default.
    pub timeout_ms: u32,
    /// The caller's idempotency key (PROTOCOL.md §4.4), `None` for an id the Control
    /// Plane chooses. A command sent again under a key the Control Plane knows for the
    /// Edge, with the same content, is that command (nothing is sent again); with
    /// other content it is refused as a conflict.
    pub command_id: Option<String>,
}

impl CommandSpec {
    /// A command for `operation`, targeting the whole Edge (empty selector), with the
    /// Edge's default timeout.
    pub fn new(operation: impl Into<String>) -> Self {
        Self {
            operation: operation.into(),
            ..Self::default()
        }
    }

    /// Sets the target selector (PROTOCOL.md §6), e.g. `node:gpu-1` or `label:zone=a`.
    pub fn with_target(mut self, selector: impl Into<String>) -> Self {
        self.target_selector = selector.into();
        self
    }

    /// Adds a metadata entry for the Edge's handler.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Sets the timeout on the Edge, in milliseconds (0: the Edge's default).
    pub fn with_timeout_ms(mut self, timeout_ms: u32) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Sets the command id: the caller's idempotency key (`[A-Za-z0-9._-]{1,128}`).
    /// A caller that lost an answer sends again with the same key and never runs the
    /// command twice.
    pub fn with_id(mut self, command_id: impl Into<String>) -> Self {
        self.command_id = Some(command_id.into());
        self
    }

    /// Whether `request` asks for what this spec asks (its id aside): the same
    /// operation, selector, metadata and timeout.
    pub fn same_content(&self, request: &iop_proto::EdgeCommandRequest) -> bool {
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
/// ([`ControlPlane::command`](super::ControlPlane::command)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandState {
    /// The command id.
    pub command_id: String,
    /// Its operation.
    pub operation: String,
    /// The Edge's answer.
    pub answer: CommandAnswer,
    /// The latest phase seen (UNSPECIFIED before any event).
    pub phase: CommandPhase,
    /// The latest event sequence seen (0 before any event).
    pub last_sequence: u32,
    /// Set once the command is finished for good.
    pub outcome: Option<CommandOutcome>,
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
