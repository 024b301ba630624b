//! What the drivers log of the cores' events: the ones an operator acts on at `info`
//! or `warn`, the rest at `trace` (a connection's close at `debug`).

use iop_core::cp::CpEvent;
use iop_core::edge::EdgeEvent;

/// An event the drivers log.
pub(crate) trait Log {
    /// Logs it at the level its kind calls for.
    fn log(&self);
}

impl Log for CpEvent {
    fn log(&self) {
        match self {
            CpEvent::SessionAccepted {
                conn,
                edge_id,
                session_id,
                ..
            } => tracing::info!(conn = conn.0, edge_id, session_id, "edge session accepted"),
            CpEvent::EdgeDisconnected {
                edge_id,
                session_id,
                reason,
            } => tracing::info!(edge_id, session_id, ?reason, "edge disconnected"),
            CpEvent::EdgeUnreachable {
                edge_id,
                silent_for,
                ..
            } => tracing::warn!(edge_id, ?silent_for, "edge unreachable"),
            CpEvent::EdgeSuperseded {
                edge_id, flapping, ..
            } => tracing::info!(edge_id, flapping, "edge session superseded"),
            CpEvent::Closed { conn, reason, .. } => {
                tracing::debug!(conn = conn.0, ?reason, "connection closed")
            }
            CpEvent::CommandEnded {
                edge_id,
                command_id,
                ending,
            } => tracing::warn!(edge_id, command_id, ending = ending.code(), "{ending}"),
            CpEvent::EdgeForgotten {
                edge_id, reason, ..
            } => tracing::info!(edge_id, ?reason, "edge view forgotten"),
            other => tracing::trace!(event = ?other, "control plane event"),
        }
    }
}

impl Log for EdgeEvent {
    fn log(&self) {
        match self {
            EdgeEvent::Connected { session_id, .. } => {
                tracing::info!(session_id, "connected to control plane")
            }
            EdgeEvent::HelloRejected {
                reason, message, ..
            } => tracing::warn!(?reason, message, "hello rejected"),
            EdgeEvent::Superseded { message, .. } => tracing::warn!(message, "session superseded"),
            EdgeEvent::Closed {
                reason,
                reconnect_at,
            } => tracing::info!(?reason, ?reconnect_at, "session closed"),
            EdgeEvent::CommandReceived {
                command_id,
                operation,
                ..
            } => tracing::debug!(command_id, operation, "command received"),
            other => tracing::trace!(event = ?other, "edge event"),
        }
    }
}
