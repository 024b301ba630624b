//! Commands of one Edge across its sessions (PROTOCOL.md §4.4): response-before-events,
//! forward-only phases, de-duplication, re-send and lost-marking on reconnect.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::time::Duration;

use iop_proto::{
    CommandPhase, CommandRejectReason, EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse,
};

use super::command_state::{CommandAnswer, CommandOutcome, CommandState, progress};
use super::ending::Ending;
use super::record::{CommandUpdate, History, RecordLimits};
use super::{CommandOrderRule, ProtocolViolation};

mod records;

#[derive(Debug)]
struct Tracked {
    order: u64,
    request: EdgeCommandRequest,
    /// Held back until its record is written (PROTOCOL.md §8 write-ahead): never sent,
    /// re-sent or marked lost while set.
    held: bool,
    /// A request was sent on the current session and not yet answered on it.
    awaiting_response: bool,
    answer: CommandAnswer,
    /// Listed in the current session's `inflight_command_ids`: the Edge holds it, so
    /// its (replayed) events may come before the response to the re-sent request.
    held_by_edge: bool,
    /// Listed in the current session's hello and no event seen on it yet: the next
    /// event is the Edge's replay of its latest one. When two processes briefly
    /// shared the id (PROTOCOL.md §4.1) that replay may be older than what the other one
    /// reported: an already-seen sequence is then a duplicate (PROTOCOL.md §4.4 de-duplicates
    /// by `(edge_id, command_id, sequence)`), not a reordering.
    replay_due: bool,
    last_seq: u32,
    phase: CommandPhase,
    outcome: Option<CommandOutcome>,
    /// Sessions its request was sent on that ended without its response.
    unanswered_sessions: u32,
    /// The ids of those sessions this Control Plane saw end (not carried over from
    /// another one), the first [`MAX_NAMED_SESSIONS`].
    unanswered_session_ids: Vec<u64>,
    /// What an operator reads of it (`None`: no longer kept, past the Control Plane's
    /// [`RecordLimits`]).
    history: Option<History>,
}

impl Tracked {
    /// Its request went out on a session (or the Edge spoke of it): the Edge may hold
    /// it.
    fn was_sent(&self) -> bool {
        self.awaiting_response
            || self.unanswered_sessions > 0
            || self.answer != CommandAnswer::Pending
            || self.last_seq > 0
    }
}

/// How many of the sessions that ended without answering a command it names.
const MAX_NAMED_SESSIONS: usize = 8;

/// A command [`CommandBook::on_session_end`] marked FAILED "undeliverable".
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Undeliverable {
    pub(crate) command_id: String,
    /// [`Ending::Undeliverable`], with the sessions that ended without answering it.
    pub(crate) ending: Ending,
}

/// What a command response means for the application.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ResponseEffect {
    /// No such command: count and drop.
    Unknown,
    /// The first answer: tell the application, with the command's outcome after it.
    First(Option<CommandOutcome>),
    /// A repeat of an answer already known (a re-sent request): nothing new.
    Repeat,
}

/// What a command event means for the application.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EventEffect {
    /// No such command (or one already marked lost or undeliverable): count and drop.
    Unknown,
    /// Already seen `(command_id, sequence)`: drop.
    Duplicate,
    /// A new event: tell the application, with the command's outcome after it.
    New(Option<CommandOutcome>),
}

/// Command ids → their commands, hashed with std's SipHash under its fixed key: the
/// core stays deterministic (no per-process random key), and only the application
/// puts ids in the table — an Edge's frames only look ids up — so no peer can fill
/// it with colliding keys. (A B-tree would compare ids on each of its levels, for
/// every frame of every command: BENCHMARKS.md §10.)
type CommandTable = HashMap<String, Tracked, BuildHasherDefault<DefaultHasher>>;

/// Commands of one Edge.
#[derive(Debug, Default)]
pub(crate) struct CommandBook {
    commands: CommandTable,
    /// Finished command ids, oldest first, for retention.
    finished: VecDeque<String>,
    next_order: u64,
    /// Estimated bytes of every kept history.
    history_bytes: usize,
}

fn rank(phase: CommandPhase) -> u8 {
    match phase {
        CommandPhase::Unspecified => 0,
        CommandPhase::Accepted => 1,
        CommandPhase::Running => 2,
        CommandPhase::Succeeded
        | CommandPhase::Failed
        | CommandPhase::Cancelled
        | CommandPhase::TimedOut => 3,
    }
}

impl CommandBook {
    pub(crate) fn contains(&self, command_id: &str) -> bool {
        self.commands.contains_key(command_id)
    }

    /// Commands without a final outcome.
    pub(crate) fn unfinished(&self) -> usize {
        self.commands.len() - self.finished.len()
    }

    /// Tracks a command just sent on the current session, or (`held`) one waiting for
    /// its record before it is sent.
    pub(crate) fn insert(&mut self, request: EdgeCommandRequest, held: bool) {
        self.next_order += 1;
        self.commands.insert(
            request.command_id.clone(),
            Tracked {
                order: self.next_order,
                request,
                held,
                awaiting_response: !held,
                answer: CommandAnswer::Pending,
                held_by_edge: false,
                replay_due: false,
                last_seq: 0,
                phase: CommandPhase::Unspecified,
                outcome: None,
                unanswered_sessions: 0,
                unanswered_session_ids: Vec::new(),
                history: Some(History::default()),
            },
        );
    }

    /// What is known of `command_id`, and what another Control Plane needs to carry it
    /// on.
    pub(crate) fn state(&self, command_id: &str) -> Option<CommandState> {
        self.commands.get(command_id).map(|t| CommandState {
            request: t.request.clone(),
            answer: t.answer,
            phase: t.phase,
            last_sequence: t.last_seq,
            outcome: t.outcome.clone(),
            unanswered_sessions: t.unanswered_sessions,
        })
    }

    /// Releases a held command: its record is written. The request to send now when the
    /// Edge has a live session (`live`), else it waits for the next one as any
    /// unanswered command does; `None` when `command_id` is not held.
    pub(crate) fn release(&mut self, command_id: &str, live: bool) -> Option<EdgeCommandRequest> {
        let t = self.commands.get_mut(command_id).filter(|t| t.held)?;
        t.held = false;
        t.awaiting_response = live;
        Some(t.request.clone())
    }

    /// Forgets a held command (its record could not be written); false when
    /// `command_id` is not held.
    pub(crate) fn drop_held(&mut self, command_id: &str) -> bool {
        if self.commands.get(command_id).is_some_and(|t| t.held) {
            self.remove(command_id);
            true
        } else {
            false
        }
    }

    /// Joins a command another Control Plane sent: the further advanced of two copies
    /// of one command wins (PROTOCOL.md §8). Called before the new session's
    /// [`on_new_session`](Self::on_new_session).
    /// Its `history`, if given, replaces the one kept when it is further on too.
    pub(crate) fn adopt(
        &mut self,
        command: CommandState,
        history: Option<History>,
        retention: usize,
    ) {
        let id = command.request.command_id.clone();
        match self.commands.get_mut(&id) {
            Some(t) => {
                t.unanswered_sessions = t.unanswered_sessions.max(command.unanswered_sessions);
                if progress(t.outcome.is_some(), t.answer, t.last_seq) >= command.progress() {
                    return;
                }
                let finishes = t.outcome.is_none() && command.outcome.is_some();
                t.answer = command.answer;
                t.phase = command.phase;
                t.last_seq = command.last_sequence;
                if let (Some(new), Some(kept)) = (history, t.history.as_mut()) {
                    self.history_bytes = self.history_bytes - kept.bytes + new.bytes;
                    *kept = new;
                }
                if finishes && let Some(outcome) = command.outcome {
                    self.finish(&id, outcome, retention);
                }
            }
            None => {
                self.next_order += 1;
                let outcome = command.outcome;
                self.commands.insert(
                    id.clone(),
                    Tracked {
                        order: self.next_order,
                        request: command.request,
                        held: false,
                        awaiting_response: false,
                        answer: command.answer,
                        held_by_edge: false,
                        replay_due: false,
                        last_seq: command.last_sequence,
                        phase: command.phase,
                        outcome: None,
                        unanswered_sessions: command.unanswered_sessions,
                        unanswered_session_ids: Vec::new(),
                        history: None,
                    },
                );
                let history = history.unwrap_or_default();
                self.history_bytes += history.bytes;
                if let Some(t) = self.commands.get_mut(&id) {
                    t.history = Some(history);
                }
                if let Some(outcome) = outcome {
                    self.finish(&id, outcome, retention);
                }
            }
        }
    }

    fn finish(&mut self, command_id: &str, outcome: CommandOutcome, retention: usize) {
        if let Some(t) = self.commands.get_mut(command_id) {
            // `awaiting_response` stays: a command held by the Edge may finish (through
            // its replayed events) before the answer to its re-sent request arrives.
            t.outcome = Some(outcome);
            self.finished.push_back(command_id.to_owned());
        }
        while self.finished.len() > retention {
            if let Some(old) = self.finished.pop_front() {
                self.remove(&old);
            }
        }
    }

    /// A command response arrived on the current session.
    pub(crate) fn on_response(
        &mut self,
        resp: &EdgeCommandResponse,
        retention: usize,
        limits: &RecordLimits,
    ) -> Result<ResponseEffect, ProtocolViolation> {
        let Some(t) = self.commands.get_mut(&resp.command_id) else {
            return Ok(ResponseEffect::Unknown);
        };
        if !t.awaiting_response {
            return Err(ProtocolViolation::UnsolicitedCommandResponse {
                command_id: resp.command_id.clone(),
            });
        }
        t.awaiting_response = false;
        if t.answer != CommandAnswer::Pending {
            return Ok(ResponseEffect::Repeat);
        }
        if resp.accepted {
            t.answer = CommandAnswer::Accepted;
            let outcome = t.outcome.clone();
            let update = CommandUpdate::Response(resp.clone());
            records::keep(t, &mut self.history_bytes, update, limits);
            return Ok(ResponseEffect::First(outcome));
        }
        if t.last_seq > 0 {
            return Err(ProtocolViolation::ContradictoryCommandResponse {
                command_id: resp.command_id.clone(),
            });
        }
        let reason = CommandRejectReason::try_from(resp.reject_reason)
            .unwrap_or(CommandRejectReason::Unspecified);
        t.answer = CommandAnswer::Rejected(reason);
        let outcome = CommandOutcome::Rejected(reason);
        let update = CommandUpdate::Response(resp.clone());
        records::keep(t, &mut self.history_bytes, update, limits);
        self.finish(&resp.command_id, outcome.clone(), retention);
        Ok(ResponseEffect::First(Some(outcome)))
    }

    /// A command event arrived on the current session.
    pub(crate) fn on_event(
        &mut self,
        ev: &EdgeCommandEvent,
        retention: usize,
        limits: &RecordLimits,
    ) -> Result<EventEffect, ProtocolViolation> {
        let Some(t) = self.commands.get_mut(&ev.command_id) else {
            return Ok(EventEffect::Unknown);
        };
        let violation = |rule| ProtocolViolation::CommandEventOrder {
            command_id: ev.command_id.clone(),
            rule,
        };
        match (&t.outcome, t.answer) {
            // Given up on: what the Edge still says of it (a replay from a session
            // whose answer was lost) is counted and dropped, as for an unknown id.
            (
                Some(CommandOutcome::Ended(
                    Ending::Lost | Ending::Undeliverable { .. } | Ending::Abandoned { .. },
                )),
                _,
            ) => {
                return Ok(EventEffect::Unknown);
            }
            (_, CommandAnswer::Rejected(_)) => {
                return Err(ProtocolViolation::CommandEventAfterRejection {
                    command_id: ev.command_id.clone(),
                });
            }
            (_, CommandAnswer::Pending) if !t.held_by_edge => {
                return Err(ProtocolViolation::CommandEventBeforeResponse {
                    command_id: ev.command_id.clone(),
                });
            }
            _ => {}
        }
        let replay = std::mem::take(&mut t.replay_due);
        let seen = ev.sequence == t.last_seq || (replay && ev.sequence < t.last_seq);
        if ev.sequence != 0 && seen {
            return Ok(EventEffect::Duplicate);
        }
        if ev.sequence == 0 || ev.sequence < t.last_seq {
            return Err(violation(CommandOrderRule::SequenceOrder));
        }
        if t.outcome.is_some() {
            return Err(violation(CommandOrderRule::AfterTerminal));
        }
        let phase = match CommandPhase::try_from(ev.phase) {
            Ok(CommandPhase::Unspecified) | Err(_) => {
                return Err(violation(CommandOrderRule::UnknownPhase));
            }
            Ok(p) => p,
        };
        if ev.sequence == 1 && phase != CommandPhase::Accepted {
            return Err(violation(CommandOrderRule::FirstNotAccepted));
        }
        let (old, new) = (rank(t.phase), rank(phase));
        if new < old || (new == old && phase != CommandPhase::Running) {
            return Err(violation(CommandOrderRule::PhaseBackwards));
        }
        t.last_seq = ev.sequence;
        t.phase = phase;
        let update = CommandUpdate::Event(ev.clone());
        records::keep(t, &mut self.history_bytes, update, limits);
        if rank(phase) < 3 {
            return Ok(EventEffect::New(None));
        }
        let outcome = CommandOutcome::Finished(phase);
        self.finish(&ev.command_id, outcome.clone(), retention);
        Ok(EventEffect::New(Some(outcome)))
    }

    /// The Edge's live session `session_id` ended. Every unanswered command whose
    /// request it carried counts one more unanswered session; one that reaches `max` is
    /// FAILED "undeliverable" (PROTOCOL.md §4.4). Returns those, in their original
    /// order.
    pub(crate) fn on_session_end(
        &mut self,
        session_id: u64,
        max: u32,
        retention: usize,
        limits: &RecordLimits,
    ) -> Vec<Undeliverable> {
        let mut failed: Vec<(u64, String)> = Vec::new();
        for (id, t) in &mut self.commands {
            if t.outcome.is_some() || !t.awaiting_response || t.answer != CommandAnswer::Pending {
                continue;
            }
            t.awaiting_response = false;
            t.unanswered_sessions = t.unanswered_sessions.saturating_add(1);
            if t.unanswered_session_ids.len() < MAX_NAMED_SESSIONS {
                t.unanswered_session_ids.push(session_id);
            }
            if t.unanswered_sessions >= max {
                t.phase = CommandPhase::Failed;
                failed.push((t.order, id.clone()));
            }
        }
        failed.sort();
        failed
            .into_iter()
            .filter_map(|(_, command_id)| {
                let t = self.commands.get_mut(&command_id)?;
                let ending = Ending::Undeliverable {
                    sessions: t.unanswered_sessions,
                    session_ids: std::mem::take(&mut t.unanswered_session_ids),
                };
                self.record(&command_id, CommandUpdate::Ended(ending.clone()), limits);
                self.finish(
                    &command_id,
                    CommandOutcome::Ended(ending.clone()),
                    retention,
                );
                Some(Undeliverable { command_id, ending })
            })
            .collect()
    }

    /// How long after its session ended the Edge may still know the outcome of every
    /// unfinished command it was sent: the longest command timeout (0 is the Edge's
    /// default) plus `retention`. `None` when no such command is open.
    pub(crate) fn remembered_for(&self, retention: Duration) -> Option<Duration> {
        self.commands
            .values()
            .filter(|t| t.outcome.is_none() && !t.held && t.was_sent())
            .map(|t| {
                let timeout = match t.request.timeout_ms {
                    0 => iop_proto::limits::DEFAULT_COMMAND_TIMEOUT,
                    ms => Duration::from_millis(u64::from(ms)),
                };
                timeout.saturating_add(retention)
            })
            .max()
    }

    /// Marks FAILED "abandoned" every unfinished command the Edge was sent (it has been
    /// disconnected for `disconnected_for`); returns their ids, in their original order.
    pub(crate) fn abandon(
        &mut self,
        retention: usize,
        limits: &RecordLimits,
        disconnected_for: Duration,
    ) -> Vec<String> {
        let mut open: Vec<(u64, String)> = self
            .commands
            .iter()
            .filter(|(_, t)| t.outcome.is_none() && !t.held && t.was_sent())
            .map(|(id, t)| (t.order, id.clone()))
            .collect();
        open.sort();
        open.into_iter()
            .map(|(_, id)| {
                if let Some(t) = self.commands.get_mut(&id) {
                    t.phase = CommandPhase::Failed;
                }
                let ending = Ending::Abandoned { disconnected_for };
                self.record(&id, CommandUpdate::Ended(ending.clone()), limits);
                self.finish(&id, CommandOutcome::Ended(ending), retention);
                id
            })
            .collect()
    }

    /// Ids of the commands without an outcome, in their original order.
    pub(crate) fn unfinished_ids(&self) -> Vec<String> {
        let mut open: Vec<(u64, &String)> = self
            .commands
            .iter()
            .filter(|(_, t)| t.outcome.is_none())
            .map(|(id, t)| (t.order, id))
            .collect();
        open.sort();
        open.into_iter().map(|(_, id)| id.clone()).collect()
    }

    /// A new session was accepted whose hello listed `inflight`. Returns the requests
    /// to re-send (never answered) in their original order, and the ids of commands
    /// believed accepted and unfinished that the Edge no longer holds (now lost).
    pub(crate) fn on_new_session(
        &mut self,
        inflight: &[String],
        retention: usize,
        limits: &RecordLimits,
    ) -> (Vec<EdgeCommandRequest>, Vec<String>) {
        let held: BTreeSet<&str> = inflight.iter().map(String::as_str).collect();
        for (id, t) in &mut self.commands {
            t.replay_due = held.contains(id.as_str());
        }
        let mut open: Vec<(u64, String)> = self
            .commands
            .iter()
            .filter(|(_, t)| t.outcome.is_none())
            .map(|(id, t)| (t.order, id.clone()))
            .collect();
        open.sort();
        let mut resend = Vec::new();
        let mut lost = Vec::new();
        for (_, id) in open {
            let Some(t) = self.commands.get_mut(&id).filter(|t| !t.held) else {
                continue;
            };
            t.held_by_edge = held.contains(id.as_str());
            t.awaiting_response = false;
            // Events seen without an answer (replays of a held command) mean the Edge
            // accepted it: a restarted Edge that forgot it must not run it again from
            // sequence 1 under the same id.
            let believed_accepted = t.answer == CommandAnswer::Accepted || t.last_seq > 0;
            if believed_accepted && !t.held_by_edge {
                t.phase = CommandPhase::Failed;
                lost.push(id);
            } else if t.answer == CommandAnswer::Pending {
                t.awaiting_response = true;
                resend.push(t.request.clone());
            }
        }
        for id in &lost {
            self.record(id, CommandUpdate::Ended(Ending::Lost), limits);
            self.finish(id, CommandOutcome::Ended(Ending::Lost), retention);
        }
        (resend, lost)
    }
}
