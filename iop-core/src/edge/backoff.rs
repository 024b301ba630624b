//! Reconnect delays: exponential backoff with full jitter (PROTOCOL.md §4.2, §7).

use std::time::Duration;

use crate::Instant;
use crate::rng::SplitMix64;

/// Full-jitter exponential backoff: the `n`-th consecutive failure waits a delay
/// uniform in `[0, min(max, base × 2ⁿ)]`, never ending before a `retry_after` the
/// peer asked for.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
    rng: SplitMix64,
}

impl Backoff {
    pub(crate) fn new(base: Duration, max: Duration, rng: SplitMix64) -> Self {
        Self {
            base,
            max,
            attempt: 0,
            rng,
        }
    }

    /// The cap of the current attempt: `min(max, base × 2^attempt)`.
    pub(crate) fn current_cap(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// Forgets past failures (after a healthy session).
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }

    /// When to dial next after a failure at `now`, given that the peer forbade any
    /// attempt before `not_before`. Counts the failure.
    pub(crate) fn next_attempt(&mut self, now: Instant, not_before: Option<Instant>) -> Instant {
        let cap = self.current_cap();
        let cap_ms = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX);
        let delay = Duration::from_millis(self.rng.uniform_inclusive(cap_ms));
        self.attempt = self.attempt.saturating_add(1);
        let at = now + delay;
        match not_before {
            Some(nb) if nb > at => nb,
            _ => at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_double_up_to_the_maximum() {
        let mut b = Backoff::new(
            Duration::from_millis(250),
            Duration::from_secs(30),
            SplitMix64::new(1),
        );
        let mut caps = Vec::new();
        for _ in 0..10 {
            caps.push(b.current_cap().as_millis());
            b.next_attempt(Instant::ZERO, None);
        }
        assert_eq!(
            caps,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        b.reset();
        assert_eq!(b.current_cap(), Duration::from_millis(250));
    }
}
