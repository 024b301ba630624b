//! The record half of an Edge's command book: each command's history (what an
//! operator reads of it) kept with the command, read through the Control Plane, and
//! the ends of commands that were never sent.

use iop_proto::CommandPhase;

use super::{CommandBook, CommandOutcome, Tracked};
use crate::cp::ending::Ending;
use crate::cp::record::{CommandRecord, CommandUpdate, RecordLimits, UpdatePoll};

impl CommandBook {
    /// Whether `command_id` ended without being sent (see
    /// [`forget_unsent`](Self::forget_unsent)).
    pub(crate) fn is_unsent(&self, command_id: &str) -> bool {
        (self.commands.get(command_id))
            .and_then(|t| t.outcome.as_ref())
            .is_some_and(CommandOutcome::never_sent)
    }

    /// Ends a held command that was never sent (its record could not be written, or
    /// its id is another command's): FAILED with `ending`, kept as finished commands
    /// are. False when `command_id` is not held.
    pub(crate) fn end_held(
        &mut self,
        command_id: &str,
        ending: Ending,
        retention: usize,
        limits: &RecordLimits,
    ) -> bool {
        let Some(t) = self.commands.get_mut(command_id).filter(|t| t.held) else {
            return false;
        };
        t.held = false;
        t.awaiting_response = false;
        t.phase = CommandPhase::Failed;
        self.record(command_id, CommandUpdate::Ended(ending.clone()), limits);
        self.finish(command_id, CommandOutcome::Ended(ending), retention);
        true
    }

    /// Forgets a command that ended without being sent ([`Ending::Unrecorded`] or
    /// [`Ending::Conflict`]), so that its id may be sent anew (the caller's retry under
    /// its key). False for any other command.
    pub(crate) fn forget_unsent(&mut self, command_id: &str) -> bool {
        let unsent = self.is_unsent(command_id);
        if unsent {
            self.remove(command_id);
            self.finished.retain(|id| id != command_id);
        }
        unsent
    }

    /// Removes `command_id`, its history with it.
    pub(super) fn remove(&mut self, command_id: &str) {
        if let Some(h) = self.commands.remove(command_id).and_then(|t| t.history) {
            self.history_bytes -= h.bytes;
        }
    }

    /// Adds `update` to the history of `command_id` (if kept).
    pub(super) fn record(
        &mut self,
        command_id: &str,
        update: CommandUpdate,
        limits: &RecordLimits,
    ) {
        if let Some(t) = self.commands.get_mut(command_id) {
            keep(t, &mut self.history_bytes, update, limits);
        }
    }

    /// Estimated bytes of every kept history.
    pub(crate) fn history_bytes(&self) -> usize {
        self.history_bytes
    }

    /// Drops the history of `command_id` (the Control Plane keeps too many); the
    /// command goes on. False when it kept none.
    pub(crate) fn drop_history(&mut self, command_id: &str) -> bool {
        let dropped = (self.commands.get_mut(command_id)).and_then(|t| t.history.take());
        if let Some(h) = &dropped {
            self.history_bytes -= h.bytes;
        }
        dropped.is_some()
    }

    /// Runs `f` on the book; returns what it returned and the book's history bytes
    /// before and after, for the Control Plane's count.
    pub(crate) fn counted<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> (T, usize, usize) {
        let before = self.history_bytes;
        let out = f(self);
        (out, before, self.history_bytes)
    }

    /// The record of `command_id` as an operator reads it, while its history is kept.
    pub(crate) fn record_of(&self, edge_id: &str, command_id: &str) -> Option<CommandRecord> {
        let t = self.commands.get(command_id)?;
        let h = t.history.as_ref()?;
        let mut record = CommandRecord::new(edge_id, command_id, &t.request.operation);
        record.updates.clone_from(&h.updates);
        record.outcome.clone_from(&t.outcome);
        record.coalesced_events = h.coalesced;
        Some(record)
    }

    /// The first update of `command_id` kept at or after `cursor`.
    pub(crate) fn next_update(&self, command_id: &str, cursor: &mut u64) -> UpdatePoll {
        let Some(t) = self.commands.get(command_id) else {
            return UpdatePoll::Done;
        };
        let Some(h) = t.history.as_ref() else {
            return UpdatePoll::Done;
        };
        match h.next(cursor) {
            Some(update) => UpdatePoll::Update(update),
            None if t.outcome.is_some() => UpdatePoll::Done,
            None => UpdatePoll::Pending,
        }
    }
}

/// Adds `update` to `t`'s history (if kept), its bytes counted in `total`.
pub(super) fn keep(
    t: &mut Tracked,
    total: &mut usize,
    update: CommandUpdate,
    limits: &RecordLimits,
) {
    if let Some(h) = t.history.as_mut() {
        *total -= h.bytes;
        h.push(update, limits);
        *total += h.bytes;
    }
}
