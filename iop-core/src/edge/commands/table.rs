//! The Edge's command table (PROTOCOL.md §4.4): idempotency, phases, deadlines, retention.
//!
//! A command is *held* from acceptance until its id leaves the retention window after
//! its terminal phase. Held commands outlive sessions: their latest event is re-sent
//! on every accepted session and their ids are listed in the hello.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use iop_proto::limits::{ExceedsLimit, send};
use iop_proto::{CommandPhase, EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse, Message};

use crate::Instant;

/// How a handler finished, as reported by the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It did what was asked.
    Succeeded,
    /// It could not.
    Failed,
    /// The Edge gave it up (e.g. a node it targeted was removed).
    Cancelled,
}

impl Outcome {
    fn phase(self) -> CommandPhase {
        match self {
            Outcome::Succeeded => CommandPhase::Succeeded,
            Outcome::Failed => CommandPhase::Failed,
            Outcome::Cancelled => CommandPhase::Cancelled,
        }
    }
}

/// Why a progress or outcome report was refused: the application's call, or its race
/// with the command's deadline ([`ReportError::TimedOut`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// No held command has this id (never accepted, or forgotten after retention).
    #[error("no command {0:?} is held by this Edge")]
    UnknownCommand(String),
    /// The Edge already emitted TIMED_OUT for it at its deadline; this late report is
    /// dropped and can be ignored.
    #[error("command {0:?} already timed out")]
    TimedOut(String),
    /// The command already reached a terminal phase.
    #[error("command {command_id:?} already finished as {phase:?}")]
    AlreadyFinished {
        /// The command.
        command_id: String,
        /// Its terminal phase.
        phase: CommandPhase,
    },
    /// The event would break a limit of the Control Plane (PROTOCOL.md §4.6, §7): its message,
    /// a detail key or value, the number of detail entries, or the whole frame against
    /// the Control Plane's announced `max_frame_len` (field `frame`). Nothing was
    /// recorded or sent: the command is where it was, and a smaller report may follow.
    #[error("the report was not sent: {0}")]
    ExceedsLimit(#[from] ExceedsLimit),
    /// The command emitted `u32::MAX` events already.
    #[error("command {0:?} has no event sequence numbers left")]
    SequenceExhausted(String),
    /// The Edge has shut down.
    #[error("the Edge has shut down")]
    ShutDown,
}

/// Body bytes of the frame that carries `event` alone.
pub(crate) fn event_frame_len(event: &EdgeCommandEvent) -> usize {
    iop_proto::encoding::delimited_len(event.encoded_len())
}

/// `event` as it can be sent in frames of at most `max_frame_len` bytes: itself, or —
/// when a Control Plane with a lower limit than the one it was reported under asks for
/// it again (the replay of PROTOCOL.md §4.4) — the same command, phase and sequence with its
/// detail left out and a message that says so.
pub(crate) fn fit_event(event: &EdgeCommandEvent, max_frame_len: u32) -> EdgeCommandEvent {
    let len = event_frame_len(event);
    if len <= max_frame_len as usize {
        return event.clone();
    }
    EdgeCommandEvent {
        detail: BTreeMap::new(),
        message: format!(
            "event of {len} bytes left out: over the control plane's frame limit of {max_frame_len}"
        ),
        ..event.clone()
    }
}

#[derive(Debug)]
struct Held {
    request: EdgeCommandRequest,
    response: EdgeCommandResponse,
    latest: EdgeCommandEvent,
    deadline: Instant,
    finished_at: Option<Instant>,
}

/// What a request's id is to the table.
pub(crate) enum Known<'a> {
    /// Not held.
    New,
    /// Held with the same content: answer the original response (and latest event).
    Same(&'a EdgeCommandResponse, &'a EdgeCommandEvent),
    /// Held with different content.
    Conflict,
}

#[derive(Debug)]
pub(crate) struct Commands {
    held: BTreeMap<String, Held>,
    deadlines: BTreeSet<(Instant, String)>,
    finished: VecDeque<(Instant, String)>,
    retention: Duration,
    max_retained: usize,
    default_timeout: Duration,
}

impl Commands {
    pub(crate) fn new(retention: Duration, max_retained: usize, default_timeout: Duration) -> Self {
        Self {
            held: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            finished: VecDeque::new(),
            retention,
            max_retained,
            default_timeout,
        }
    }

    pub(crate) fn known(&self, request: &EdgeCommandRequest) -> Known<'_> {
        match self.held.get(&request.command_id) {
            None => Known::New,
            Some(h) if h.request == *request => Known::Same(&h.response, &h.latest),
            Some(_) => Known::Conflict,
        }
    }

    /// Commands accepted and not finished.
    /// The phase of the command `command_id` is at, while it is held.
    pub(crate) fn phase(&self, command_id: &str) -> Option<CommandPhase> {
        self.held.get(command_id).map(|h| h.latest.phase())
    }

    pub(crate) fn running(&self) -> usize {
        self.deadlines.len()
    }

    /// Every held id for the hello: running commands (id order), then finished ones,
    /// most recently finished first.
    pub(crate) fn held_ids(&self) -> Vec<String> {
        let mut running: Vec<&String> = self.deadlines.iter().map(|(_, id)| id).collect();
        running.sort();
        let mut ids: Vec<String> = running.into_iter().cloned().collect();
        ids.extend(self.finished.iter().rev().map(|(_, id)| id.clone()));
        ids
    }

    /// The latest event of each of `ids` still held, in id order.
    pub(crate) fn latest_events(&self, ids: &BTreeSet<String>) -> Vec<EdgeCommandEvent> {
        ids.iter()
            .filter_map(|id| self.held.get(id))
            .map(|h| h.latest.clone())
            .collect()
    }

    /// Holds a newly accepted command; returns its response and ACCEPTED event.
    pub(crate) fn accept(
        &mut self,
        now: Instant,
        unix_ms: u64,
        request: EdgeCommandRequest,
    ) -> (EdgeCommandResponse, EdgeCommandEvent) {
        let timeout = match request.timeout_ms {
            0 => self.default_timeout,
            ms => Duration::from_millis(u64::from(ms)),
        };
        let deadline = now + timeout;
        let id = request.command_id.clone();
        let response = EdgeCommandResponse {
            command_id: id.clone(),
            accepted: true,
            reject_reason: iop_proto::CommandRejectReason::Unspecified as i32,
            message: String::new(),
        };
        let event = EdgeCommandEvent {
            command_id: id.clone(),
            phase: CommandPhase::Accepted as i32,
            sequence: 1,
            message: String::new(),
            detail: BTreeMap::new(),
            occurred_at_unix_ms: unix_ms,
        };
        self.deadlines.insert((deadline, id.clone()));
        self.held.insert(
            id,
            Held {
                request,
                response: response.clone(),
                latest: event.clone(),
                deadline,
                finished_at: None,
            },
        );
        (response, event)
    }

    /// Records the next event of `command_id` in `phase`, if it fits the Control
    /// Plane's limits with frames of at most `max_frame_len` bytes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn report(
        &mut self,
        now: Instant,
        unix_ms: u64,
        command_id: &str,
        phase: CommandPhase,
        message: String,
        detail: BTreeMap<String, String>,
        max_frame_len: u32,
    ) -> Result<EdgeCommandEvent, ReportError> {
        let held = self
            .held
            .get_mut(command_id)
            .ok_or_else(|| ReportError::UnknownCommand(command_id.to_owned()))?;
        let current = held.latest.phase();
        if current == CommandPhase::TimedOut {
            return Err(ReportError::TimedOut(command_id.to_owned()));
        }
        if current.is_terminal() {
            return Err(ReportError::AlreadyFinished {
                command_id: command_id.to_owned(),
                phase: current,
            });
        }
        let sequence = held
            .latest
            .sequence
            .checked_add(1)
            .ok_or_else(|| ReportError::SequenceExhausted(command_id.to_owned()))?;
        let event = EdgeCommandEvent {
            command_id: command_id.to_owned(),
            phase: phase as i32,
            sequence,
            message,
            detail,
            occurred_at_unix_ms: unix_ms,
        };
        send::command_event(&event)?;
        send::frame(event_frame_len(&event), max_frame_len)?;
        held.latest = event.clone();
        if phase.is_terminal() {
            held.finished_at = Some(now);
            let key = (held.deadline, command_id.to_owned());
            self.deadlines.remove(&key);
            self.finished.push_back((now, command_id.to_owned()));
            self.enforce_retained_cap();
        }
        Ok(event)
    }

    pub(crate) fn outcome_phase(outcome: Outcome) -> CommandPhase {
        outcome.phase()
    }

    /// TIMED_OUT events for every running command whose deadline is at or before `now`.
    pub(crate) fn expire(&mut self, now: Instant, unix_ms: u64) -> Vec<EdgeCommandEvent> {
        let due: Vec<String> = self
            .deadlines
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, id)| id.clone())
            .collect();
        due.into_iter()
            .filter_map(|id| {
                self.report(
                    now,
                    unix_ms,
                    &id,
                    CommandPhase::TimedOut,
                    "the handler did not finish before the command's deadline".to_owned(),
                    BTreeMap::new(),
                    u32::MAX,
                )
                .ok()
            })
            .collect()
    }

    /// CANCELLED events for every running command (the Edge is shutting down).
    pub(crate) fn cancel_all(&mut self, now: Instant, unix_ms: u64) -> Vec<EdgeCommandEvent> {
        let ids: Vec<String> = self.deadlines.iter().map(|(_, id)| id.clone()).collect();
        ids.into_iter()
            .filter_map(|id| {
                self.report(
                    now,
                    unix_ms,
                    &id,
                    CommandPhase::Cancelled,
                    "the Edge is shutting down".to_owned(),
                    BTreeMap::new(),
                    u32::MAX,
                )
                .ok()
            })
            .collect()
    }

    /// Forgets finished ids older than the retention window.
    pub(crate) fn evict(&mut self, now: Instant) {
        while let Some((at, _)) = self.finished.front() {
            if now.saturating_duration_since(*at) < self.retention {
                break;
            }
            self.pop_finished();
        }
    }

    fn enforce_retained_cap(&mut self) {
        while self.finished.len() > self.max_retained {
            self.pop_finished();
        }
    }

    fn pop_finished(&mut self) {
        if let Some((_, id)) = self.finished.pop_front() {
            self.held.remove(&id);
        }
    }

    /// The earliest command deadline or retention expiry.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let deadline = self.deadlines.first().map(|(d, _)| *d);
        let expiry = self.finished.front().map(|(at, _)| *at + self.retention);
        match (deadline, expiry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: &str) -> EdgeCommandRequest {
        EdgeCommandRequest {
            command_id: id.into(),
            operation: "op".into(),
            ..Default::default()
        }
    }

    fn table(max_retained: usize) -> Commands {
        Commands::new(
            Duration::from_secs(10),
            max_retained,
            Duration::from_secs(60),
        )
    }

    fn finish(t: &mut Commands, at_ms: u64, id: &str) {
        let now = Instant::from_millis(at_ms);
        t.accept(now, 0, req(id));
        t.report(
            now,
            0,
            id,
            CommandPhase::Succeeded,
            String::new(),
            BTreeMap::new(),
            u32::MAX,
        )
        .unwrap();
    }

    #[test]
    fn retained_ids_are_evicted_oldest_first_by_cap_and_by_age() {
        let mut t = table(2);
        finish(&mut t, 0, "a");
        finish(&mut t, 1_000, "b");
        finish(&mut t, 2_000, "c");
        assert_eq!(t.held_ids(), ["c", "b"]);
        assert_eq!(t.next_deadline(), Some(Instant::from_millis(11_000)));
        t.evict(Instant::from_millis(10_999));
        assert_eq!(t.held_ids(), ["c", "b"]);
        t.evict(Instant::from_millis(11_000));
        assert_eq!(t.held_ids(), ["c"]);
        t.evict(Instant::from_millis(12_000));
        assert!(t.held_ids().is_empty());
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn running_commands_come_first_and_count_towards_the_limit() {
        let mut t = table(10);
        finish(&mut t, 0, "done");
        t.accept(Instant::ZERO, 0, req("z-run"));
        t.accept(Instant::ZERO, 0, req("a-run"));
        assert_eq!(t.running(), 2);
        assert_eq!(t.held_ids(), ["a-run", "z-run", "done"]);
        assert_eq!(t.next_deadline(), Some(Instant::from_millis(10_000)));
        let timed_out = t.expire(Instant::from_millis(60_000), 7);
        assert_eq!(timed_out.len(), 2);
        assert!(
            timed_out
                .iter()
                .all(|e| e.phase() == CommandPhase::TimedOut)
        );
        assert_eq!(t.running(), 0);
    }

    #[test]
    fn content_decides_between_replay_and_conflict() {
        let mut t = table(10);
        t.accept(Instant::ZERO, 0, req("a"));
        assert!(matches!(t.known(&req("a")), Known::Same(..)));
        let mut other = req("a");
        other.timeout_ms = 5;
        assert!(matches!(t.known(&other), Known::Conflict));
        assert!(matches!(t.known(&req("b")), Known::New));
    }
}
