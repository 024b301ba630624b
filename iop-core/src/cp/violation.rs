//! The protocol rules an Edge can break ([`ProtocolViolation`]), each named by its
//! check of PROTOCOL.md §11.

use iop_proto::{BodyKind, FrameError};

/// A protocol rule the peer broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// The byte stream did not decode into frames.
    #[error("bad frame: {0}")]
    Frame(FrameError),
    /// A frame other than the hello came first (`Empty` for an unknown body).
    #[error("{0} before the hello")]
    BeforeHello(BodyKind),
    /// A second hello on an accepted session.
    #[error("second hello on an accepted session")]
    SecondHello,
    /// A frame only the Control Plane sends.
    #[error("{0} is never sent by an Edge")]
    WrongDirection(BodyKind),
    /// A status response with a correlation id never issued on this session.
    #[error("status response for correlation id {0}, never issued on this session")]
    NeverIssuedCorrelationId(u64),
    /// A status response for another Edge.
    #[error("status response names another edge_id")]
    StatusEdgeIdMismatch,
    /// A node event for another Edge.
    #[error("node event names another edge_id")]
    NodeEventEdgeIdMismatch,
    /// A node event with sequence 0 or not above the last one.
    #[error("node event sequence {got} after {last}")]
    NodeEventSequence {
        /// The last sequence seen this session.
        last: u64,
        /// The offending sequence.
        got: u64,
    },
    /// A command response when none was awaited for that id on this session.
    #[error("unsolicited command response for {command_id}")]
    UnsolicitedCommandResponse {
        /// The command.
        command_id: String,
    },
    /// A command response contradicting what the Edge said before.
    #[error("command response for {command_id} contradicts earlier events")]
    ContradictoryCommandResponse {
        /// The command.
        command_id: String,
    },
    /// A command event arrived before the command's response.
    #[error("command event for {command_id} before its response")]
    CommandEventBeforeResponse {
        /// The command.
        command_id: String,
    },
    /// A command event for a rejected command.
    #[error("command event for rejected command {command_id}")]
    CommandEventAfterRejection {
        /// The command.
        command_id: String,
    },
    /// A command event broke the phase/sequence rules of PROTOCOL.md §4.4.
    #[error("command {command_id}: {rule}")]
    CommandEventOrder {
        /// The command.
        command_id: String,
        /// Which rule.
        rule: CommandOrderRule,
    },
    /// A load update on a session that did not negotiate them.
    #[error("load update on a session that did not negotiate them")]
    LoadUpdateNotNegotiated,
    /// A load update before the session's first full status answer.
    #[error("load update before the first full status answer")]
    LoadUpdateBeforeStatus,
    /// Load updates faster than the burst and interval allow.
    #[error("load updates faster than the negotiated interval allows")]
    LoadUpdateRate,
    /// A load update naming one provider twice.
    #[error("load update names {node_id}/{provider_id} twice")]
    LoadUpdateDuplicateProvider {
        /// Its node.
        node_id: String,
        /// The provider.
        provider_id: String,
    },
}

impl ProtocolViolation {
    /// The check it fails: an id of [`checks::CONTROL_PLANE`](crate::checks::CONTROL_PLANE)
    /// (PROTOCOL.md §11).
    pub fn rule(&self) -> &'static str {
        use crate::checks::{Checker, frame_rule};
        match self {
            Self::Frame(e) => frame_rule(Checker::ControlPlane, e),
            Self::BeforeHello(_) => "cp.hello.first",
            Self::SecondHello => "cp.hello.second",
            Self::WrongDirection(_) => "cp.direction",
            Self::NeverIssuedCorrelationId(_) => "cp.status.never_issued",
            Self::StatusEdgeIdMismatch => "cp.status.edge_id",
            Self::NodeEventEdgeIdMismatch => "cp.node_event.edge_id",
            Self::NodeEventSequence { .. } => "cp.node_event.sequence",
            Self::UnsolicitedCommandResponse { .. } => "cp.command.response_unsolicited",
            Self::ContradictoryCommandResponse { .. } => "cp.command.response_contradicts",
            Self::CommandEventBeforeResponse { .. } => "cp.command.event_before_response",
            Self::CommandEventAfterRejection { .. } => "cp.command.event_after_rejection",
            Self::CommandEventOrder { rule, .. } => match rule {
                CommandOrderRule::SequenceOrder => "cp.command.event_sequence",
                CommandOrderRule::FirstNotAccepted => "cp.command.event_first_not_accepted",
                CommandOrderRule::UnknownPhase => "cp.command.event_phase",
                CommandOrderRule::PhaseBackwards => "cp.command.event_backwards",
                CommandOrderRule::AfterTerminal => "cp.command.event_after_terminal",
            },
            Self::LoadUpdateNotNegotiated => "cp.load_update.not_negotiated",
            Self::LoadUpdateBeforeStatus => "cp.load_update.before_status",
            Self::LoadUpdateRate => "cp.load_update.rate",
            Self::LoadUpdateDuplicateProvider { .. } => "cp.load_update.duplicate_provider",
        }
    }
}

/// The command event rules of PROTOCOL.md §4.4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandOrderRule {
    /// Sequence 0, or a sequence below the last one seen (a reordering).
    #[error("sequence must strictly increase from 1")]
    SequenceOrder,
    /// The event with sequence 1 was not ACCEPTED.
    #[error("sequence 1 must be ACCEPTED")]
    FirstNotAccepted,
    /// The phase is UNSPECIFIED or unknown.
    #[error("phase is unspecified or unknown")]
    UnknownPhase,
    /// The phase went backwards, or ACCEPTED repeated.
    #[error("phase went backwards")]
    PhaseBackwards,
    /// Something followed the terminal phase.
    #[error("event after the terminal phase")]
    AfterTerminal,
}
