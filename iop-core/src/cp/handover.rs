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

use iop_proto::{CommandPhase, EdgeCommandRequest};

use super::command_state::{CommandAnswer, progress};
#[cfg(doc)]
use super::control_plane::ControlPlane;
use super::event::CommandOutcome;

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
