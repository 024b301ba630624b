//! Reading commands' records, and the Control Plane's bound on them: each command's
//! record lives with the command in its Edge's book ([`record`](crate::cp::record));
//! here the latest [`RecordLimits::records`](crate::cp::RecordLimits::records) are
//! indexed by id and their histories' bytes counted, and the oldest histories are
//! dropped past either bound.

use std::collections::{HashMap, VecDeque};

use crate::cp::Ending;
use crate::cp::command::CommandBook;
use crate::cp::command_state::{CommandAnswer, CommandOutcome, CommandState};
use crate::cp::record::{CommandRecord, History, UpdatePoll};
use iop_proto::CommandPhase;

use super::super::ControlPlane;

/// The commands whose history is kept, oldest first, and their bytes.
#[derive(Debug, Default)]
pub(in crate::cp::control_plane) struct RecordIndex {
    /// Command id → its Edge (the latest command of that id).
    by_id: HashMap<String, String>,
    /// (Edge, command), oldest first; entries of commands since gone are skipped when
    /// their turn comes.
    order: VecDeque<(String, String)>,
    /// Estimated bytes of every kept history, over all Edges.
    bytes: usize,
    /// Histories dropped for the bounds so far.
    dropped: u64,
}

impl ControlPlane {
    /// The record of `command_id` (of the Edge that last used the id), while it is
    /// among the latest [`RecordLimits::records`](crate::cp::RecordLimits::records)
    /// and its Edge is known: the Edge's response, the events kept, the outcome.
    pub fn command_record(&self, command_id: &str) -> Option<CommandRecord> {
        let edge_id = self.records.by_id.get(command_id)?;
        self.command_record_at(edge_id, command_id)
    }

    /// The record of `command_id` of `edge_id`, while its history is kept.
    pub fn command_record_at(&self, edge_id: &str, command_id: &str) -> Option<CommandRecord> {
        self.edges
            .get(edge_id)?
            .commands()
            .record_of(edge_id, command_id)
    }

    /// The Edge whose command `command_id` is, while its record is kept.
    pub fn command_edge(&self, command_id: &str) -> Option<&str> {
        let edge_id = self.records.by_id.get(command_id)?;
        self.command_record_at(edge_id, command_id)
            .is_some()
            .then_some(edge_id.as_str())
    }

    /// The first update of `command_id` of `edge_id` kept at or after `cursor` (which
    /// moves past it): a reader that starts at 0 and calls again on each change reads
    /// every update once, in order, skipping only RUNNING events coalesced before it
    /// read them.
    pub fn command_update(&self, edge_id: &str, command_id: &str, cursor: &mut u64) -> UpdatePoll {
        match self.edges.get(edge_id) {
            Some(entry) => entry.commands().next_update(command_id, cursor),
            None => UpdatePoll::Done,
        }
    }

    /// How many commands' histories were dropped for the bounds so far: a reader
    /// waiting on one of them learns it has ended by calling
    /// [`command_update`](Self::command_update) again.
    pub fn records_dropped(&self) -> u64 {
        self.records.dropped
    }

    /// Ends a command [`hold_command`](Self::hold_command) held back that could not be
    /// sent ([`Ending::Unrecorded`]: its record could not be written;
    /// [`Ending::Conflict`]: its id is another command's): FAILED, never sent, kept
    /// as finished commands are; its id may be sent anew. False when it is not held.
    pub fn end_held_command(&mut self, edge_id: &str, command_id: &str, ending: Ending) -> bool {
        let retention = self.config.finished_command_retention;
        let limits = self.config.command_records;
        self.edge_commands(edge_id, |book| {
            book.end_held(command_id, ending, retention, &limits)
        })
        .unwrap_or(false)
    }

    /// Replaces a command [`hold_command`](Self::hold_command) held back by the same
    /// command as another Control Plane sent it before (`record`, its record there):
    /// it is not sent again, and is carried on from where that record is, as an
    /// adopted command is. False when `command_id` is not held.
    pub fn replace_held_command(&mut self, edge_id: &str, record: CommandRecord) -> bool {
        let Some(held) = self.command(edge_id, &record.command_id) else {
            return false;
        };
        let mut state = CommandState::new(held.request);
        if let Some(r) = record.response() {
            state.answer = match r.accepted {
                true => CommandAnswer::Accepted,
                false => CommandAnswer::Rejected(r.reject_reason()),
            };
        }
        if let Some(e) = record.events().last() {
            state.last_sequence = e.sequence;
            state.phase = e.phase();
        }
        state.outcome = record.outcome.clone().or(match state.answer {
            CommandAnswer::Rejected(reason) => Some(CommandOutcome::Rejected(reason)),
            _ => None,
        });
        if state.phase == CommandPhase::Unspecified && record.ending().is_some() {
            state.phase = CommandPhase::Failed;
        }
        let retention = self.config.finished_command_retention;
        let history = History::from_record(record, &self.config.command_records);
        self.edge_commands(edge_id, |book| {
            book.drop_held(state.command_id()) && {
                book.adopt(state, Some(history), retention);
                true
            }
        })
        .unwrap_or(false)
    }

    /// Runs `f` on the command book of `edge_id`, keeping the count of history bytes
    /// and the bounds; `None` when the Edge is unknown.
    pub(in crate::cp::control_plane) fn edge_commands<T>(
        &mut self,
        edge_id: &str,
        f: impl FnOnce(&mut CommandBook) -> T,
    ) -> Option<T> {
        let (out, before, after) = self.edges.get_mut(edge_id)?.commands_mut().counted(f);
        self.records_changed(before, after);
        Some(out)
    }

    /// A book's histories went from `before` to `after` bytes: the count follows, and
    /// the oldest histories go while past the bounds.
    pub(in crate::cp::control_plane) fn records_changed(&mut self, before: usize, after: usize) {
        self.records.bytes = self.records.bytes + after - before;
        self.trim_records();
    }

    /// Drops the oldest histories while more are kept, or they hold more bytes, than
    /// `CpConfig::command_records` allows.
    fn trim_records(&mut self) {
        let limits = self.config.command_records;
        let records = &mut self.records;
        // The newest history is never dropped for the byte budget.
        while records.order.len() > limits.records.max(1)
            || (records.bytes > limits.book_bytes && records.order.len() > 1)
        {
            let Some((edge_id, command_id)) = records.order.pop_front() else {
                break;
            };
            if records.by_id.get(&command_id) == Some(&edge_id) {
                records.by_id.remove(&command_id);
            }
            if let Some(entry) = self.edges.get_mut(&edge_id) {
                let (dropped, before, after) = entry
                    .commands_mut()
                    .counted(|b| b.drop_history(&command_id));
                records.bytes -= before - after;
                records.dropped += u64::from(dropped);
            }
        }
    }

    /// `command_id` of `edge_id` keeps a history from now: it is indexed as the
    /// latest.
    pub(in crate::cp::control_plane) fn index_record(&mut self, edge_id: &str, command_id: &str) {
        let records = &mut self.records;
        let pair = (edge_id.to_owned(), command_id.to_owned());
        // An id used again by its Edge (a command that was never sent, retried; or
        // one forgotten since): its place in the order is the new one's.
        if let Some(before) = records.by_id.insert(pair.1.clone(), pair.0.clone())
            && before == edge_id
        {
            records.order.retain(|p| *p != pair);
        }
        records.order.push_back(pair);
        self.trim_records();
    }

    /// An Edge's book goes (the Edge is forgotten): its histories' bytes with it.
    pub(in crate::cp::control_plane) fn records_gone(&mut self, book: &CommandBook) {
        self.records.bytes -= book.history_bytes();
    }
}
