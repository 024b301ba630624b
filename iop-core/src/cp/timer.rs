//! The small timer table of one connection, indexed by an enum.

use crate::time::Instant;

/// The timers of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The hello must arrive before this.
    Hello = 0,
    /// Silence past this makes the Edge unreachable.
    Unreachable = 1,
    /// Silence past this ends the session.
    Liveness = 2,
    /// The oldest pending status request times out.
    Status = 3,
}

/// One optional deadline per [`Timer`].
#[derive(Debug, Clone, Default)]
pub(crate) struct TimerTable {
    deadlines: [Option<Instant>; 4],
}

impl TimerTable {
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        if let Some(slot) = self.deadlines.get_mut(timer as usize) {
            *slot = Some(at);
        }
    }

    pub(crate) fn set_opt(&mut self, timer: Timer, at: Option<Instant>) {
        if let Some(slot) = self.deadlines.get_mut(timer as usize) {
            *slot = at;
        }
    }

    pub(crate) fn stop(&mut self, timer: Timer) {
        self.set_opt(timer, None);
    }

    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.deadlines.get(timer as usize).copied().flatten()
    }

    pub(crate) fn is_expired(&self, timer: Timer, now: Instant) -> bool {
        self.get(timer).is_some_and(|at| at <= now)
    }

    /// Stops every timer due at `now` (after they were handled).
    pub(crate) fn stop_expired(&mut self, now: Instant) {
        for slot in &mut self.deadlines {
            if slot.is_some_and(|at| at <= now) {
                *slot = None;
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        self.deadlines = [None; 4];
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }
}
