//! A command's record: what an operator reads of it (the Edge's response and events as
//! they came, or the ending without the Edge's word) kept with the command itself in
//! its Edge's command book, so that each command has one record. The driver's
//! trackers and the cluster's writer read it through the Control Plane
//! ([`ControlPlane::command_record`](super::ControlPlane::command_record),
//! [`ControlPlane::command_update`](super::ControlPlane::command_update)), never copy it.
//!
//! Histories are bounded: per command (the latest RUNNING events, a byte budget) and
//! across the Control Plane ([`RecordLimits::records`], [`RecordLimits::book_bytes`]):
//! past those the oldest commands' histories are dropped — the commands themselves go
//! on under the protocol's rules, only their history is no longer readable.

use iop_proto::{
    CommandPhase, CommandRejectReason, EdgeCommandEvent, EdgeCommandResponse, WireEnum,
};

use super::command_state::{CommandAnswer, CommandOutcome, CommandState};
use super::ending::Ending;

/// How much of a command's history its record keeps, and how much the whole Control
/// Plane holds (`CpConfig::command_records`).
///
/// A record keeps the Edge's response, the command's first event, its latest
/// `running_events` RUNNING events and its terminal event; older RUNNING events are
/// coalesced (counted in [`CommandRecord::coalesced_events`]), also while the record
/// would hold more than `record_bytes`. The oldest commands' histories are dropped while
/// more than `records` are kept or they hold more than `book_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordLimits {
    /// RUNNING events kept per record, the latest ones (default 16).
    pub running_events: usize,
    /// Bytes of events a record keeps besides its first and terminal events (default
    /// 64 KiB).
    pub record_bytes: usize,
    /// Bytes the histories of all commands keep (default 64 MiB).
    pub book_bytes: usize,
    /// Commands whose history is kept, the latest ones (default 4 096).
    pub records: usize,
}

impl Default for RecordLimits {
    fn default() -> Self {
        Self {
            running_events: 16,
            record_bytes: 64 * 1024,
            book_bytes: 64 * 1024 * 1024,
            records: 4_096,
        }
    }
}

/// One step of a command, in the order the Control Plane learnt it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CommandUpdate {
    /// The Edge answered the request (as it sent it).
    Response(EdgeCommandResponse),
    /// A phase event (ACCEPTED, RUNNING…, then one terminal phase).
    Event(EdgeCommandEvent),
    /// It ended without the Edge's word ([`Ending`]: lost, undeliverable, abandoned,
    /// forgotten, unrecorded, a conflict of its id): FAILED, never sent (again).
    Ended(Ending),
}

/// Everything known about one command, as read from its record: its response and every
/// event kept so far.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CommandRecord {
    /// The Edge it was sent to.
    pub edge_id: String,
    /// Its id.
    pub command_id: String,
    /// Its operation.
    pub operation: String,
    /// The updates kept, in arrival order: the response, the first event, the latest
    /// RUNNING events and the terminal one (see [`RecordLimits`]).
    pub updates: Vec<CommandUpdate>,
    /// Set once the command is finished for good.
    pub outcome: Option<CommandOutcome>,
    /// RUNNING events not kept: older than the latest ones kept, or over the record's
    /// byte budget. Each was seen, in order, by the trackers following it then.
    pub coalesced_events: u64,
}

impl CommandRecord {
    /// The record of a command as its protocol state tells it (`state`), without a
    /// history: its answer (without the Edge's message) and outcome, no events.
    pub fn of(edge_id: &str, state: &CommandState) -> Self {
        let request = &state.request;
        let mut record = Self::new(edge_id, &request.command_id, &request.operation);
        let answered = |accepted: bool, reason: CommandRejectReason| EdgeCommandResponse {
            command_id: request.command_id.clone(),
            accepted,
            reject_reason: reason as i32,
            message: String::new(),
        };
        match state.answer {
            CommandAnswer::Accepted => record.updates.push(CommandUpdate::Response(answered(
                true,
                CommandRejectReason::Unspecified,
            ))),
            CommandAnswer::Rejected(reason) => record
                .updates
                .push(CommandUpdate::Response(answered(false, reason))),
            _ => {}
        }
        record.outcome = state.outcome.clone();
        record
    }

    /// A record of `command_id` of `edge_id` with no update yet (a command another
    /// Control Plane sent, rebuilt from the cluster's record, say).
    pub fn new(
        edge_id: impl Into<String>,
        command_id: impl Into<String>,
        operation: impl Into<String>,
    ) -> Self {
        Self {
            edge_id: edge_id.into(),
            command_id: command_id.into(),
            operation: operation.into(),
            updates: Vec::new(),
            outcome: None,
            coalesced_events: 0,
        }
    }

    /// The Edge's response, if it came.
    pub fn response(&self) -> Option<&EdgeCommandResponse> {
        self.updates.iter().find_map(|u| match u {
            CommandUpdate::Response(r) => Some(r),
            _ => None,
        })
    }

    /// The phase of the latest event kept, if one came (a newer Edge's unknown phase
    /// kept as it is).
    pub fn phase(&self) -> Option<WireEnum<CommandPhase>> {
        self.events().last().map(EdgeCommandEvent::phase_enum)
    }

    /// The phase events kept so far.
    pub fn events(&self) -> impl Iterator<Item = &EdgeCommandEvent> {
        self.updates.iter().filter_map(|u| match u {
            CommandUpdate::Event(e) => Some(e),
            _ => None,
        })
    }

    /// The ending without the Edge's word, as it was learnt (with its details).
    pub fn ending(&self) -> Option<&Ending> {
        self.updates.iter().find_map(|u| match u {
            CommandUpdate::Ended(e) => Some(e),
            _ => None,
        })
    }
}

/// What reading a record from a cursor found ([`ControlPlane::command_update`](super::ControlPlane::command_update)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UpdatePoll {
    /// The next update kept at or after the cursor (the cursor moved past it).
    Update(CommandUpdate),
    /// Nothing new yet: the command is not finished.
    Pending,
    /// Nothing more will come: the command finished and every kept update was read, or
    /// its history is no longer kept.
    Done,
}

/// The kept updates of one command, with the place of each in its full sequence so
/// that a reader's cursor survives coalescing.
#[derive(Debug, Default, Clone)]
pub(crate) struct History {
    pub(crate) updates: Vec<CommandUpdate>,
    /// The sequence of each kept update (parallel to `updates`): coalescing takes
    /// updates out without moving any reader's place.
    seqs: Vec<u64>,
    next_seq: u64,
    /// Estimated bytes of the kept updates.
    pub(crate) bytes: usize,
    pub(crate) coalesced: u64,
}

/// Estimated bytes of one kept update.
pub(crate) fn update_bytes(update: &CommandUpdate) -> usize {
    let heap = match update {
        CommandUpdate::Response(r) => r.command_id.len() + r.message.len(),
        CommandUpdate::Ended(Ending::Unrecorded { reason }) => reason.len(),
        CommandUpdate::Event(e) => {
            e.command_id.len()
                + e.message.len()
                + e.detail
                    .iter()
                    .map(|(k, v)| 48 + k.len() + v.len())
                    .sum::<usize>()
        }
        _ => 0,
    };
    std::mem::size_of::<CommandUpdate>() + heap
}

fn is_running(update: &CommandUpdate) -> bool {
    matches!(update, CommandUpdate::Event(e) if e.phase() == CommandPhase::Running)
}

impl History {
    /// A history of `updates` (a record carried over from another Control Plane),
    /// coalesced to `limits`.
    pub(crate) fn from_record(record: CommandRecord, limits: &RecordLimits) -> Self {
        let mut history = Self {
            coalesced: record.coalesced_events,
            ..Self::default()
        };
        for update in record.updates {
            history.push(update, limits);
        }
        history
    }

    /// Keeps `update`, coalescing the oldest RUNNING events past `limits` (the latest
    /// one always kept).
    pub(crate) fn push(&mut self, update: CommandUpdate, limits: &RecordLimits) {
        self.bytes += update_bytes(&update);
        self.updates.push(update);
        self.seqs.push(self.next_seq);
        self.next_seq += 1;
        loop {
            let mut running = (self.updates.iter().enumerate()).filter(|(_, u)| is_running(u));
            let (Some((oldest, _)), count) = (running.next(), 1 + running.count()) else {
                return;
            };
            let over_count = count > limits.running_events;
            let over_bytes = self.bytes > limits.record_bytes && count > 1;
            if !(over_count || over_bytes) {
                return;
            }
            let gone = self.updates.remove(oldest);
            self.seqs.remove(oldest);
            self.bytes -= update_bytes(&gone);
            self.coalesced += 1;
        }
    }

    /// The first update kept at or after `cursor`, moving the cursor past it.
    pub(crate) fn next(&self, cursor: &mut u64) -> Option<CommandUpdate> {
        let at = self.seqs.partition_point(|&seq| seq < *cursor);
        let (update, seq) = (self.updates.get(at)?, self.seqs.get(at)?);
        *cursor = seq + 1;
        Some(update.clone())
    }
}

#[cfg(test)]
mod tests;
