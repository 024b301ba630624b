//! A command's end as a `Result`: [`CommandTracker::outcome`] waits for it, `Ok` only
//! when the Edge reported SUCCEEDED.

use std::collections::BTreeMap;

use iop_core::cp::CommandOutcome;
use iop_core::proto::{CommandPhase, CommandRejectReason};

use super::book::CommandRecord;
use super::tracker::CommandTracker;
use crate::Runtime;

/// A command that SUCCEEDED: its terminal event's message and detail, and its record.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Terminal {
    /// The terminal event's message.
    pub message: String,
    /// The terminal event's detail.
    pub detail: BTreeMap<String, String>,
    /// When the Edge says it finished (Unix ms).
    pub occurred_at_unix_ms: u64,
    /// Everything the Control Plane kept of the command.
    pub record: CommandRecord,
}

/// Why a command did not succeed, from [`CommandTracker::outcome`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandFailure {
    /// The Edge refused to run it.
    #[error("the edge rejected the command ({reason:?}): {message}")]
    Rejected {
        /// The Edge's reason.
        reason: CommandRejectReason,
        /// The Edge's message.
        message: String,
    },
    /// It ran and ended FAILED, CANCELLED or TIMED_OUT.
    #[error("the command ended {phase:?}: {message}")]
    Ended {
        /// The terminal phase.
        phase: CommandPhase,
        /// The terminal event's message.
        message: String,
        /// The terminal event's detail.
        detail: BTreeMap<String, String>,
    },
    /// The Edge came back without it (it restarted): treated as FAILED.
    #[error("the edge lost the command (it reconnected without it)")]
    Lost,
    /// Its request went out on this many sessions that each ended unanswered, and it
    /// is never sent again.
    #[error("the command was undeliverable: {sessions} sessions ended without an answer")]
    Undeliverable {
        /// Sessions that ended without answering it.
        sessions: u32,
    },
    /// Its Edge stayed away longer than it remembers commands: its outcome can never
    /// be learned.
    #[error("the command was abandoned: its edge stayed away longer than it remembers commands")]
    Abandoned,
    /// The Control Plane forgot its Edge (disconnected too long) before it finished.
    #[error("the edge was forgotten before the command finished")]
    Forgotten,
    /// Its record could not be written before it was sent (a cluster's engine was
    /// unavailable): it was never sent.
    #[error("the command was not sent: its record could not be written ({reason})")]
    Unrecorded {
        /// What the journal said.
        reason: String,
    },
    /// Its record left the handle's bounded book (too many newer commands) or the
    /// server stopped before it finished: the outcome is not known here.
    #[error("the command's outcome is unknown: its record ended before it finished")]
    Untracked,
}

impl<R: Runtime> CommandTracker<R> {
    /// Waits for the command to finish: `Ok` when it SUCCEEDED, else why not.
    pub async fn outcome(self) -> Result<Terminal, CommandFailure> {
        let record = self.finish().await.ok_or(CommandFailure::Untracked)?;
        judge(record)
    }
}

fn judge(record: CommandRecord) -> Result<Terminal, CommandFailure> {
    let terminal = record
        .events()
        .last()
        .filter(|e| e.phase_enum().known().is_none_or(CommandPhase::is_terminal))
        .cloned();
    match &record.outcome {
        None => Err(CommandFailure::Untracked),
        Some(CommandOutcome::Rejected(reason)) => Err(CommandFailure::Rejected {
            reason: *reason,
            message: record
                .response()
                .map(|r| r.message.clone())
                .unwrap_or_default(),
        }),
        Some(CommandOutcome::Lost) => Err(CommandFailure::Lost),
        Some(CommandOutcome::Undeliverable { sessions }) => Err(CommandFailure::Undeliverable {
            sessions: *sessions,
        }),
        Some(CommandOutcome::Forgotten) => Err(CommandFailure::Forgotten),
        Some(CommandOutcome::Abandoned) => Err(CommandFailure::Abandoned),
        Some(CommandOutcome::Unrecorded) => Err(CommandFailure::Unrecorded {
            reason: record
                .updates
                .iter()
                .find_map(|u| match u {
                    super::book::CommandUpdate::Unrecorded { reason } => Some(reason.clone()),
                    _ => None,
                })
                .unwrap_or_default(),
        }),
        Some(CommandOutcome::Finished(CommandPhase::Succeeded)) => {
            let event = terminal.unwrap_or_default();
            Ok(Terminal {
                message: event.message,
                detail: event.detail,
                occurred_at_unix_ms: event.occurred_at_unix_ms,
                record,
            })
        }
        Some(CommandOutcome::Finished(phase)) => {
            let event = terminal.unwrap_or_default();
            Err(CommandFailure::Ended {
                phase: *phase,
                message: event.message,
                detail: event.detail,
            })
        }
        Some(_) => Err(CommandFailure::Untracked),
    }
}
