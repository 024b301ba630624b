//! [`CommandTracker`]: one command's updates as a stream over the record book.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;

use super::book::{CommandRecord, CommandUpdate};
use super::state::CpShared;
use crate::Runtime;
use crate::signal::lock;

/// Follows one command: yields every [`CommandUpdate`] (the Edge's response, then its
/// phases) and ends after the terminal one, a rejection, or [`CommandUpdate::Ended`]
/// (an [`Ending`](iop_core::cp::Ending) that is not the Edge's word).
///
/// It also ends if the command falls out of the handle's record book (more than its
/// capacity of newer commands, or its byte budget) or the server stops. A tracker that
/// falls behind skips the RUNNING events its record coalesced before it read them
/// ([`CommandRecord::coalesced_events`] counts them); the response, the first event and
/// the terminal one are never skipped.
pub struct CommandTracker<R: Runtime> {
    pub(super) shared: Arc<CpShared<R>>,
    edge_id: String,
    command_id: String,
    /// The sequence of the next update to yield.
    cursor: u64,
}

impl<R: Runtime> std::fmt::Debug for CommandTracker<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandTracker")
            .field("edge_id", &self.edge_id)
            .field("command_id", &self.command_id)
            .field("cursor", &self.cursor)
            .finish()
    }
}

impl<R: Runtime> CommandTracker<R> {
    pub(crate) fn new(shared: Arc<CpShared<R>>, edge_id: String, command_id: String) -> Self {
        Self {
            shared,
            edge_id,
            command_id,
            cursor: 0,
        }
    }

    /// The command's id.
    pub fn command_id(&self) -> &str {
        &self.command_id
    }

    /// The Edge it was sent to.
    pub fn edge_id(&self) -> &str {
        &self.edge_id
    }

    /// Waits until the command is finished (or the tracker ends otherwise) and returns
    /// its record: response, every event, outcome.
    pub async fn finish(mut self) -> Option<CommandRecord> {
        while futures_lite::future::poll_fn(|cx| Pin::new(&mut self).poll_next(cx))
            .await
            .is_some()
        {}
        self.record()
    }

    /// The command's record so far.
    pub fn record(&self) -> Option<CommandRecord> {
        let state = lock(&self.shared.state);
        state.book.get(&self.command_id).cloned()
    }
}

impl<R: Runtime> Stream for CommandTracker<R> {
    type Item = CommandUpdate;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<CommandUpdate>> {
        let this = self.get_mut();
        let mut state = lock(&this.shared.state);
        let stopped = state.stopped;
        state
            .book
            .poll_update(&this.command_id, &mut this.cursor, stopped, cx)
    }
}
