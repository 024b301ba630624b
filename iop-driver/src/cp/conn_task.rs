//! One connection's task.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use iop_core::cp::ConnectionId;

use super::direct::pull;
use super::state::{ConnSlot, CpShared};
use crate::Runtime;
use crate::io::{self, ConnCore, Ended, Pull};
use crate::tls::MaybeTls;

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
    shared: &'a Arc<CpShared<R>>,
    conn: ConnectionId,
    slot: &'a ConnSlot,
    /// The span got its `edge_id`.
    labelled: AtomicBool,
}

impl<R: Runtime> ConnCore for CpConn<'_, R> {
    fn handle_bytes(&self, bytes: &[u8], out: Option<&mut Vec<u8>>) -> Option<Pull> {
        // The lock taken by another task: the bytes wait in its inbox, applied by
        // whoever holds it; their output comes as a wake-up (or written for us).
        let mut state = match self.shared.try_lock() {
            Some(state) => state,
            None if self.shared.defer(self.conn, bytes) => return Some(Pull::Idle),
            None => self.shared.lock(),
        };
        let now = self.shared.clock.now();
        state.cp.handle_bytes(now, self.conn, bytes);
        let pulled = out.map(|out| pull(&mut state.cp, self.conn, out, io::PULL_BATCH));
        let edge_id = if self.labelled.load(Ordering::Relaxed) {
            None
        } else {
            state.cp.session_of(self.conn).map(|(id, _)| id.to_owned())
        };
        self.shared.pump(&mut state);
        drop(state);
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
