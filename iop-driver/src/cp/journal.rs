//! Where a command is recorded before it is sent: the write-ahead seam of a cluster
//! (PROTOCOL.md §8 "Command records").
//!
//! With a [`CommandJournal`] set ([`ControlPlaneHandle::set_command_journal`](crate::ControlPlaneHandle::set_command_journal)),
//! [`ControlPlaneHandle::send_command`](crate::ControlPlaneHandle::send_command) holds
//! each new command back in the core ([`ControlPlane::hold_command`](iop_core::cp::ControlPlane::hold_command)),
//! and on the core's [`CpEvent::CommandHeld`](iop_core::cp::CpEvent::CommandHeld) —
//! the request as it will be sent — asks the journal to record it, and sends it only
//! once the journal says it is recorded. A command the journal cannot record is
//! dropped, never sent: it ends [`Ending::Unrecorded`](iop_core::cp::Ending::Unrecorded)
//! (or [`Ending::Conflict`](iop_core::cp::Ending::Conflict)). One
//! the journal holds already (a caller's retry under the same key through another
//! Control Plane) is not sent again: its tracker follows the journal's record of it.
//! So an answer from the Edge is only ever about a command the journal holds.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use iop_core::proto::EdgeCommandRequest;

/// Why a journal did not record a command.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// It could not be written (the engine is unreachable, say): nothing is sent.
    #[error("{0}")]
    Unavailable(String),
    /// The journal holds this command already, with the same content: sent earlier
    /// (by another Control Plane of the cluster, whose record this is). Nothing is
    /// sent again; the command's record is this one.
    #[error("the command is recorded already")]
    Exists(Box<crate::CommandRecord>),
    /// The journal holds another command under this id (another Edge's, or other
    /// content): nothing is sent.
    #[error("another command is recorded under this id")]
    Conflict,
}

/// The future of one [`CommandJournal::record`].
pub type Recording = Pin<Box<dyn Future<Output = Result<(), JournalError>> + Send + 'static>>;

/// Records commands before they are sent (a cluster's shared engine).
pub trait CommandJournal: fmt::Debug + Send + Sync + 'static {
    /// Records `request`, about to be sent to `edge_id`, create-only on its
    /// `command_id`; resolves `Ok` once the record is durable, `Err` when it cannot
    /// be written (nothing is sent then).
    fn record(&self, edge_id: &str, request: &EdgeCommandRequest) -> Recording;
}
