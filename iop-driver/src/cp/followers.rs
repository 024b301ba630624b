//! The trackers following commands: whom to wake when a command's record moves on.
//! The record itself is the core's ([`ControlPlane::command_record`]); a tracker reads
//! it from its cursor ([`ControlPlane::command_update`]), never a copy.

use std::collections::HashMap;
use std::task::{Context, Poll, Waker};

use iop_core::cp::{CommandUpdate, ControlPlane, Ending, UpdatePoll};

#[derive(Debug, Default)]
struct Follow {
    /// Live trackers of the command.
    trackers: usize,
    wakers: Vec<Waker>,
    /// Its Edge was forgotten before it finished: its record went with the Edge, and
    /// its trackers end with [`Ending::Forgotten`].
    forgotten: bool,
}

/// Command id → the trackers following it.
#[derive(Debug, Default)]
pub(crate) struct Followers {
    by_id: HashMap<String, Follow>,
}

/// Where one tracker is in its command's record.
#[derive(Debug, Default)]
pub(crate) struct Place {
    /// The sequence of the next update to read.
    pub(crate) cursor: u64,
    /// The ending it yielded that the record no longer holds (the Edge forgotten).
    pub(crate) ended: Option<Ending>,
}

impl Followers {
    /// A tracker of `command_id` starts.
    pub(crate) fn follow(&mut self, command_id: &str) {
        self.by_id
            .entry(command_id.to_owned())
            .or_default()
            .trackers += 1;
    }

    /// A tracker of `command_id` is dropped.
    pub(crate) fn unfollow(&mut self, command_id: &str) {
        if let Some(follow) = self.by_id.get_mut(command_id) {
            follow.trackers -= 1;
            if follow.trackers == 0 {
                self.by_id.remove(command_id);
            }
        }
    }

    /// `command_id`'s record moved on.
    pub(crate) fn wake(&mut self, command_id: &str) {
        if let Some(follow) = self.by_id.get_mut(command_id) {
            follow.wakers.drain(..).for_each(Waker::wake);
        }
    }

    /// `command_id`'s Edge was forgotten before the command finished.
    pub(crate) fn forgotten(&mut self, command_id: &str) {
        if let Some(follow) = self.by_id.get_mut(command_id) {
            follow.forgotten = true;
            follow.wakers.drain(..).for_each(Waker::wake);
        }
    }

    /// Wakes every tracker (the server stopped, or records were dropped).
    pub(crate) fn wake_all(&mut self) {
        for follow in self.by_id.values_mut() {
            follow.wakers.drain(..).for_each(Waker::wake);
        }
    }

    /// The next update of `command_id` of `edge_id` for the tracker at `place`.
    pub(crate) fn poll_update(
        &mut self,
        cp: &ControlPlane,
        (edge_id, command_id): (&str, &str),
        place: &mut Place,
        stopped: bool,
        cx: &mut Context<'_>,
    ) -> Poll<Option<CommandUpdate>> {
        match cp.command_update(edge_id, command_id, &mut place.cursor) {
            UpdatePoll::Update(update) => Poll::Ready(Some(update)),
            UpdatePoll::Pending if !stopped => {
                let follow = self.by_id.entry(command_id.to_owned()).or_default();
                if !follow.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    follow.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
            _ => {
                let forgotten = self.by_id.get(command_id).is_some_and(|f| f.forgotten);
                if forgotten && place.ended.is_none() {
                    place.ended = Some(Ending::Forgotten);
                    return Poll::Ready(Some(CommandUpdate::Ended(Ending::Forgotten)));
                }
                Poll::Ready(None)
            }
        }
    }
}
