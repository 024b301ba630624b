//! The server's lock, combining: input a connection's task read while another task
//! held the lock waits in an inbox, and whoever holds the lock applies it, in
//! order, before letting go — so a task never sleeps on the lock for a frame (at
//! 10 000 Edges pushing load updates, 13.6 % of the server's time went to tasks
//! sleeping on it and waking each other), and the holder applies a batch at once.
//!
//! - Every acquisition applies what waits first ([`CpShared::lock`]): a connection's
//!   bytes are applied in the order they were read, before anything the task does
//!   next (its next bytes, its close).
//! - Every release applies what came meanwhile, then looks again once let go (the
//!   task that queued may have found the lock taken just before): nothing waits for
//!   a later acquisition.
//! - The output a connection's queued input provokes reaches it as output queued by
//!   another task does: written directly when its wire is free, else a wake-up.
//! - Bounded ([`INBOX_BYTES`]): past it, a task waits for the lock as before.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, MutexGuard, TryLockError};

use iop_core::cp::ConnectionId;

use super::inbox::INBOX_BYTES;
use super::state::{ConnSlot, CpShared, CpState};
use crate::Runtime;
use crate::io::Claim;
use crate::signal::lock;

/// The server's state, locked; applies the inbox when let go.
pub(crate) struct StateGuard<'a, R: Runtime> {
    shared: &'a Arc<CpShared<R>>,
    guard: Option<MutexGuard<'a, CpState>>,
}

impl<R: Runtime> CpShared<R> {
    /// Locks the state, waiting for it, and applies what waits in the inbox.
    pub(crate) fn lock(self: &Arc<Self>) -> StateGuard<'_, R> {
        let mut guard = lock(&self.state);
        wake(self.apply_waiting(&mut guard));
        StateGuard {
            shared: self,
            guard: Some(guard),
        }
    }

    /// [`lock`](Self::lock) if no other task holds it.
    pub(crate) fn try_lock(self: &Arc<Self>) -> Option<StateGuard<'_, R>> {
        let mut guard = self.try_state()?;
        wake(self.apply_waiting(&mut guard));
        Some(StateGuard {
            shared: self,
            guard: Some(guard),
        })
    }

    /// Queues `bytes`, read on `conn` while another task held the lock, for the
    /// holder to apply. False when the inbox is full: take the lock instead.
    pub(crate) fn defer(self: &Arc<Self>, conn: ConnectionId, bytes: &[u8]) -> bool {
        {
            let mut inbox = lock(&self.waiting.inbox);
            if inbox.bytes + bytes.len() > INBOX_BYTES {
                return false;
            }
            inbox.items.push_back((conn, bytes.to_vec()));
            inbox.bytes += bytes.len();
            self.waiting.any.store(true, Ordering::Relaxed);
            self.waiting.deferred.fetch_add(1, Ordering::Relaxed);
        }
        // Pairs with the fence after a release: either the holder sees the flag, or
        // this finds the lock free and applies the inbox itself.
        fence(Ordering::SeqCst);
        drop(self.try_lock());
        true
    }

    /// The state's mutex, if no other task holds it.
    fn try_state(&self) -> Option<MutexGuard<'_, CpState>> {
        match self.state.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Applies every input waiting in the inbox, in order, and routes what it
    /// provoked.
    fn apply_waiting(self: &Arc<Self>, state: &mut CpState) -> Vec<Arc<ConnSlot>> {
        let mut sends = Vec::new();
        if !self.waiting.any.load(Ordering::Acquire) {
            return sends;
        }
        let items = {
            let mut inbox = lock(&self.waiting.inbox);
            self.waiting.any.store(false, Ordering::Relaxed);
            inbox.bytes = 0;
            std::mem::take(&mut inbox.items)
        };
        let now = self.clock.now();
        for (conn, bytes) in items {
            state.cp.handle_bytes(now, conn, &bytes);
            // Output an input provokes on its own connection comes with no wake-up
            // (its task would pull it in the same step): claimed here.
            let Some(slot) = state.conns.get(&conn) else {
                continue;
            };
            match slot.direct.as_ref().map(|d| d.claim(&mut state.cp, conn)) {
                Some(Claim::Nothing) => {}
                Some(Claim::Pulled) => sends.push(slot.clone()),
                Some(Claim::Driver) | None => slot.wake.notify(),
            }
        }
        self.pump(state);
        sends
    }
}

/// Wakes the tasks of connections whose output was pulled while the lock is kept:
/// they write it.
fn wake(slots: Vec<Arc<ConnSlot>>) {
    for slot in slots {
        slot.wake.notify();
    }
}

impl<R: Runtime> Deref for StateGuard<'_, R> {
    type Target = CpState;

    fn deref(&self) -> &CpState {
        // Taken only in `drop`.
        self.guard.as_deref().unwrap_or_else(|| unreachable!())
    }
}

impl<R: Runtime> DerefMut for StateGuard<'_, R> {
    fn deref_mut(&mut self) -> &mut CpState {
        self.guard.as_deref_mut().unwrap_or_else(|| unreachable!())
    }
}

impl<R: Runtime> Drop for StateGuard<'_, R> {
    fn drop(&mut self) {
        let shared = self.shared;
        while let Some(mut guard) = self.guard.take() {
            let sends = shared.apply_waiting(&mut guard);
            drop(guard);
            for slot in sends {
                slot.send_or_wake();
            }
            // Pairs with the fence in `defer`.
            fence(Ordering::SeqCst);
            if !shared.waiting.any.load(Ordering::Acquire) {
                return;
            }
            // Taken by another task: its holder applies it.
            self.guard = shared.try_state();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cp::{ControlPlaneServer, ServerConfig};
    use crate::test_runtime::Nop;
    use iop_core::cp::EnrolmentPolicy;
    use iop_core::proto::{EdgeHelloRequest, Envelope, PROTOCOL_VERSION, encode_frame};

    /// A server whose tasks never run, and a connection the core knows.
    fn server() -> (Arc<CpShared<Nop>>, ConnectionId) {
        let config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
        let addr = ([127, 0, 0, 1], 0).into();
        let server = futures_lite::future::block_on(ControlPlaneServer::<Nop>::bind(addr, config))
            .unwrap_or_else(|e| panic!("{e}"));
        let shared = server.handle().shared.clone();
        let conn = shared.with(|state, now| {
            state.next_conn += 1;
            let conn = ConnectionId(state.next_conn);
            state
                .cp
                .handle_connect(now, conn)
                .unwrap_or_else(|e| panic!("{e:?}"));
            state.conns.insert(conn, Arc::new(ConnSlot::default()));
            conn
        });
        (shared, conn)
    }

    fn hello_bytes() -> Vec<u8> {
        let hello = EdgeHelloRequest {
            edge_id: "edge-1".into(),
            protocol_version: PROTOCOL_VERSION,
            software_version: "test/1".into(),
            ..Default::default()
        };
        let mut bytes = Vec::new();
        encode_frame(&Envelope::new(hello), 1 << 20, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
        bytes
    }

    #[test]
    fn input_queued_while_the_lock_is_held_is_applied_in_order_when_it_is_let_go() {
        let (shared, conn) = server();
        let hello = hello_bytes();
        let held = shared.lock();
        // The hello in pieces, each read while another task holds the lock.
        let pieces: Vec<&[u8]> = hello.chunks(5).collect();
        for piece in &pieces {
            assert!(shared.defer(conn, piece));
        }
        assert!(held.cp.session_of(conn).is_none(), "nothing applied yet");
        drop(held);
        assert!(
            !shared.waiting.any.load(Ordering::Acquire),
            "applied on release"
        );
        // Let go: applied, in the order read (out of order, the pieces are no hello).
        let session = shared.with_state(|s| s.cp.session_of(conn).map(|(id, _)| id.to_owned()));
        assert_eq!(session.as_deref(), Some("edge-1"));
        assert_eq!(shared.waiting.deferred(), pieces.len() as u64);
    }

    #[test]
    fn input_queued_as_the_lock_is_let_go_is_applied_by_the_task_that_queued_it() {
        let (shared, conn) = server();
        // Nobody holds the lock: the task that queued takes it and applies.
        assert!(shared.defer(conn, &hello_bytes()));
        assert!(!shared.waiting.any.load(Ordering::Acquire));
        assert!(shared.lock().cp.session_of(conn).is_some());
    }

    #[test]
    fn a_full_inbox_refuses_more_and_the_task_takes_the_lock() {
        let (shared, conn) = server();
        let held = shared.lock();
        let big = vec![0u8; INBOX_BYTES / 2];
        assert!(shared.defer(conn, &big));
        assert!(shared.defer(conn, &big));
        assert!(!shared.defer(conn, &[0]), "past the bound");
        drop(held);
        assert!(!shared.waiting.any.load(Ordering::Acquire));
    }
}
