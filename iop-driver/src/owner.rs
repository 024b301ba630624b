//! The application's ownership of a running server or Edge: every handle holds the
//! one [`Owner`], and when the last is dropped the thing it owns stops gracefully
//! (unless the application [`detach`](Owner::detach)ed it), so that a forgotten
//! handle cannot leave a server orphaned on its port or an Edge reconnecting for ever.

use std::sync::atomic::{AtomicBool, Ordering};

/// Stops what it owns when dropped, unless detached.
pub(crate) struct Owner {
    stop: Option<Box<dyn FnOnce() + Send + Sync>>,
    detached: AtomicBool,
}

impl Owner {
    /// An owner that calls `stop` when dropped.
    pub(crate) fn new(stop: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self {
            stop: Some(Box::new(stop)),
            detached: AtomicBool::new(false),
        }
    }

    /// From now on dropping the last handle leaves the owned task running.
    pub(crate) fn detach(&self) {
        self.detached.store(true, Ordering::Release);
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if self.detached.load(Ordering::Acquire) {
            return;
        }
        if let Some(stop) = self.stop.take() {
            stop();
        }
    }
}
