//! [`LoadWatch`]: the fleet's load as it changes — a snapshot, then every change the
//! fleet applies, read from the fleet's bounded log
//! ([`iop_fleet::watch`]) at the watcher's own pace. A watcher the log left behind is
//! told ([`WatchItem::Gap`]) and starts again from a fresh snapshot: a slow watcher
//! costs no memory of its own.

use std::sync::Arc;

use iop_fleet::{FleetChange, LoadView, WatchGap};

use super::handle::ControlPlaneHandle;
use super::state::CpShared;
use crate::Runtime;
use crate::signal::Signal;

/// Changes one [`LoadWatch::next`] returns at most.
pub const WATCH_BATCH: usize = 1024;

/// What a [`LoadWatch`] yields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum WatchItem {
    /// Every Edge's view now — those other replicas of a cluster hold too — as of
    /// change `seq` (the changes that follow are numbered after it).
    Snapshot {
        /// The views, in Edge id order.
        views: Vec<LoadView>,
        /// The number of the latest change they include.
        seq: u64,
    },
    /// Changes in order, each numbered one more than the one before.
    Changes(Vec<FleetChange>),
    /// The watcher fell behind the log: a [`WatchItem::Snapshot`] follows.
    Gap(WatchGap),
}

/// A watch of the fleet's load ([`ControlPlaneHandle::watch_load`]).
pub struct LoadWatch<R: Runtime> {
    shared: Arc<CpShared<R>>,
    signal: Arc<Signal>,
    /// The latest change yielded; `None`: a snapshot is due.
    cursor: Option<u64>,
}

impl<R: Runtime> std::fmt::Debug for LoadWatch<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadWatch")
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> LoadWatch<R> {
    /// The next snapshot, batch of changes or gap; waits while nothing changed.
    /// `None` once the server has shut down.
    pub async fn next(&mut self) -> Option<WatchItem> {
        loop {
            {
                let state = self.shared.lock();
                if state.finished {
                    return None;
                }
                match self.cursor {
                    None => {
                        let seq = state.fleet.last_change();
                        self.cursor = Some(seq);
                        let views = state.fleet.watch_views();
                        return Some(WatchItem::Snapshot { views, seq });
                    }
                    Some(after) => match state.fleet.changes_since(after, WATCH_BATCH) {
                        Ok(changes) => {
                            if let Some(last) = changes.last() {
                                self.cursor = Some(last.seq);
                                return Some(WatchItem::Changes(changes));
                            }
                        }
                        Err(gap) => {
                            self.cursor = None;
                            return Some(WatchItem::Gap(gap));
                        }
                    },
                }
            }
            self.signal.wait().await;
        }
    }

    /// The number of the latest change yielded (`None` before the first snapshot, or
    /// after a gap).
    pub fn cursor(&self) -> Option<u64> {
        self.cursor
    }
}

impl<R: Runtime> ControlPlaneHandle<R> {
    /// Watches the fleet's load: a snapshot of every Edge's view, then every change
    /// (a new view, updated numbers, an Edge offline or gone) as the fleet applies it.
    pub fn watch_load(&self) -> LoadWatch<R> {
        self.watch_load_after(None)
    }

    /// Watches the fleet's load from after change `after` (a resumed watch: the
    /// number of the last change seen), or from a snapshot when `None` — or when the
    /// log no longer holds what follows `after` ([`WatchItem::Gap`] first).
    pub fn watch_load_after(&self, after: Option<u64>) -> LoadWatch<R> {
        let signal = Arc::new(Signal::new());
        let mut state = self.shared.lock();
        state.load_watchers.push(Arc::downgrade(&signal));
        drop(state);
        LoadWatch {
            shared: self.shared.clone(),
            signal,
            cursor: after,
        }
    }

    /// What numbers this server's load changes under: the wall-clock origin of its
    /// clock, different for each start, so that a resumed watch can tell its
    /// numbers from another process's.
    pub fn load_watch_epoch(&self) -> u64 {
        self.shared.clock.wall_clock().origin_unix_ms
    }
}
