//! When to come back after a burst (PROTOCOL.md §4.1, §7): the `retry_after_ms` of a
//! `GoAway{OVERLOADED}` that a full pending-hello cap sends.
//!
//! After a Control Plane restart every Edge of a fleet dials at once. Past the cap on
//! connections awaiting their hello, each new one is refused `OVERLOADED`; had they
//! all been told `retry_after_overloaded` (10 s), a burst that the Control Plane
//! drains in a second would take ten. Such a refusal instead names a turn: after the
//! hellos not yet checked and after every connection refused before it, one turn
//! apart at half as fast again as hellos were checked lately (the rate the turns let
//! arrive can then grow to what the Control Plane takes; plus up to an eighth, by
//! the connection), and between [`MIN_RETRY_AFTER_BURST`] and
//! `retry_after_overloaded` (in the first moments of a burst, before a rate is
//! measured over at least 32 hellos, the least).
//!
//! The cap holds hellos not yet checked, so the turns follow the checks: a hello
//! that passed them and waits on its ownership claim (a cluster's durable engine)
//! holds no place. Measured by acceptances instead, a storm's first moments — every
//! claim still on its way to the engine, nothing accepted yet — would spread the
//! whole storm's turns at the rate of its slowest start. Should the claims waiting
//! take the engine more than half the hello timeout at the rate it accepts them, the
//! turns follow the acceptances, after every hello not answered: a slow engine is
//! queued for in front of the Control Plane, not inside it until hellos time out. A
//! Control Plane that has accepted nothing for [`STALL`] while connections kept
//! arriving (a cluster engine down, say) keeps the full `retry_after_overloaded`;
//! one whose hellos of a burst are merely slow (each waiting on a durable claim, a
//! batch of them in flight on a replicated engine) is not taken for it.

use std::time::Duration;

use crate::limits::MIN_RETRY_AFTER_BURST;
use crate::time::Instant;

use super::ControlPlane;
use crate::cp::ids::ConnectionId;

/// How long the acceptance rate is measured over.
const WINDOW: Duration = Duration::from_millis(250);
/// Nothing accepted for this long while connections keep arriving is a stall, not a
/// slow burst. Longer than one group commit of claims takes on a three-node engine
/// under a fleet's reconnect storm (a few hundred ms on a busy machine): a stall
/// read into one slow batch sends every connection refused meanwhile away for the
/// full `retry_after_overloaded`, and the storm's tail waits 10 s for nothing.
const STALL: Duration = Duration::from_secs(1);
/// A window shorter than this says too little of the rate.
const MIN_SAMPLE: Duration = Duration::from_millis(20);
/// Nor does one with fewer acceptances: two hellos in the first 150 ms of a burst
/// whose claims are slow to start would read as 13 a second, and name every refused
/// connection the longest wait.
const MIN_COUNT: u64 = 32;

/// Events per second (hellos checked, or sessions accepted), over the last whole
/// window and the current one.
#[derive(Debug, Default)]
struct Rate {
    window_start: Option<Instant>,
    /// The running total when the window started.
    at_start: u64,
    /// The last whole window's rate.
    per_sec: u64,
}

impl Rate {
    /// Moves the window on to `now`; `total` is the running total.
    fn observe(&mut self, now: Instant, total: u64) {
        let Some(start) = self.window_start else {
            self.window_start = Some(now);
            self.at_start = total;
            return;
        };
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= WINDOW {
            let count = total - self.at_start;
            self.per_sec = if count >= MIN_COUNT {
                per_sec(count, elapsed)
            } else {
                0
            };
            self.window_start = Some(now);
            self.at_start = total;
        }
    }

    /// The rate now: the current window's when it says enough, else the last whole
    /// one's; `None` when neither says enough (the start of a burst, or too few
    /// events to measure).
    fn now(&self, now: Instant, total: u64) -> Option<u64> {
        let start = self.window_start?;
        let elapsed = now.saturating_duration_since(start);
        let count = total - self.at_start;
        let last = (self.per_sec > 0).then_some(self.per_sec);
        if elapsed < MIN_SAMPLE || count < MIN_COUNT {
            return last;
        }
        Some(per_sec(count, elapsed).max(self.per_sec))
    }
}

/// How fast hellos were checked and sessions accepted lately, and whether anything
/// moves at all.
#[derive(Debug, Default)]
pub(crate) struct HelloRate {
    /// Hellos that passed their checks (accepted at once, or put to the directory).
    checked: Rate,
    /// Sessions accepted.
    accepted: Rate,
    /// When the next connection refused in a burst is to come back.
    next_slot: Option<Instant>,
    /// The running total of sessions at the last observation.
    accepted_total: u64,
    /// When the last observation was.
    last_seen: Option<Instant>,
    /// The last sign of progress: a session accepted since the observation before, or
    /// the first connection after a quiet window with no hello pending (the start of
    /// a burst).
    progress_at: Option<Instant>,
}

impl HelloRate {
    /// Moves the windows on to `now`; `accepted` is the running total of sessions,
    /// `checked` of hellos that passed their checks, `pending` the hellos not
    /// answered now.
    pub(crate) fn observe(&mut self, now: Instant, accepted: u64, checked: u64, pending: usize) {
        let quiet = pending == 0
            && self
                .last_seen
                .is_none_or(|seen| now.saturating_duration_since(seen) >= WINDOW);
        if accepted > self.accepted_total || quiet {
            self.progress_at = Some(now);
        }
        self.accepted_total = accepted;
        self.last_seen = Some(now);
        self.checked.observe(now, checked);
        self.accepted.observe(now, accepted);
    }

    /// Connections have kept arriving for [`STALL`] and none was accepted.
    fn stalled(&self, now: Instant) -> bool {
        self.progress_at
            .is_some_and(|at| now.saturating_duration_since(at) >= STALL)
    }
}

fn per_sec(count: u64, over: Duration) -> u64 {
    let ms = (over.as_millis() as u64).max(1);
    count.saturating_mul(1000) / ms
}

impl ControlPlane {
    /// Connections whose hello is not checked yet: pending, less those waiting on
    /// their claim. What the pending-hello cap bounds.
    pub(super) fn unchecked_hellos(&self) -> usize {
        self.pending_hellos.saturating_sub(self.claims.len())
    }

    /// The `retry_after` for `conn`, refused because too many hellos are pending (see
    /// the [module docs](self)).
    pub(super) fn burst_retry_after(&mut self, now: Instant, conn: ConnectionId) -> Duration {
        let max = self.config.retry_after_overloaded;
        let least = MIN_RETRY_AFTER_BURST.min(max);
        // Nothing accepted for `STALL` while connections kept coming: whatever
        // holds the hellos (an engine down, say), not a burst.
        if self.hello_rate.stalled(now) {
            return max;
        }
        // The cap holds the hellos not yet checked: a turn comes from how fast hellos
        // are checked (a storm's first moments, while its claims are still on their
        // way to a durable engine, accept nothing yet check thousands), after those
        // unchecked now. Unless the claims waiting already take the engine more than
        // half the hello timeout at the rate it accepts them: then the turn comes from
        // the acceptances, after every hello not answered.
        let claiming = self.claims.len() as u64;
        let accepted = self
            .hello_rate
            .accepted
            .now(now, self.stats.sessions_accepted);
        let backlog = accepted.is_some_and(|r| {
            r > 0
                && Duration::from_micros(claiming.saturating_mul(1_000_000) / r)
                    > self.config.hello_timeout / 2
        });
        let (measured, ahead) = if backlog {
            (accepted, self.pending_hellos as u64)
        } else {
            let checked = self.hello_rate.checked.now(now, self.hellos_checked);
            (checked.max(accepted), self.unchecked_hellos() as u64)
        };
        let slot = match measured {
            Some(measured) if measured > 0 => {
                // Turns at half as fast again as measured: what a storm's turns let
                // arrive bounds the rate measured next, so turns at the measured rate
                // would hold the drain to the rate of its first moments however fast
                // the Control Plane could go; a little faster lets it grow each window.
                let rate = measured + measured / 2;
                // After the hellos ahead now, and after every connection refused
                // before this one, each one turn apart.
                let drain = Duration::from_micros(ahead.saturating_mul(1_000_000) / rate);
                let earliest = now + drain.max(least);
                let slot = self
                    .hello_rate
                    .next_slot
                    .filter(|s| *s > earliest)
                    .unwrap_or(earliest);
                self.hello_rate.next_slot = Some(slot + Duration::from_micros(1_000_000 / rate));
                slot
            }
            // The first moments of a burst, or too few acceptances to measure.
            _ => now + least,
        };
        let wait = slot.saturating_duration_since(now);
        // Up to an eighth more, from the connection id (and the process's command-id
        // epoch, so that two Control Planes spread differently).
        let spread = crate::rng::mix(conn.0 ^ self.config.command_id_epoch) >> 54; // 0..1024
        (wait + wait * spread as u32 / 8192).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_comes_from_the_current_window_or_the_last_whole_one() {
        let mut r = Rate::default();
        let t0 = Instant::from_millis(1_000);
        r.observe(t0, 0);
        assert_eq!(r.now(t0, 0), None, "nothing measured yet");
        assert_eq!(r.now(t0 + Duration::from_millis(100), 500), Some(5_000));
        r.observe(t0 + Duration::from_millis(1_000), 2_000);
        assert_eq!(r.per_sec, 2_000);
        // A new window too young to say falls back to the last whole one.
        assert_eq!(r.now(t0 + Duration::from_millis(1_005), 2_000), Some(2_000));
        // A window with too few events says nothing of the rate.
        r.observe(t0 + Duration::from_millis(5_000), 2_010);
        assert_eq!(r.per_sec, 0);
        assert_eq!(r.now(t0 + Duration::from_millis(5_100), 2_020), None);
        assert_eq!(r.now(t0 + Duration::from_millis(5_100), 2_050), Some(400));
    }

    #[test]
    fn a_burst_whose_first_hellos_are_slow_is_not_taken_for_a_stall() {
        let mut r = HelloRate::default();
        let t0 = Instant::from_millis(1_000);
        let ms = |n| t0 + Duration::from_millis(n);
        // A burst begins after a quiet time; its first hellos wait on their claims for
        // 100 ms: a rate of 0, but not a stall.
        r.observe(t0, 0, 0, 0);
        for n in 1..=100 {
            r.observe(ms(n), 0, 0, n as usize);
        }
        assert_eq!(r.accepted.now(ms(100), 0), None, "no rate yet");
        assert!(!r.stalled(ms(100)));
        // Nothing for 400 ms (a slow batch of claims on a replicated engine): still
        // a burst, not a stall.
        for n in 101..=400 {
            r.observe(ms(n), 0, 0, n as usize);
        }
        assert!(!r.stalled(ms(400)));
        // Still nothing after a second of arrivals: stalled (the engine is down).
        for n in 401..=1_000 {
            r.observe(ms(n), 0, 0, n as usize);
        }
        assert!(r.stalled(ms(1_000)));
        // One accepted: progress again.
        r.observe(ms(1_001), 1, 1, 999);
        assert!(!r.stalled(ms(1_400)));
        // Quiet for a second with hellos still pending: still stalled.
        r.observe(ms(2_100), 1, 1, 999);
        assert!(r.stalled(ms(2_150)));
        // A quiet window with nothing pending, then a new connection: a new burst.
        r.observe(ms(3_500), 1, 1, 0);
        assert!(!r.stalled(ms(3_600)));
    }
}
