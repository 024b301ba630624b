//! A command's first answer: [`CommandTracker::first_answer`] waits for the Edge's
//! response, or says exactly why none will come ([`NoAnswer`]). The admin API and the
//! cluster's router answer their callers from it, so every ending has its own name.

use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use iop_core::cp::{CommandOutcome, Ending};
use iop_core::proto::EdgeCommandResponse;

use super::tracker::CommandTracker;
use crate::Runtime;
use crate::runtime::before;
use iop_core::cp::CommandUpdate;

/// Why a command has no answer from its Edge, from [`CommandTracker::first_answer`].
/// The Edge's rejection is an answer, not one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoAnswer {
    /// It ended without the Edge's word ([`Ending`]).
    #[error("{0}")]
    Ended(Ending),
    /// It finished without its answer being seen: the Edge replayed its events across
    /// a reconnect and the answer to the re-sent request has not come.
    #[error("the command finished ({outcome:?}) before its answer was seen")]
    Finished {
        /// How it ended.
        outcome: CommandOutcome,
    },
    /// The server stopped before the Edge answered.
    #[error("the control plane stopped before the edge answered")]
    Stopped,
    /// The command's record left the handle's bounded book (too many newer commands)
    /// before the Edge answered: what happened to it is not known here.
    #[error("the command's record was forgotten before the edge answered")]
    Untracked,
    /// The Edge did not answer within the wait; the command stays tracked.
    #[error("the edge did not answer within {} ms; the command stays tracked", wait.as_millis())]
    TimedOut {
        /// How long it was awaited.
        wait: Duration,
    },
}

impl NoAnswer {
    /// A short stable name for the ending (the admin API's error code): an
    /// [`Ending`]'s own code, or this type's.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Ended(ending) => ending.code(),
            Self::Finished { .. } => "finished_unanswered",
            Self::Stopped => "shutting_down",
            Self::Untracked => "untracked",
            Self::TimedOut { .. } => "timeout",
        }
    }
}

impl<R: Runtime> CommandTracker<R> {
    /// Waits at most `wait` for the Edge's answer (accepted or rejected), skipping the
    /// events a reconnecting Edge replays before it; else says why none came. The
    /// tracker goes on from there: call [`next`](StreamExt::next) for the events.
    pub async fn first_answer(&mut self, wait: Duration) -> Result<EdgeCommandResponse, NoAnswer> {
        let deadline = Instant::now() + wait;
        let answer = before::<R, _>(deadline, async {
            while let Some(update) = self.next().await {
                match update {
                    CommandUpdate::Response(r) => return Ok(r),
                    CommandUpdate::Ended(ending) => return Err(NoAnswer::Ended(ending)),
                    _ => {}
                }
            }
            Err(self.ended_unanswered())
        })
        .await;
        answer.unwrap_or(Err(NoAnswer::TimedOut { wait }))
    }

    /// Why the updates ended with no answer.
    fn ended_unanswered(&self) -> NoAnswer {
        let state = self.shared.lock();
        if let Some(outcome) = state
            .cp
            .command(self.edge_id(), self.command_id())
            .and_then(|c| c.outcome)
        {
            return NoAnswer::Finished { outcome };
        }
        if state.stopped {
            NoAnswer::Stopped
        } else {
            NoAnswer::Untracked
        }
    }
}
