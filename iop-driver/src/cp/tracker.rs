//! [`CommandTracker`]: one command's updates as a stream over its record in the core.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;

use iop_core::cp::{CommandRecord, CommandUpdate};

use super::followers::Place;
use super::state::CpShared;
use crate::Runtime;

/// Follows one command: yields every [`CommandUpdate`] (the Edge's response, then its
/// phases) and ends after the terminal one, a rejection, or [`CommandUpdate::Ended`]
/// (an [`Ending`](iop_core::cp::Ending) that is not the Edge's word).
///
/// It also ends if the command's record is no longer kept (more than
/// [`RecordLimits::records`](iop_core::cp::RecordLimits::records) newer commands, or
/// their byte budget) or the server stops; if its Edge is forgotten first, after
/// [`Ending::Forgotten`](iop_core::cp::Ending::Forgotten). A tracker that
/// falls behind skips the RUNNING events its record coalesced before it read them
/// ([`CommandRecord::coalesced_events`] counts them); the response, the first event and
/// the terminal one are never skipped.
pub struct CommandTracker<R: Runtime> {
    pub(super) shared: Arc<CpShared<R>>,
    edge_id: String,
    command_id: String,
    /// Where it is in the command's record.
    place: Place,
}

impl<R: Runtime> std::fmt::Debug for CommandTracker<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandTracker")
            .field("edge_id", &self.edge_id)
            .field("command_id", &self.command_id)
            .field("cursor", &self.place.cursor)
            .finish()
    }
}

impl<R: Runtime> CommandTracker<R> {
    pub(crate) fn new(shared: Arc<CpShared<R>>, edge_id: String, command_id: String) -> Self {
        shared.lock().followers.follow(&command_id);
        Self {
            shared,
            edge_id,
            command_id,
            place: Place::default(),
        }
    }

    /// The ending it yielded that its record no longer holds (its Edge forgotten).
    pub(super) fn ended(&self) -> Option<&iop_core::cp::Ending> {
        self.place.ended.as_ref()
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
    /// its record: response, every event, outcome (`None`: no longer kept).
    pub async fn finish(mut self) -> Option<CommandRecord> {
        self.run_out().await;
        self.record()
    }

    /// Reads every update until the tracker ends.
    pub(super) async fn run_out(&mut self) {
        while futures_lite::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx))
            .await
            .is_some()
        {}
    }

    /// The command's record so far (read from the core: a copy of it as it is now).
    pub fn record(&self) -> Option<CommandRecord> {
        let state = self.shared.lock();
        state.cp.command_record_at(&self.edge_id, &self.command_id)
    }
}

impl<R: Runtime> Stream for CommandTracker<R> {
    type Item = CommandUpdate;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<CommandUpdate>> {
        let this = self.get_mut();
        let mut state = this.shared.lock();
        let state = &mut *state;
        let command = (this.edge_id.as_str(), this.command_id.as_str());
        (state.followers).poll_update(&state.cp, command, &mut this.place, state.stopped, cx)
    }
}

impl<R: Runtime> Drop for CommandTracker<R> {
    fn drop(&mut self) {
        self.shared.lock().followers.unfollow(&self.command_id);
    }
}
