//! Commands carried from one Control Plane to another (PROTOCOL.md §8 "Command
//! records"): what a replica that takes an Edge over needs of the commands another
//! replica sent it, so that PROTOCOL.md §4.4's re-send / lost-by-the-Edge rules go on
//! from there.
//!
//! The replica holding the Edge reads each command's [`CommandHandover`]
//! ([`ControlPlane::command_handover`]) and keeps it in a shared store as it changes;
//! the replica that next wins the Edge's ownership claim hands the unfinished ones to
//! its core with [`ControlPlane::adopt_commands`] before it grants the claim. When the
//! hello is then accepted, the adopted commands join the Edge's own (the further
//! advanced of two copies of one command wins) before the hello's
//! `inflight_command_ids` are compared with them: a command never answered is re-sent,
//! one believed accepted that the Edge no longer holds is marked lost, and the Edge's
//! replayed events of those it holds are de-duplicated against what was adopted.

use iop_proto::limits::send;
use iop_proto::{CommandPhase, EdgeCommandRequest, Envelope, Message};

use crate::ids::MAX_ID_LEN;

use super::command::CommandAnswer;
use super::conn::ConnState;
use super::directory::ClaimError;
use super::endpoint::ControlPlane;
use super::event::CommandOutcome;
use super::ids::ConnectionId;

/// One command as a Control Plane knows it, for another to carry on.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CommandHandover {
    /// The request as sent (re-sent as it is when it was never answered).
    pub request: EdgeCommandRequest,
    /// The Edge's answer so far.
    pub answer: CommandAnswer,
    /// The latest phase seen (UNSPECIFIED before any event).
    pub phase: CommandPhase,
    /// The latest event sequence seen (0 before any event).
    pub last_sequence: u32,
    /// Set once the command is finished for good.
    pub outcome: Option<CommandOutcome>,
    /// Sessions its request was sent on that ended without its response.
    pub unanswered_sessions: u32,
}

impl CommandHandover {
    /// A command sent and not answered yet.
    pub fn new(request: EdgeCommandRequest) -> Self {
        Self {
            request,
            answer: CommandAnswer::Pending,
            phase: CommandPhase::Unspecified,
            last_sequence: 0,
            outcome: None,
            unanswered_sessions: 0,
        }
    }

    /// How far the command got: a copy further on replaces an older one.
    pub(crate) fn progress(&self) -> (bool, bool, u32) {
        progress(self.outcome.is_some(), self.answer, self.last_sequence)
    }
}

/// The order in which a command's copies are compared: finished, answered, then by
/// the latest event sequence seen.
pub(crate) fn progress(
    finished: bool,
    answer: CommandAnswer,
    last_sequence: u32,
) -> (bool, bool, u32) {
    (finished, answer != CommandAnswer::Pending, last_sequence)
}

impl ControlPlane {
    /// What another Control Plane needs to carry command `command_id` of `edge_id` on
    /// (PROTOCOL.md §8); `None` for a command not known (or no longer kept) here.
    pub fn command_handover(&self, edge_id: &str, command_id: &str) -> Option<CommandHandover> {
        self.edges.get(edge_id)?.commands.handover(command_id)
    }

    /// Hands the commands another Control Plane sent to the Edge whose ownership claim
    /// waits on `conn` (their [`CommandHandover`]s, oldest first) to this one: once the
    /// claim is granted, they join the Edge's commands before the hello's in-flight ids
    /// are compared with them (see the [module docs](self)). Call it before
    /// [`handle_claim`](Self::handle_claim); a later call adds to an earlier one.
    /// [`ClaimError::NotWaiting`] when no claim waits on `conn`.
    ///
    /// A command that this Control Plane could not have sent is left out, so that a
    /// corrupt or foreign record is never re-sent: an empty id or one over 128 bytes, a
    /// request over the Edge's limits (PROTOCOL.md §4.6) or the frame limit, and any
    /// unfinished command past `max_inflight_commands`. Returns the ids kept.
    pub fn adopt_commands(
        &mut self,
        conn: ConnectionId,
        commands: Vec<CommandHandover>,
    ) -> Result<Vec<String>, ClaimError> {
        let max_frame_len = self.config.max_frame_len as usize;
        let max_unfinished = self.config.max_inflight_commands;
        let Some(c) = self.conns.get_mut(&conn) else {
            return Err(ClaimError::NotWaiting);
        };
        let ConnState::Claiming(pending) = &mut c.state else {
            return Err(ClaimError::NotWaiting);
        };
        let mut kept = Vec::new();
        let mut unfinished = pending
            .adopted
            .iter()
            .filter(|a| a.outcome.is_none())
            .count();
        for command in commands {
            let id = &command.request.command_id;
            let fits = !id.is_empty()
                && id.len() <= MAX_ID_LEN
                && send::command_request(&command.request).is_ok()
                && Envelope::new(command.request.clone()).encoded_len() <= max_frame_len
                && (command.outcome.is_some() || unfinished < max_unfinished);
            if fits {
                unfinished += usize::from(command.outcome.is_none());
                kept.push(command.request.command_id.clone());
                pending.adopted.push(command);
            }
        }
        Ok(kept)
    }

    /// Joins the commands adopted for a claim to the Edge's own.
    pub(crate) fn join_adopted(&mut self, edge_id: &str, adopted: Vec<CommandHandover>) {
        let retention = self.config.finished_command_retention;
        if let Some(entry) = self.edges.get_mut(edge_id) {
            for command in adopted {
                entry.commands.adopt(command, retention);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_copy_is_further_on_than_any_unfinished_one() {
        let request = EdgeCommandRequest::default();
        let mut running = CommandHandover::new(request.clone());
        running.answer = CommandAnswer::Accepted;
        running.last_sequence = 9;
        let mut done = CommandHandover::new(request);
        done.outcome = Some(CommandOutcome::Lost);
        assert!(done.progress() > running.progress());
    }
}
