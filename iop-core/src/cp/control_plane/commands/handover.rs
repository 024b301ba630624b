//! Commands handed over from another Control Plane (PROTOCOL.md §8 "Command records"):
//! the records of an Edge whose claim waits here join its command book when the claim
//! is granted, before the hello's in-flight ids are compared with them.

use iop_proto::limits::send;
use iop_proto::{Envelope, Message};

use crate::cp::command_state::CommandState;
use crate::cp::directory::ClaimError;
use crate::cp::ids::ConnectionId;
use crate::cp::record::{CommandRecord, History};
use crate::ids::MAX_ID_LEN;

use super::super::ControlPlane;

impl ControlPlane {
    /// Hands the commands another Control Plane sent to the Edge whose ownership claim
    /// waits on `conn` (their [`CommandState`]s, oldest first) to this one: once the
    /// claim is granted, they join the Edge's commands before the hello's in-flight ids
    /// are compared with them (see [`CommandState`]). Call it before
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
        commands: Vec<CommandState>,
    ) -> Result<Vec<String>, ClaimError> {
        let commands = commands.into_iter().map(|c| (c, None)).collect();
        self.adopt_commands_with_records(conn, commands)
    }

    /// [`adopt_commands`](Self::adopt_commands), each command with its record there
    /// (`None`: an empty one), which becomes its record here.
    pub fn adopt_commands_with_records(
        &mut self,
        conn: ConnectionId,
        commands: Vec<(CommandState, Option<CommandRecord>)>,
    ) -> Result<Vec<String>, ClaimError> {
        let limits = self.config.command_records;
        let max_frame_len = self.config.max_frame_len as usize;
        let max_unfinished = self.config.max_inflight_commands;
        let Some(pending) = self.claims.get_mut(&conn) else {
            return Err(ClaimError::NotWaiting);
        };
        let mut kept = Vec::new();
        let mut unfinished = pending
            .adopted
            .iter()
            .filter(|(a, _)| a.outcome.is_none())
            .count();
        for (command, record) in commands {
            let id = &command.request.command_id;
            let fits = !id.is_empty()
                && id.len() <= MAX_ID_LEN
                && send::command_request(&command.request).is_ok()
                && Envelope::new(command.request.clone()).encoded_len() <= max_frame_len
                && (command.outcome.is_some() || unfinished < max_unfinished);
            if fits {
                unfinished += usize::from(command.outcome.is_none());
                kept.push(command.request.command_id.clone());
                let history = record.map(|r| History::from_record(r, &limits));
                pending.adopted.push((command, history));
            }
        }
        Ok(kept)
    }

    /// Joins the commands adopted for a claim to the Edge's own.
    pub(in crate::cp::control_plane) fn join_adopted(
        &mut self,
        edge_id: &str,
        adopted: Vec<(CommandState, Option<History>)>,
    ) {
        let retention = self.config.finished_command_retention;
        let ids: Vec<String> = adopted
            .iter()
            .map(|(c, _)| c.command_id().to_owned())
            .collect();
        self.edge_commands(edge_id, |book| {
            for (command, history) in adopted {
                book.adopt(command, history, retention);
            }
        });
        for id in ids {
            self.index_record(edge_id, &id);
        }
    }
}
