//! The Edge's lifecycle events (PROTOCOL.md §4.5): `EDGE_READY` first in every
//! session, then the registry's transitions as they happen (dropped while
//! disconnected: the next status carries them), each with the next sequence number.

use iop_proto::limits::send;
use iop_proto::{EdgeNodeEvent, Envelope, NodeEventKind};

use super::link::{Conn, Edge};
use super::registry_seam::{EdgeRegistry, LifecycleEvent};
use crate::Instant;

impl<R: EdgeRegistry> Edge<R> {
    /// Stamps and queues a node event (sequence consumed even when dropped).
    pub(crate) fn send_node_event(&mut self, event: LifecycleEvent) {
        let Conn::Active(mut session) = self.conn else {
            self.stats.dropped_node_events += 1;
            return;
        };
        session.node_event_seq += 1;
        self.conn = Conn::Active(session);
        let mut reason = event.reason;
        send::truncate_text(&mut reason, iop_proto::limits::MAX_TEXT_LEN);
        let wire = EdgeNodeEvent {
            edge_id: self.config.edge_id.clone(),
            node_id: event.node_id,
            kind: event.kind as i32,
            generation: event.generation,
            sequence: session.node_event_seq,
            occurred_at_unix_ms: event.occurred_at_unix_ms,
            reason,
        };
        // A node id over the id cap (from a custom registry) would end the session: the
        // event is dropped instead, its sequence consumed, so the CP resyncs (§4.5).
        if send::node_event(&wire).is_err() || self.outbound.push(&Envelope::new(wire)).is_err() {
            self.stats.dropped_node_events += 1;
        }
    }

    /// An edge-level node event (`EDGE_READY`, `EDGE_DRAINING`).
    pub(crate) fn send_edge_event(&mut self, now: Instant, kind: NodeEventKind, reason: &str) {
        self.send_node_event(LifecycleEvent {
            node_id: String::new(),
            kind,
            generation: 0,
            occurred_at_unix_ms: self.config.wall_clock.unix_ms(now),
            reason: reason.to_owned(),
        });
    }

    /// Relays (or, with no session, drops) the registry's pending lifecycle events.
    pub(crate) fn pump_registry(&mut self) {
        while let Some(event) = self.registry.poll_lifecycle_event() {
            self.send_node_event(event);
        }
        let lost = self.registry.take_dropped_events();
        self.stats.dropped_node_events = self.stats.dropped_node_events.saturating_add(lost);
        if let Conn::Active(mut session) = self.conn {
            session.node_event_seq = session.node_event_seq.saturating_add(lost);
            self.conn = Conn::Active(session);
        }
    }
}

/// [`Edge::registry_mut`]'s guard: the registry, mutably; on drop, its lifecycle events
/// become the Edge's node events.
#[derive(Debug)]
pub struct RegistryMut<'a, R: EdgeRegistry> {
    pub(super) edge: &'a mut Edge<R>,
}

impl<R: EdgeRegistry> std::ops::Deref for RegistryMut<'_, R> {
    type Target = R;
    fn deref(&self) -> &R {
        &self.edge.registry
    }
}

impl<R: EdgeRegistry> std::ops::DerefMut for RegistryMut<'_, R> {
    fn deref_mut(&mut self) -> &mut R {
        &mut self.edge.registry
    }
}

impl<R: EdgeRegistry> Drop for RegistryMut<'_, R> {
    fn drop(&mut self) {
        self.edge.pump_registry();
    }
}
