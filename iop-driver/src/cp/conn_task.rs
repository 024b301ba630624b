//! One connection's task, and the direct-write path by which the task that queued a
//! request may write it itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use iop_core::cp::{ConnectionId, ControlPlane};

use super::state::{ConnSlot, CpShared};
use crate::Runtime;
use crate::io::{self, Claim, ConnCore, Ended, Pull};
use crate::tls::MaybeTls;

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
fn pull(cp: &mut ControlPlane, conn: ConnectionId, out: &mut Vec<u8>, limit: usize) -> Pull {
    io::pull(out, limit, |b| cp.poll_transmit(conn, b))
}

pub(super) async fn conn_task<R: Runtime>(
    shared: Arc<CpShared<R>>,
    conn: ConnectionId,
    slot: Arc<ConnSlot>,
    wire: Arc<Mutex<io::Wire<MaybeTls<R::Stream>>>>,
) {
    tracing::debug!("connection accepted");
    let core = CpConn {
        shared: &shared,
        conn,
        slot: &slot,
        labelled: AtomicBool::new(false),
    };
    let ended = io::drive::<R, _, _, _>(&*wire, &core, &slot.wake).await;
    // The slot shares the wire: the stream closes once both are gone, here.
    shared.with(|state, now| {
        if ended != Ended::ByCore {
            state.cp.handle_closed(now, conn);
        }
        state.conns.remove(&conn);
    });
    drop(slot);
    drop(wire);
    tracing::debug!(?ended, "connection ended");
}

struct CpConn<'a, R: Runtime> {
    shared: &'a CpShared<R>,
    conn: ConnectionId,
    slot: &'a ConnSlot,
    /// The span got its `edge_id`.
    labelled: AtomicBool,
}

impl<R: Runtime> ConnCore for CpConn<'_, R> {
    fn handle_bytes(&self, bytes: &[u8], out: Option<&mut Vec<u8>>) -> Option<Pull> {
        let (pulled, edge_id) = self.shared.with(|state, now| {
            state.cp.handle_bytes(now, self.conn, bytes);
            let pulled = out.map(|out| pull(&mut state.cp, self.conn, out, io::PULL_BATCH));
            if self.labelled.load(Ordering::Relaxed) {
                return (pulled, None);
            }
            let edge_id = state.cp.session_of(self.conn).map(|(id, _)| id.to_owned());
            (pulled, edge_id)
        });
        if let Some(edge_id) = edge_id {
            self.labelled.store(true, Ordering::Relaxed);
            tracing::Span::current().record("edge_id", edge_id.as_str());
        }
        pulled
    }

    fn pull(&self, out: &mut Vec<u8>, limit: usize) -> Pull {
        self.shared
            .with_state(|state| pull(&mut state.cp, self.conn, out, limit))
    }

    fn deadline(&self) -> Option<std::time::Instant> {
        None
    }

    fn handle_timeout(&self) {}

    fn aborted(&self) -> bool {
        self.slot.aborted.load(Ordering::Acquire)
    }
    fn closed(&self) -> bool {
        self.slot.closed.load(Ordering::Acquire)
    }
}
