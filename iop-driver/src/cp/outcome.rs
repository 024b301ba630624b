//! A command's end as a `Result`: [`CommandTracker::outcome`] waits for it, `Ok` only
//! when the Edge reported SUCCEEDED.

use std::collections::BTreeMap;

use iop_core::cp::{CommandOutcome, Ending};
use iop_core::proto::{CommandPhase, CommandRejectReason};

use super::tracker::CommandTracker;
use crate::Runtime;
use iop_core::cp::CommandRecord;

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
    Failed {
        /// The terminal phase.
        phase: CommandPhase,
        /// The terminal event's message.
        message: String,
        /// The terminal event's detail.
        detail: BTreeMap<String, String>,
    },
    /// It ended without the Edge's word ([`Ending`]).
    #[error("{0}")]
    Ended(Ending),
    /// Its record left the handle's bounded book (too many newer commands) or the
    /// server stopped before it finished: the outcome is not known here.
    #[error("the command's outcome is unknown: its record ended before it finished")]
    Untracked,
}

impl<R: Runtime> CommandTracker<R> {
    /// Waits for the command to finish: `Ok` when it SUCCEEDED, else why not.
    pub async fn outcome(mut self) -> Result<Terminal, CommandFailure> {
        self.run_out().await;
        match (self.record(), self.ended()) {
            (Some(record), _) => judge(record),
            // Its Edge was forgotten, its record with it.
            (None, Some(ending)) => Err(CommandFailure::Ended(ending.clone())),
            (None, None) => Err(CommandFailure::Untracked),
        }
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
        // The ending as the book learnt it (with its details), else as the outcome
        // reads back.
        Some(CommandOutcome::Ended(ending)) => Err(CommandFailure::Ended(
            record.ending().unwrap_or(ending).clone(),
        )),
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
            Err(CommandFailure::Failed {
                phase: *phase,
                message: event.message,
                detail: event.detail,
            })
        }
        Some(_) => Err(CommandFailure::Untracked),
    }
}
