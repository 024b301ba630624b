//! Commands (PROTOCOL.md §4.4) on the Control Plane: sent to an Edge and tracked in
//! its command book across sessions (here: sending, holding for a write-ahead record,
//! queries); `answers` matches responses and events in, `sessions` does what a
//! session's start and end and an Edge's long absence do to them, `handover` takes
//! over the commands another Control Plane sent (PROTOCOL.md §8).

mod answers;
mod handover;
mod records;
mod sessions;

pub(in crate::cp::control_plane) use records::RecordIndex;

use iop_proto::limits::send;
use iop_proto::{Envelope, Message};

use crate::cp::CpEvent;
use crate::cp::command_state::{CommandSpec, CommandState};
use crate::cp::error::{CommandError, EdgeAbsent};
use crate::ids::validate_id;
use crate::outbound::OutboundError;
use crate::time::Instant;

use super::super::ControlPlane;

impl ControlPlane {
    /// Sends a command to `edge_id` and returns its id: the spec's `command_id` if set
    /// (the caller's idempotency key: `[A-Za-z0-9._-]{1,128}`, unique for this Edge),
    /// else a generated `cmd-<epoch hex>-<n>` with `config.command_id_epoch` and a
    /// per-CP counter from 1.
    ///
    /// The command is tracked until its terminal phase: responses and events arrive as
    /// events; if the session drops before a response, the command is re-sent on the
    /// Edge's next session (same id, idempotent). If the peer turns out too slow while
    /// sending, the session is dropped and the command is still kept for the next one.
    pub fn send_command(
        &mut self,
        now: Instant,
        edge_id: &str,
        spec: CommandSpec,
    ) -> Result<String, CommandError> {
        let id = self.admit_command(edge_id, spec)?;
        self.release_command(now, edge_id, &id);
        Ok(id)
    }

    /// [`send_command`](Self::send_command), but the command is held back, neither
    /// sent nor re-sent, until [`release_command`](Self::release_command) (its record
    /// is written: a cluster's write-ahead, PROTOCOL.md §8) or
    /// [`drop_command`](Self::drop_command) (it could not be). It counts against the
    /// in-flight limit meanwhile, and a reconnecting Edge's hello does not mark it
    /// lost. The request to record is [`CpEvent::CommandHeld`].
    pub fn hold_command(
        &mut self,
        edge_id: &str,
        spec: CommandSpec,
    ) -> Result<String, CommandError> {
        let command_id = self.admit_command(edge_id, spec)?;
        if let Some(held) = self.command(edge_id, &command_id) {
            self.events.push_back(CpEvent::CommandHeld {
                edge_id: edge_id.to_owned(),
                request: held.request,
            });
        }
        Ok(command_id)
    }

    /// Checks `spec` for `edge_id` (an advertised operation, a fresh valid id, room in
    /// flight, within the Edge's limits) and books it held back; returns its id.
    fn admit_command(&mut self, edge_id: &str, spec: CommandSpec) -> Result<String, CommandError> {
        self.live_conn_or_absent(edge_id)?;
        let Some(entry) = self.edges.get(edge_id) else {
            return Err(EdgeAbsent::unknown(edge_id).into());
        };
        if !entry.operations().contains(&spec.operation) {
            let mut advertised = entry.operations().to_vec();
            advertised.sort_unstable();
            return Err(CommandError::OperationNotAdvertised {
                operation: spec.operation.clone(),
                advertised,
            });
        }
        let mut next_n = self.last_command_n;
        let mut request = spec.into_request();
        let command_id =
            match Some(std::mem::take(&mut request.command_id)).filter(|id| !id.is_empty()) {
                Some(id) => {
                    validate_id("command id", &id).map_err(CommandError::InvalidCommandId)?;
                    id
                }
                // Skip any id the application already chose itself.
                None => loop {
                    next_n += 1;
                    let id = format!("cmd-{:x}-{next_n}", self.config.command_id_epoch);
                    if !entry.commands().contains(&id) {
                        break id;
                    }
                },
            };
        let unsent_before = entry.commands().is_unsent(&command_id);
        if entry.commands().contains(&command_id) && !unsent_before {
            return Err(CommandError::DuplicateCommandId(command_id));
        }
        let limit = self.config.max_inflight_commands;
        if entry.commands().unfinished() >= limit {
            return Err(CommandError::TooManyInFlight { limit });
        }
        request.command_id.clone_from(&command_id);
        // Nothing the Edge's decoder refuses is ever queued (PROTOCOL.md §4.6): such a
        // command would end the session, and be re-sent on every next one.
        send::command_request(&request)?;
        let len = Envelope::new(request.clone()).encoded_len();
        if len > self.config.max_frame_len as usize {
            return Err(CommandError::TooLarge(OutboundError::FrameTooLarge {
                len,
                max: self.config.max_frame_len,
            }));
        }
        self.last_command_n = next_n;
        self.stats.commands_issued += 1;
        self.edge_commands(edge_id, |book| {
            // A command that ended without being sent is tried anew under its id.
            book.forget_unsent(&request.command_id);
            book.insert(request, true);
        });
        self.index_record(edge_id, &command_id);
        Ok(command_id)
    }

    /// Sends a command [`hold_command`](Self::hold_command) held back, on the Edge's
    /// live session (else on its next one). False when `command_id` is not held.
    pub fn release_command(&mut self, now: Instant, edge_id: &str, command_id: &str) -> bool {
        let conn = self.live_conn(edge_id);
        let Some(request) = self
            .edges
            .get_mut(edge_id)
            .and_then(|e| e.commands_mut().release(command_id, conn.is_some()))
        else {
            return false;
        };
        // A full buffer drops the session; the command stays for the next one.
        if let Some(conn) = conn {
            let _ = self.send(now, conn, &Envelope::new(request));
        }
        true
    }

    /// Forgets a command [`hold_command`](Self::hold_command) held back: its record
    /// could not be written, and it was never sent. False when it is not held.
    pub fn drop_command(&mut self, edge_id: &str, command_id: &str) -> bool {
        self.edge_commands(edge_id, |book| book.drop_held(command_id))
            .unwrap_or(false)
    }

    /// Ids of the commands of `edge_id` without an outcome yet, oldest first.
    pub fn unfinished_commands(&self, edge_id: &str) -> Vec<String> {
        self.edges
            .get(edge_id)
            .map(|e| e.commands().unfinished_ids())
            .unwrap_or_default()
    }

    /// What is known about one command of one Edge.
    pub fn command(&self, edge_id: &str, command_id: &str) -> Option<CommandState> {
        self.edges.get(edge_id)?.commands().state(command_id)
    }
}
