//! Input read while another task held the server's lock, waiting for the holder to
//! apply it (how: the `combine` module).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use iop_core::cp::ConnectionId;

/// Bytes the inbox holds at most.
pub(crate) const INBOX_BYTES: usize = 1 << 20;

/// Input read while the lock was held by another task, in the order it was read.
#[derive(Default)]
pub(crate) struct Inbox {
    pub(super) items: VecDeque<(ConnectionId, Vec<u8>)>,
    pub(super) bytes: usize,
}

/// The inbox and the flag that says it holds something (read without its lock).
#[derive(Default)]
pub(crate) struct Waiting {
    pub(super) inbox: Mutex<Inbox>,
    pub(super) any: AtomicBool,
    /// Inputs queued so far.
    pub(super) deferred: AtomicU64,
}

impl Waiting {
    /// Inputs read while another task held the lock, applied by that task, so far.
    pub(crate) fn deferred(&self) -> u64 {
        self.deferred.load(Ordering::Relaxed)
    }
}
