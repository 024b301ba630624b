//! The small timer table of both ends: one optional deadline per timer of an enum.

use crate::time::Instant;

/// A fieldless enum naming the timers of one table: `slot` is its index, below `N`.
pub(crate) trait TimerSlot: Copy {
    /// The timer's index in its table.
    fn slot(self) -> usize;
}

/// One optional deadline per timer `T`, `N` of them.
#[derive(Debug, Clone)]
pub(crate) struct TimerTable<T, const N: usize> {
    deadlines: [Option<Instant>; N],
    names: std::marker::PhantomData<T>,
}

impl<T, const N: usize> Default for TimerTable<T, N> {
    fn default() -> Self {
        Self {
            deadlines: [None; N],
            names: std::marker::PhantomData,
        }
    }
}

impl<T: TimerSlot, const N: usize> TimerTable<T, N> {
    /// Arms `timer` at `at`.
    pub(crate) fn set(&mut self, timer: T, at: Instant) {
        self.set_opt(timer, Some(at));
    }

    /// Arms `timer` at `at`, or stops it with `None`.
    pub(crate) fn set_opt(&mut self, timer: T, at: Option<Instant>) {
        if let Some(slot) = self.deadlines.get_mut(timer.slot()) {
            *slot = at;
        }
    }

    /// Stops `timer`.
    pub(crate) fn stop(&mut self, timer: T) {
        self.set_opt(timer, None);
    }

    /// The deadline of `timer`.
    pub(crate) fn get(&self, timer: T) -> Option<Instant> {
        self.deadlines.get(timer.slot()).copied().flatten()
    }

    /// `timer` is armed and due at `now`.
    pub(crate) fn is_expired(&self, timer: T, now: Instant) -> bool {
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

    /// Stops every timer.
    pub(crate) fn clear(&mut self) {
        self.deadlines = [None; N];
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy)]
    enum T {
        A,
        B,
    }

    impl TimerSlot for T {
        fn slot(self) -> usize {
            self as usize
        }
    }

    #[test]
    fn the_earliest_armed_deadline_is_next_and_due_ones_stop() {
        let mut t = TimerTable::<T, 2>::default();
        assert_eq!(t.next(), None);
        t.set(T::A, Instant::from_millis(20));
        t.set(T::B, Instant::from_millis(10));
        assert_eq!(t.next(), Some(Instant::from_millis(10)));
        assert!(t.is_expired(T::B, Instant::from_millis(10)));
        assert!(!t.is_expired(T::A, Instant::from_millis(10)));
        t.stop_expired(Instant::from_millis(10));
        assert_eq!(t.get(T::B), None);
        assert_eq!(t.next(), Some(Instant::from_millis(20)));
        t.clear();
        assert_eq!(t.next(), None);
    }
}
