//! The handle's bounded record book of commands, and the tracker stream over it.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures_core::Stream;
use iop_core::cp::CommandOutcome;
use iop_core::proto::{CommandRejectReason, EdgeCommandEvent};

use super::server::CpShared;
use crate::Runtime;
use crate::signal::lock;

/// Events kept per command; past it further non-terminal events are counted, not kept.
pub const MAX_EVENTS_PER_RECORD: usize = 256;

/// The Edge's answer to a command request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandResponse {
    /// Whether the Edge took the command.
    pub accepted: bool,
    /// Why not (UNSPECIFIED when accepted).
    pub reject_reason: CommandRejectReason,
    /// The Edge's message.
    pub message: String,
}

/// One step of a command, in the order the Control Plane learnt it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CommandUpdate {
    /// The Edge answered the request.
    Response(CommandResponse),
    /// A phase event (ACCEPTED, RUNNING…, then one terminal phase).
    Event(EdgeCommandEvent),
    /// The Edge came back without it: the command is FAILED as lost.
    Lost,
    /// Its request was sent on this many sessions that each ended without an answer:
    /// FAILED "undeliverable", never sent again (SPEC §4.4).
    Undeliverable {
        /// Sessions that ended without answering it.
        sessions: u32,
    },
    /// The view of its Edge was forgotten (disconnected too long, or too many
    /// disconnected Edges) before it finished.
    Forgotten,
}

/// Everything known about one command: its response and every event so far.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CommandRecord {
    /// The Edge it was sent to.
    pub edge_id: String,
    /// Its id.
    pub command_id: String,
    /// Its operation.
    pub operation: String,
    /// Every update so far, in arrival order.
    pub updates: Vec<CommandUpdate>,
    /// Set once the command is finished for good.
    pub outcome: Option<CommandOutcome>,
    /// Events not kept (past [`MAX_EVENTS_PER_RECORD`]).
    pub dropped_events: u64,
}

impl CommandRecord {
    /// The Edge's response, if it came.
    pub fn response(&self) -> Option<&CommandResponse> {
        self.updates.iter().find_map(|u| match u {
            CommandUpdate::Response(r) => Some(r),
            _ => None,
        })
    }

    /// The phase events kept so far.
    pub fn events(&self) -> impl Iterator<Item = &EdgeCommandEvent> {
        self.updates.iter().filter_map(|u| match u {
            CommandUpdate::Event(e) => Some(e),
            _ => None,
        })
    }
}

#[derive(Debug)]
struct Entry {
    record: CommandRecord,
    wakers: Vec<Waker>,
}

/// Commands by id, oldest forgotten first past the capacity.
#[derive(Debug)]
pub(crate) struct CommandBook {
    entries: HashMap<String, Entry>,
    order: VecDeque<String>,
    capacity: usize,
}

impl CommandBook {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    pub(crate) fn insert(&mut self, edge_id: &str, command_id: &str, operation: &str) {
        while self.order.len() >= self.capacity {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(entry) = self.entries.remove(&old) {
                entry.wakers.into_iter().for_each(Waker::wake);
            }
        }
        self.order.push_back(command_id.to_owned());
        self.entries.insert(
            command_id.to_owned(),
            Entry {
                record: CommandRecord {
                    edge_id: edge_id.to_owned(),
                    command_id: command_id.to_owned(),
                    operation: operation.to_owned(),
                    updates: Vec::new(),
                    outcome: None,
                    dropped_events: 0,
                },
                wakers: Vec::new(),
            },
        );
    }

    /// Records `update` for `command_id` (ignored for a command not in the book);
    /// `outcome` is the core's verdict after it.
    pub(crate) fn push(
        &mut self,
        command_id: &str,
        update: CommandUpdate,
        outcome: Option<CommandOutcome>,
    ) {
        let Some(entry) = self.entries.get_mut(command_id) else {
            return;
        };
        let keep = match &update {
            CommandUpdate::Event(_) => {
                entry.record.updates.len() < MAX_EVENTS_PER_RECORD || outcome.is_some()
            }
            _ => true,
        };
        if keep {
            entry.record.updates.push(update);
        } else {
            entry.record.dropped_events += 1;
        }
        if outcome.is_some() {
            entry.record.outcome = outcome;
        }
        entry.wakers.drain(..).for_each(Waker::wake);
    }

    pub(crate) fn get(&self, command_id: &str) -> Option<&CommandRecord> {
        self.entries.get(command_id).map(|e| &e.record)
    }

    /// Ends every tracker (the server stopped).
    pub(crate) fn wake_all(&mut self) {
        for entry in self.entries.values_mut() {
            entry.wakers.drain(..).for_each(Waker::wake);
        }
    }

    fn poll_update(
        &mut self,
        command_id: &str,
        cursor: &mut usize,
        stopped: bool,
        cx: &mut Context<'_>,
    ) -> Poll<Option<CommandUpdate>> {
        let Some(entry) = self.entries.get_mut(command_id) else {
            return Poll::Ready(None);
        };
        if let Some(update) = entry.record.updates.get(*cursor) {
            *cursor += 1;
            return Poll::Ready(Some(update.clone()));
        }
        if entry.record.outcome.is_some() || stopped {
            return Poll::Ready(None);
        }
        if !entry.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            entry.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Follows one command: yields every [`CommandUpdate`] (the Edge's response, then its
/// phases) and ends after the terminal one, a rejection, [`CommandUpdate::Lost`],
/// [`CommandUpdate::Undeliverable`] or [`CommandUpdate::Forgotten`].
///
/// It also ends if the command falls out of the handle's record book (more than its
/// capacity of newer commands) or the server stops.
pub struct CommandTracker<R: Runtime> {
    shared: Arc<CpShared<R>>,
    edge_id: String,
    command_id: String,
    cursor: usize,
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
