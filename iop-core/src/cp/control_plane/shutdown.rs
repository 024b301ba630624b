//! Draining and shutdown (PROTOCOL.md §4.7): a draining Control Plane refuses new
//! hellos `DRAINING` with `retry_after_ms` while live sessions go on; shutdown sends
//! every connection `GoAway{SHUTDOWN}` and refuses later ones the same way.

use crate::cp::CloseReason;
use crate::cp::ids::ConnectionId;
use crate::time::Instant;

use super::ControlPlane;

impl ControlPlane {
    /// Starts draining: new hellos are refused `DRAINING` with `retry_after_ms`;
    /// live sessions go on.
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// True once [`drain`](Self::drain) or [`shutdown`](Self::shutdown) was called.
    pub fn is_draining(&self) -> bool {
        self.draining
    }

    /// Sends `GoAway{SHUTDOWN}` to every connection and closes it; later connections
    /// are refused the same way.
    pub fn shutdown(&mut self, now: Instant) {
        self.draining = true;
        self.shut_down = true;
        let mut open: Vec<ConnectionId> = self
            .conns
            .iter()
            .filter(|(_, s)| s.is_open())
            .map(|(id, _)| *id)
            .collect();
        // In id order, whatever the table's.
        open.sort_unstable();
        for conn in open {
            self.close(now, conn, CloseReason::Shutdown);
        }
    }
}
