//! Draining and shutdown (PROTOCOL.md §4.7): new commands refused `DRAINING` and the
//! Control Plane told `EDGE_DRAINING`; at shutdown running commands CANCELLED,
//! `GoAway{SHUTDOWN}`, and no redial.

use iop_proto::{GoAwayReason, NodeEventKind};

use super::event::CloseReason;
use super::link::{Conn, Edge};
use super::registry_seam::EdgeRegistry;
use crate::Instant;

impl<R: EdgeRegistry> Edge<R> {
    /// Starts draining: new commands are rejected DRAINING and the CP is told
    /// `EDGE_DRAINING` (now if connected, else after `EDGE_READY` of the next session).
    /// Running commands go on. Idempotent.
    pub fn drain(&mut self, now: Instant) {
        if self.draining {
            return;
        }
        self.pump_registry();
        self.draining = true;
        if self.is_connected() {
            self.send_edge_event(now, NodeEventKind::EdgeDraining, "edge is draining");
        }
    }

    /// Shuts the Edge down for good: running commands are CANCELLED, the CP gets
    /// `GoAway{SHUTDOWN}`, and the driver is asked to close (no reconnect). Idempotent.
    pub fn shutdown(&mut self, now: Instant) {
        if self.shut_down {
            return;
        }
        self.pump_registry();
        self.draining = true;
        let unix_ms = self.config.wall_clock.unix_ms(now);
        for event in self.commands.cancel_all(now, unix_ms) {
            self.send_command_event(now, event);
        }
        self.shut_down = true;
        match self.conn {
            Conn::AwaitingHello | Conn::Active(_) => self.close(
                now,
                CloseReason::Shutdown,
                Some((GoAwayReason::Shutdown, "edge shutting down")),
            ),
            _ => self.shut_down_now(),
        }
    }

    /// True once [`shutdown`](Self::shutdown) was called (the transport may still be
    /// closing).
    pub fn shutdown_requested(&self) -> bool {
        self.shut_down
    }

    /// True once shut down and the transport is gone: the driver can stop.
    pub fn is_shut_down(&self) -> bool {
        matches!(self.conn, Conn::ShutDown)
    }

    /// Marks the Edge shut down when no transport is up.
    pub(crate) fn shut_down_now(&mut self) {
        self.shut_down = true;
        match self.conn {
            Conn::Disconnected { .. } => self.conn = Conn::ShutDown,
            Conn::Closing { .. } => self.conn = Conn::Closing { reconnect_at: None },
            _ => {}
        }
    }
}
