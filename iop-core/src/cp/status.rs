//! Status requests of one session (SPEC §4.3): correlation ids and deadlines.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::time::Instant;

/// How a status response's correlation id relates to what this session issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Correlation {
    /// Issued and still pending; `full` when it asked for every node.
    Pending { full: bool },
    /// Issued but no longer pending (timed out): late.
    Late,
    /// Never issued on this session (0, or above the last issued): a protocol error.
    NeverIssued,
}

/// The status requests of one session.
#[derive(Debug, Default)]
pub(crate) struct StatusBook {
    last_issued: u64,
    /// correlation id → (deadline, asked for every node). Deadlines grow with ids.
    pending: BTreeMap<u64, (Instant, bool)>,
}

impl StatusBook {
    /// Issues the next correlation id, or `None` when `limit` requests are pending.
    pub(crate) fn issue(
        &mut self,
        now: Instant,
        timeout: Duration,
        limit: usize,
        full: bool,
    ) -> Option<u64> {
        if self.pending.len() >= limit {
            return None;
        }
        self.last_issued += 1;
        self.pending.insert(self.last_issued, (now + timeout, full));
        Some(self.last_issued)
    }

    /// The last correlation id issued (0: none yet).
    pub(crate) fn last_issued(&self) -> u64 {
        self.last_issued
    }

    /// An emptied `BTreeMap` keeps its root node (hundreds of bytes): an idle session
    /// should not.
    fn release_if_empty(&mut self) {
        if self.pending.is_empty() {
            self.pending = BTreeMap::new();
        }
    }

    /// Takes back the most recent id when its request could not be sent.
    pub(crate) fn unissue(&mut self, id: u64) {
        self.pending.remove(&id);
        self.release_if_empty();
    }

    /// Classifies a response's correlation id, removing it from the pending set.
    pub(crate) fn take(&mut self, id: u64) -> Correlation {
        if id == 0 || id > self.last_issued {
            return Correlation::NeverIssued;
        }
        let found = self.pending.remove(&id);
        self.release_if_empty();
        match found {
            Some((_, full)) => Correlation::Pending { full },
            None => Correlation::Late,
        }
    }

    /// Would `take(id)` say never issued?
    pub(crate) fn never_issued(&self, id: u64) -> bool {
        id == 0 || id > self.last_issued
    }

    /// Removes and returns the requests whose deadline has passed, oldest first.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<u64> {
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, (deadline, _))| *deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in &expired {
            self.pending.remove(id);
        }
        self.release_if_empty();
        expired
    }

    /// Removes and returns every pending request.
    pub(crate) fn abandon_all(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.pending).into_keys().collect()
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|(d, _)| *d).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_start_at_one_and_classify() {
        let mut b = StatusBook::default();
        let t = Duration::from_secs(1);
        assert_eq!(b.issue(Instant::ZERO, t, 2, true), Some(1));
        assert_eq!(b.issue(Instant::ZERO, t, 2, false), Some(2));
        assert_eq!(b.issue(Instant::ZERO, t, 2, false), None);
        assert_eq!(b.take(0), Correlation::NeverIssued);
        assert_eq!(b.take(3), Correlation::NeverIssued);
        assert_eq!(b.take(1), Correlation::Pending { full: true });
        assert_eq!(b.take(1), Correlation::Late);
        assert_eq!(b.expire(Instant::from_millis(1000)), vec![2]);
        assert_eq!(b.take(2), Correlation::Late);
        assert_eq!(b.next_deadline(), None);
    }
}
