//! The write-ahead path (PROTOCOL.md §8): a command the core held back
//! ([`CpEvent::CommandHeld`](iop_core::cp::CpEvent::CommandHeld)) is recorded by the
//! server's [`CommandJournal`], then sent; one the journal cannot record is dropped and
//! ends [`Ending::Unrecorded`] (or [`Ending::Conflict`]).

use std::sync::Arc;

use iop_core::cp::Ending;
use iop_core::proto::EdgeCommandRequest;

use super::journal::{CommandJournal, JournalError};
use super::state::CpShared;
use crate::Runtime;

impl<R: Runtime> CpShared<R> {
    /// Has the journal record a command the core held back, then send it (on the
    /// core's `CommandHeld`, as the server routes its outputs).
    pub(super) fn record(self: &Arc<Self>, edge_id: &str, request: &EdgeCommandRequest) {
        if let Some(journal) = crate::signal::lock(&self.journal).clone() {
            R::spawn(record_then_send(
                self.clone(),
                journal,
                edge_id.to_owned(),
                request.clone(),
            ));
        }
    }
}

/// Has `journal` record `request`, held back for `edge_id`, then sends it; a command
/// it cannot record is dropped from the core and ends [`Ending::Unrecorded`] (or
/// [`Ending::Conflict`]).
async fn record_then_send<R: Runtime>(
    shared: Arc<CpShared<R>>,
    journal: Arc<dyn CommandJournal>,
    edge_id: String,
    request: EdgeCommandRequest,
) {
    let command_id = request.command_id.clone();
    match journal.record(&edge_id, &request).await {
        Ok(()) => shared.with_direct(|state, now| {
            state.cp.release_command(now, &edge_id, &command_id);
        }),
        Err(e) => shared.with(|state, _| {
            let ending = match e {
                // Sent before, by another Control Plane: its record is this command's.
                JournalError::Exists(record) => {
                    state.cp.replace_held_command(&edge_id, *record);
                    return;
                }
                JournalError::Conflict => Ending::Conflict,
                JournalError::Unavailable(reason) => {
                    tracing::warn!(%edge_id, %command_id, error = %reason, "command not sent: it could not be recorded");
                    Ending::Unrecorded { reason }
                }
            };
            state.cp.end_held_command(&edge_id, &command_id, ending);
        }),
    }
}
