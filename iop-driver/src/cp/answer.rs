//! A command's first answer: [`CommandTracker::first_answer`] waits for the Edge's
//! response, or says exactly why none will come ([`NoAnswer`]). The admin API and the
//! cluster's router answer their callers from it, so every ending has its own name.

use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use iop_core::cp::CommandOutcome;
use iop_core::proto::EdgeCommandResponse;

use super::book::CommandUpdate;
use super::tracker::CommandTracker;
use crate::Runtime;
use crate::runtime::before;
use crate::signal::lock;

/// Why a command has no answer from its Edge, from [`CommandTracker::first_answer`].
/// The Edge's rejection is an answer, not one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoAnswer {
    /// The Edge came back without the command it had taken (it restarted): FAILED,
    /// lost by the Edge (PROTOCOL.md §4.4).
    #[error("the edge reconnected without the command: it was lost")]
    Lost,
    /// Its request went out on this many sessions that each ended without an answer
    /// (an Edge that cannot take it, say): FAILED "undeliverable", never sent again.
    #[error(
        "the command is undeliverable: {sessions} sessions of the edge{} ended \
         without answering it, and it is not sent again",
        named_sessions(session_ids)
    )]
    Undeliverable {
        /// Sessions that ended without answering it.
        sessions: u32,
        /// The ids of those sessions this Control Plane saw end, oldest first.
        session_ids: Vec<u64>,
    },
    /// Its Edge stayed disconnected longer than it remembers a command (the command's
    /// timeout, then its finished-id retention): FAILED as abandoned, its outcome
    /// never to be learned.
    #[error(
        "the command was abandoned: its edge has been disconnected for {} s, longer \
         than it remembers a command, so its outcome can never be learned",
        disconnected_for.as_secs()
    )]
    Abandoned {
        /// How long the Edge had been disconnected.
        disconnected_for: Duration,
    },
    /// The Control Plane forgot the Edge (disconnected too long, or too many
    /// disconnected Edges) before it answered.
    #[error("the edge was forgotten before it answered the command")]
    Forgotten,
    /// Its record could not be written before it was sent (the
    /// [`CommandJournal`](crate::CommandJournal), a cluster's engine, said why): it
    /// was never sent.
    #[error("the command was not sent: its record could not be written ({reason})")]
    Unrecorded {
        /// What the journal said.
        reason: String,
    },
    /// The journal holds another command under its id: it was never sent.
    #[error("this command id already names another command")]
    Conflict,
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

/// " (7, 9)" for the message of [`NoAnswer::Undeliverable`]; empty when no id is
/// known (a record read back from a cluster's engine keeps only the count).
fn named_sessions(ids: &[u64]) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
    format!(" ({})", ids.join(", "))
}

impl NoAnswer {
    /// A short stable name for the ending (the admin API's error code).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Lost => "command_lost",
            Self::Undeliverable { .. } => "undeliverable",
            Self::Abandoned { .. } => "abandoned",
            Self::Forgotten => "forgotten",
            Self::Unrecorded { .. } => "engine_unavailable",
            Self::Conflict => "conflict",
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
                    CommandUpdate::Lost => return Err(NoAnswer::Lost),
                    CommandUpdate::Undeliverable {
                        sessions,
                        session_ids,
                    } => {
                        return Err(NoAnswer::Undeliverable {
                            sessions,
                            session_ids,
                        });
                    }
                    CommandUpdate::Forgotten => return Err(NoAnswer::Forgotten),
                    CommandUpdate::Abandoned { disconnected_for } => {
                        return Err(NoAnswer::Abandoned { disconnected_for });
                    }
                    CommandUpdate::Unrecorded { reason } => {
                        return Err(NoAnswer::Unrecorded { reason });
                    }
                    CommandUpdate::Conflict => return Err(NoAnswer::Conflict),
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
        let state = lock(&self.shared.state);
        if let Some(outcome) = state
            .book
            .get(self.command_id())
            .and_then(|r| r.outcome.clone())
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
