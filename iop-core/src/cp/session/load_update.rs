//! Load updates of one session (PROTOCOL.md §4.8): allowed when the hello negotiated
//! them and once the session's first full status answer came; at most a burst of 4,
//! refilled one per interval; each provider once. A gap in the sequence, or `resync`,
//! makes the control plane ask for status — not an error.
//!
//! # Where the rate is measured
//!
//! At the source. Each update carries the time the Edge read its numbers
//! (`observed_at_unix_ms`); the intake maps it onto this Control Plane's clock and
//! counts the burst there. The map is anchored at the session's first full status
//! answer: the Edge's time on it (its `observed_at_unix_ms`) is taken as the time this
//! Control Plane asked for it — the earliest it can have been read, so a stall that
//! delivers the answer and the updates after it together still spaces the updates
//! as the Edge sent them. Measured on arrival, a
//! TCP stall or a Control Plane paused for a second would deliver a correct Edge's
//! updates together and close its session. So that a peer cannot claim its updates
//! were spread out when they were not, the mapped time never runs ahead of this
//! clock (a flood is then measured on arrival), never goes back (a clock that steps
//! back counts its updates as sent together), and never lies further back than the
//! session's liveness window (bytes held longer would have ended the session): past
//! `LIVENESS_INTERVALS` heartbeat intervals of silence, an Edge cannot bank updates.

use std::time::Duration;

use iop_proto::EdgeLoadUpdate;
use iop_proto::limits::LOAD_UPDATE_BURST;

use crate::cp::ProtocolViolation;
use crate::time::Instant;

use super::event::FromSession;
use super::{Established, protocol_error};

/// The load updates a session negotiated.
#[derive(Debug, Clone)]
pub(crate) struct LoadIntake {
    interval_ms: u64,
    /// How far back of now an update's mapped time may lie.
    window_ms: u64,
    /// The session's first full status answer came.
    based: bool,
    last_sequence: u64,
    /// When the session's first full status request went out (this clock's ms).
    asked_at: Option<u64>,
    /// This clock's milliseconds minus the Edge's, from the first full status answer
    /// on (from the first update when none was timed).
    skew: Option<i64>,
    /// The mapped time of the last update.
    last_at: u64,
    /// When the burst is whole again (the theoretical arrival time of the generic cell
    /// rate algorithm), in this clock's milliseconds.
    tat: u64,
}

/// What an update in sequence came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sequence {
    /// The next one.
    Next,
    /// Updates were lost (or came out of order): the view needs a fresh status.
    Gap { expected: u64, got: u64 },
}

impl LoadIntake {
    /// The intake of a session that asked for updates every `interval`, whose
    /// liveness window is `window`.
    pub(crate) fn new(interval: Duration, window: Duration) -> Self {
        Self {
            interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            window_ms: u64::try_from(window.as_millis()).unwrap_or(u64::MAX),
            based: false,
            last_sequence: 0,
            asked_at: None,
            skew: None,
            last_at: 0,
            tat: 0,
        }
    }

    /// A full status request went out at `now`: the first one is the earliest time
    /// the Edge can read the numbers of its base answer.
    pub(crate) fn asked(&mut self, now: Instant) {
        if !self.based && self.asked_at.is_none() {
            self.asked_at = Some(now.as_millis());
        }
    }

    /// The session's first full status answer (its last page) came, read by the Edge
    /// at `observed_at_unix_ms`: updates may follow, their times mapped from there.
    pub(crate) fn based(&mut self, observed_at_unix_ms: u64) {
        self.based = true;
        if self.skew.is_none()
            && let Some(asked) = self.asked_at
        {
            let asked = i64::try_from(asked).unwrap_or(i64::MAX);
            let observed = i64::try_from(observed_at_unix_ms).unwrap_or(i64::MAX);
            self.skew = Some(asked.saturating_sub(observed));
        }
    }

    /// Whether the Edge may push now.
    pub(crate) fn is_based(&self) -> bool {
        self.based
    }

    /// Counts one update the Edge read at `observed_at_unix_ms` against the burst, at
    /// `now`; false past it.
    pub(crate) fn admit(&mut self, now: Instant, observed_at_unix_ms: u64) -> bool {
        let now_ms = i64::try_from(now.as_millis()).unwrap_or(i64::MAX);
        let observed = i64::try_from(observed_at_unix_ms).unwrap_or(i64::MAX);
        let skew = *self.skew.get_or_insert(now_ms.saturating_sub(observed));
        let floor = i64::try_from(self.last_at).unwrap_or(i64::MAX);
        let oldest = now_ms.saturating_sub(i64::try_from(self.window_ms).unwrap_or(i64::MAX));
        let at = observed
            .saturating_add(skew)
            .max(floor)
            .min(now_ms)
            .max(oldest)
            .max(0);
        // Measured from here on: a clock that stepped is followed from where it is.
        self.skew = Some(at.saturating_sub(observed));
        let at = u64::try_from(at).unwrap_or(0);
        self.last_at = at;
        let tat = self.tat.max(at);
        let tolerance = self
            .interval_ms
            .saturating_mul(u64::from(LOAD_UPDATE_BURST - 1));
        if tat - at > tolerance {
            return false;
        }
        self.tat = tat.saturating_add(self.interval_ms);
        true
    }

    /// Takes `sequence` as the latest.
    pub(crate) fn sequence(&mut self, sequence: u64) -> Sequence {
        let expected = self.last_sequence.saturating_add(1);
        self.last_sequence = sequence;
        if sequence == expected {
            Sequence::Next
        } else {
            Sequence::Gap {
                expected,
                got: sequence,
            }
        }
    }
}

/// Checks `update` against what `session` negotiated, at `now`: the protocol errors
/// of PROTOCOL.md §4.8, then its sequence. What passes goes up to the control plane,
/// which applies it to the Edge's view.
pub(super) fn check(
    session: &mut Established,
    now: Instant,
    update: EdgeLoadUpdate,
) -> FromSession {
    let Some(intake) = session.load.as_deref_mut() else {
        return protocol_error(ProtocolViolation::LoadUpdateNotNegotiated);
    };
    if !intake.is_based() {
        return protocol_error(ProtocolViolation::LoadUpdateBeforeStatus);
    }
    if !intake.admit(now, update.observed_at_unix_ms) {
        return protocol_error(ProtocolViolation::LoadUpdateRate);
    }
    if let Some((node_id, provider_id)) = duplicate(&update) {
        return protocol_error(ProtocolViolation::LoadUpdateDuplicateProvider {
            node_id,
            provider_id,
        });
    }
    let sequence = intake.sequence(update.sequence);
    FromSession::LoadUpdate {
        update: Box::new(update),
        sequence,
    }
}

/// A (node, provider) the update names twice, if any.
fn duplicate(update: &EdgeLoadUpdate) -> Option<(String, String)> {
    let mut keys: Vec<(&str, &str)> = update
        .providers
        .iter()
        .map(|p| (p.node_id.as_str(), p.provider_id.as_str()))
        .collect();
    keys.sort_unstable();
    keys.windows(2).find_map(|w| match w {
        [a, b] if a == b => Some((a.0.to_owned(), a.1.to_owned())),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn intake() -> LoadIntake {
        LoadIntake::new(Duration::from_millis(250), Duration::from_secs(15))
    }

    #[test]
    fn a_burst_of_four_then_one_per_interval() {
        let mut i = intake();
        for _ in 0..4 {
            assert!(i.admit(at(1_000), 5_000));
        }
        assert!(!i.admit(at(1_000), 5_000));
        let mut i = intake();
        // One per interval, forever.
        for n in 0..1_000 {
            assert!(i.admit(at(1_000 + n * 250), 5_000 + n * 250), "{n}");
        }
        // Faster than one per interval runs out after the burst.
        let mut i = intake();
        let admitted = (0..100)
            .take_while(|n| i.admit(at(1_000 + n * 200), 5_000 + n * 200))
            .count();
        assert_eq!(admitted, 16);
    }

    #[test]
    fn updates_held_back_on_the_way_are_measured_when_they_were_sent() {
        let mut i = intake();
        assert!(i.admit(at(1_000), 5_000));
        // A two-second stall: eight updates sent 250 ms apart arrive together.
        for n in 1..=8 {
            assert!(i.admit(at(3_100), 5_000 + n * 250), "{n}");
        }
        // A paused Control Plane reads 40 of them at once, 10 s late: fine too.
        for n in 9..=48 {
            assert!(i.admit(at(13_100), 5_000 + n * 250), "{n}");
        }
    }

    #[test]
    fn a_stall_that_holds_back_the_base_answer_too_spaces_the_updates_behind_it() {
        let mut i = intake();
        i.asked(at(1_000));
        // The answer, read at the Edge's 5 000, and ten updates sent 250 ms apart
        // after it, all arrive together at 4 000 after a three-second stall.
        i.based(5_000);
        for n in 1..=10 {
            assert!(i.admit(at(4_000), 5_000 + n * 250), "{n}");
        }
        // Without a base answer timed, the first update anchors the map, and a
        // stall before it cannot be told from a flood.
        let mut i = intake();
        i.based(5_000);
        let admitted = (1..=10)
            .take_while(|n| i.admit(at(4_000), 5_000 + n * 250))
            .count();
        assert_eq!(admitted, 4);
    }

    #[test]
    fn a_peer_cannot_claim_its_flood_was_spread_out() {
        // Times running ahead of this clock are measured on arrival.
        let mut i = intake();
        let admitted = (0..100)
            .take_while(|n| i.admit(at(1_000), 5_000 + n * 250))
            .count();
        assert_eq!(admitted, 4);
        // Nor can it bank more than the liveness window of silence: an hour later,
        // times spread over that hour count from 15 s ago at most — as many as a
        // stall of 15 s delivers.
        let mut i = intake();
        assert!(i.admit(at(1_000), 5_000));
        let now = at(3_601_000);
        let admitted = (0..1_000)
            .take_while(|n| i.admit(now, 5_000 + (n + 1) * 250))
            .count();
        assert_eq!(admitted, 15_000 / 250 + 4);
        let mut i = intake();
        assert!(i.admit(at(1_000), 5_000));
        let admitted = (0..1_000)
            .take_while(|n| i.admit(now, 3_590_000 + n * 250))
            .count();
        assert_eq!(admitted, 15_000 / 250 + 4);
        // A clock that steps back counts its updates as sent together.
        let mut i = intake();
        assert!(i.admit(at(1_000), 5_000));
        let admitted = (0..10).take_while(|_| i.admit(at(1_010), 1_000)).count();
        assert_eq!(admitted, 3);
    }

    #[test]
    fn the_sequence_says_next_or_gap() {
        let mut i = intake();
        assert_eq!(i.sequence(1), Sequence::Next);
        assert_eq!(i.sequence(2), Sequence::Next);
        assert_eq!(
            i.sequence(5),
            Sequence::Gap {
                expected: 3,
                got: 5
            }
        );
        assert_eq!(i.sequence(6), Sequence::Next);
        assert_eq!(
            i.sequence(6),
            Sequence::Gap {
                expected: 7,
                got: 6
            }
        );
    }
}
