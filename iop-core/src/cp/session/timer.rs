//! The timers of one connection, and what each does when it comes due.

use crate::cp::CloseReason;
use crate::time::Instant;
use crate::timer::{TimerSlot, TimerTable};

use super::Session;
use super::event::Expired;

/// The timers of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// The hello must arrive (and its claim be answered) before this.
    Hello = 0,
    /// Silence past this makes the Edge unreachable.
    Unreachable = 1,
    /// Silence past this ends the session.
    Liveness = 2,
    /// The oldest pending status request times out.
    Status = 3,
    /// The control plane's own refresh of the Edge's view is due.
    Refresh = 4,
}

impl TimerSlot for Timer {
    fn slot(self) -> usize {
        self as usize
    }
}

/// One optional deadline per [`Timer`].
pub(super) type Timers = TimerTable<Timer, 5>;

impl Session {
    /// Applies every timer due at `now` and stops them: what the control plane must
    /// do about it is returned.
    pub(crate) fn expire(&mut self, now: Instant) -> Expired {
        let mut expired = Expired::default();
        if self.timers.is_expired(Timer::Hello, now) {
            expired.end = Some(CloseReason::HelloTimeout);
        } else {
            if self.timers.is_expired(Timer::Status, now) {
                expired.status = self.expire_status(now);
            }
            expired.refresh = self.timers.is_expired(Timer::Refresh, now);
            if self.timers.is_expired(Timer::Liveness, now) {
                expired.end = Some(CloseReason::HeartbeatTimeout);
            } else if self.timers.is_expired(Timer::Unreachable, now) {
                expired.unreachable = self.went_silent();
            }
        }
        // Every due timer was handled (or re-armed); stopping any left makes sure the
        // control plane's timer loop always ends.
        self.timers.stop_expired(now);
        expired
    }
}
