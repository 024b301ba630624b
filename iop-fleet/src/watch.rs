//! The watch of the fleet's load: every change a [`Fleet`](crate::Fleet) applies, in
//! order, numbered, kept in a bounded log that any number of watchers read from their
//! own cursor — a watcher too slow for the log finds a gap and starts again from a
//! snapshot, so no watcher costs memory of its own (`GET /v1/load/watch`).

use std::collections::VecDeque;
use std::sync::Arc;

use iop_core::cp::load::EdgeLoad;

/// Changes the log keeps at most by default.
pub const DEFAULT_WATCH_CHANGES: usize = 16_384;
/// Bytes of views the log keeps at most by default (each change counts the heap of
/// the view it holds, shared or not).
pub const DEFAULT_WATCH_BYTES: usize = 32 * 1024 * 1024;

/// What changed about one Edge's load.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A new view (a full status): every provider, the structure may have changed.
    View(Arc<EdgeLoad>),
    /// The numbers of providers `changed` (indexes into the view's providers) changed,
    /// by a load update: the view after.
    Numbers {
        /// The view with the change in.
        view: Arc<EdgeLoad>,
        /// Which providers changed.
        changed: Arc<[u32]>,
    },
    /// Its numbers were proved current (a refresh found them unchanged, or an Edge
    /// that pushes sent a heartbeat): their age counts from `at_unix_ms`.
    Confirmed,
    /// Its session ended: every provider counts offline.
    Offline,
    /// It no longer counts here (forgotten, or held by another Control Plane).
    Gone,
}

/// One change of the fleet's load.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetChange {
    /// Its number: one more than the change before it.
    pub seq: u64,
    /// When the view it carries arrived, or was confirmed (wall clock, Unix ms);
    /// `None` for [`ChangeKind::Offline`] and [`ChangeKind::Gone`], which the fleet
    /// learns with no time of their own.
    pub at_unix_ms: Option<u64>,
    /// The Edge.
    pub edge_id: Arc<str>,
    /// The cluster replica whose Edge it is, when another replica applied it and told
    /// this one ([`Fleet::apply_remote`](crate::Fleet::apply_remote)); `None`: applied
    /// here.
    pub replica: Option<Arc<str>>,
    /// What changed.
    pub kind: ChangeKind,
}

/// A watcher's cursor fell behind what the log keeps: read a snapshot and go on from
/// the sequence number it was taken at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the watch fell behind: changes after {after} are no longer kept (oldest kept: {oldest})")]
pub struct WatchGap {
    /// The cursor asked from.
    pub after: u64,
    /// The oldest change kept.
    pub oldest: u64,
}

/// The bounded log of changes.
#[derive(Debug)]
pub(crate) struct ChangeLog {
    changes: VecDeque<(FleetChange, usize)>,
    bytes: usize,
    last: u64,
    max_changes: usize,
    max_bytes: usize,
}

impl ChangeLog {
    pub(crate) fn new(max_changes: usize, max_bytes: usize) -> Self {
        Self {
            changes: VecDeque::new(),
            bytes: 0,
            last: 0,
            max_changes: max_changes.max(1),
            max_bytes,
        }
    }

    /// The number of the latest change (0: none yet).
    pub(crate) fn last(&self) -> u64 {
        self.last
    }

    /// Appends a change of `edge_id`, dropping the oldest past the bounds.
    /// (An id already shared is kept, not copied: every load update is one change.)
    pub(crate) fn push(
        &mut self,
        edge_id: impl Into<Arc<str>>,
        at_unix_ms: Option<u64>,
        kind: ChangeKind,
    ) {
        self.push_from(None, edge_id, at_unix_ms, kind);
    }

    /// [`push`](Self::push) of a change another replica applied (`replica`).
    pub(crate) fn push_from(
        &mut self,
        replica: Option<&Arc<str>>,
        edge_id: impl Into<Arc<str>>,
        at_unix_ms: Option<u64>,
        kind: ChangeKind,
    ) {
        let edge_id: Arc<str> = edge_id.into();
        self.last += 1;
        let bytes = match &kind {
            ChangeKind::View(v) | ChangeKind::Numbers { view: v, .. } => v.heap_bytes(),
            ChangeKind::Confirmed | ChangeKind::Offline | ChangeKind::Gone => 0,
        } + edge_id.len();
        let change = FleetChange {
            seq: self.last,
            at_unix_ms,
            edge_id,
            replica: replica.cloned(),
            kind,
        };
        self.changes.push_back((change, bytes));
        self.bytes += bytes;
        while self.changes.len() > self.max_changes
            || (self.bytes > self.max_bytes && self.changes.len() > 1)
        {
            if let Some((_, b)) = self.changes.pop_front() {
                self.bytes -= b;
            }
        }
    }

    /// Up to `max` changes after `after`, oldest first; a [`WatchGap`] when some of
    /// them are no longer kept.
    pub(crate) fn since(&self, after: u64, max: usize) -> Result<Vec<FleetChange>, WatchGap> {
        let oldest = self.changes.front().map_or(self.last + 1, |(c, _)| c.seq);
        if after + 1 < oldest || after > self.last {
            return Err(WatchGap { after, oldest });
        }
        let skip = usize::try_from(after + 1 - oldest).unwrap_or(usize::MAX);
        Ok(self
            .changes
            .iter()
            .skip(skip)
            .take(max)
            .map(|(c, _)| c.clone())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_on_until_the_log_drops_what_it_has_not_read() {
        let mut log = ChangeLog::new(3, usize::MAX);
        assert_eq!(log.since(0, 10), Ok(vec![]));
        for i in 0..3 {
            log.push(format!("e{i}").as_str(), Some(10 + i), ChangeKind::Offline);
        }
        let seqs = |r: Result<Vec<FleetChange>, WatchGap>| {
            r.map(|v| v.iter().map(|c| c.seq).collect::<Vec<_>>())
        };
        assert_eq!(seqs(log.since(0, 10)), Ok(vec![1, 2, 3]));
        assert_eq!(seqs(log.since(1, 1)), Ok(vec![2]));
        assert_eq!(seqs(log.since(3, 10)), Ok(vec![]));
        log.push("e3", None, ChangeKind::Gone);
        assert_eq!(seqs(log.since(1, 10)), Ok(vec![2, 3, 4]));
        assert_eq!(
            log.since(0, 10),
            Err(WatchGap {
                after: 0,
                oldest: 2
            })
        );
        // A cursor from the future (another process's) is a gap too.
        assert!(log.since(9, 10).is_err());
        assert_eq!(log.last(), 4);
    }
}
