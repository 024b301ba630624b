//! The direct-write path: a connection's wire as the tasks that queue output for it
//! see it, so that the task that queued a request may write it itself.

use std::sync::Mutex;

use iop_core::cp::{ConnectionId, ControlPlane};

use crate::io::{self, Claim, Pull};

/// A connection's [`io::Wire`] as the tasks that queue output for it see it.
pub(super) trait Direct: Send + Sync {
    /// Called with the server's lock held, after the core queued output for `conn`.
    /// Pulls it into the wire's buffer if the driver task has nothing pending there
    /// and is not using the wire.
    fn claim(&self, cp: &mut ControlPlane, conn: ConnectionId) -> Claim;
    /// Called without the server's lock after [`Claim::Pulled`]: writes what is
    /// pending without waiting. False when something is left for the driver task.
    fn send(&self) -> bool;
}

impl<S: futures_io::AsyncWrite + Unpin + Send> Direct for Mutex<io::Wire<S>> {
    fn claim(&self, cp: &mut ControlPlane, conn: ConnectionId) -> Claim {
        // Never wait for the wire with the server's lock held (the driver task takes
        // them in the other order): a busy wire is the driver's to serve.
        match self.try_lock() {
            Ok(mut w) => w.claim(|out| pull(cp, conn, out, io::PULL_BATCH)),
            Err(std::sync::TryLockError::Poisoned(p)) => p
                .into_inner()
                .claim(|out| pull(cp, conn, out, io::PULL_BATCH)),
            Err(std::sync::TryLockError::WouldBlock) => Claim::Driver,
        }
    }

    fn send(&self) -> bool {
        match self.try_lock() {
            Ok(mut w) => w.write_now(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().write_now(),
            // The driver task holds it: it is awake and sees the bytes.
            Err(std::sync::TryLockError::WouldBlock) => false,
        }
    }
}

/// Appends `conn`'s output to `out`, up to about `limit` bytes.
pub(super) fn pull(
    cp: &mut ControlPlane,
    conn: ConnectionId,
    out: &mut Vec<u8>,
    limit: usize,
) -> Pull {
    io::pull(out, limit, |b| cp.poll_transmit(conn, b))
}
