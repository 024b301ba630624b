//! Lifecycle events: what the registry queues, and the per-session sequencer that turns
//! them into wire `EdgeNodeEvent`s.

use std::collections::VecDeque;

use crate::proto::{EdgeNodeEvent, NodeEventKind};

use super::connection::Generation;

/// Default bound of the registry's event queue.
pub const DEFAULT_EVENT_CAPACITY: usize = 4_096;
/// Longest event reason kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_REASON_LEN: usize = crate::limits::MAX_TEXT_LEN;

/// A node lifecycle transition, queued only after it has happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RegistryEventKind {
    /// A node was added or its configuration changed.
    Configured,
    /// A node was removed from the configuration.
    Removed,
    /// The current owner went PENDING → READY.
    Ready,
    /// The current owner left READY.
    Disconnected,
}

impl RegistryEventKind {
    /// The wire enum value.
    pub fn to_wire(self) -> NodeEventKind {
        match self {
            Self::Configured => NodeEventKind::NodeConfigured,
            Self::Removed => NodeEventKind::NodeRemoved,
            Self::Ready => NodeEventKind::NodeReady,
            Self::Disconnected => NodeEventKind::NodeDisconnected,
        }
    }
}

/// One node lifecycle event, as queued by the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryEvent {
    /// The node.
    pub node_id: String,
    /// What happened.
    pub kind: RegistryEventKind,
    /// The node's owner generation after the transition (for `Removed`: its last).
    pub generation: Generation,
    /// When it happened (wall-clock Unix ms, as given by the caller).
    pub occurred_at_unix_ms: u64,
    /// Why, for humans. Never holds endpoint details.
    pub reason: String,
}

/// An Edge-level lifecycle event (node id empty on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EdgeEventKind {
    /// The Edge's session is accepted; first event of every session (PROTOCOL.md §4.5).
    Ready,
    /// The Edge is draining.
    Draining,
}

impl EdgeEventKind {
    /// The wire enum value.
    pub fn to_wire(self) -> NodeEventKind {
        match self {
            Self::Ready => NodeEventKind::EdgeReady,
            Self::Draining => NodeEventKind::EdgeDraining,
        }
    }
}

/// Numbers events within one Edge session: 1, 2, 3 …
///
/// Call [`restart`](Self::restart) when a new session is accepted, then stamp
/// `EDGE_READY` with [`edge_event`](Self::edge_event) before anything else. When an event
/// must be dropped (full outbound queue), call [`skip`](Self::skip) so its number is
/// consumed and the CP sees a gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSequencer {
    next: u64,
}

impl Default for EventSequencer {
    fn default() -> Self {
        Self::new()
    }
}

impl EventSequencer {
    /// A sequencer whose next number is 1.
    pub fn new() -> Self {
        Self { next: 1 }
    }

    /// Starts numbering again from 1 (a new session).
    pub fn restart(&mut self) {
        self.next = 1;
    }

    /// The number the next event will get.
    pub fn peek(&self) -> u64 {
        self.next
    }

    /// Consumes one number without producing an event (the event is dropped); returns
    /// the number consumed.
    pub fn skip(&mut self) -> u64 {
        let n = self.next;
        self.next = self.next.saturating_add(1);
        n
    }

    /// Stamps a registry event for the wire.
    pub fn next(&mut self, edge_id: &str, event: &RegistryEvent) -> EdgeNodeEvent {
        EdgeNodeEvent {
            edge_id: edge_id.to_owned(),
            node_id: event.node_id.clone(),
            kind: event.kind.to_wire() as i32,
            generation: event.generation.get(),
            sequence: self.skip(),
            occurred_at_unix_ms: event.occurred_at_unix_ms,
            reason: event.reason.clone(),
        }
    }

    /// Stamps an Edge-level event (node id empty, generation 0).
    pub fn edge_event(
        &mut self,
        edge_id: &str,
        kind: EdgeEventKind,
        occurred_at_unix_ms: u64,
        reason: &str,
    ) -> EdgeNodeEvent {
        EdgeNodeEvent {
            edge_id: edge_id.to_owned(),
            node_id: String::new(),
            kind: kind.to_wire() as i32,
            generation: 0,
            sequence: self.skip(),
            occurred_at_unix_ms,
            reason: truncate(reason).to_owned(),
        }
    }
}

/// Cuts `s` to at most [`MAX_REASON_LEN`] bytes at a character boundary.
pub(crate) fn truncate(s: &str) -> &str {
    if s.len() <= MAX_REASON_LEN {
        return s;
    }
    let mut end = MAX_REASON_LEN;
    while !s.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    s.get(..end).unwrap_or_default()
}

/// A bounded FIFO that counts what it had to drop.
#[derive(Debug, Clone)]
pub(crate) struct EventQueue {
    events: VecDeque<RegistryEvent>,
    capacity: usize,
    dropped: u64,
}

impl EventQueue {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            events: VecDeque::new(),
            capacity,
            dropped: 0,
        }
    }

    pub(crate) fn push(&mut self, event: RegistryEvent) {
        if self.events.len() >= self.capacity {
            self.dropped = self.dropped.saturating_add(1);
        } else {
            self.events.push_back(event);
        }
    }

    pub(crate) fn pop(&mut self) -> Option<RegistryEvent> {
        self.events.pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    pub(crate) fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }
}
