//! The server's state under its one lock, shared by its tasks and every handle, and
//! the routing of the core's outputs: wake-ups to connection tasks, events to waiters,
//! the trackers and subscribers.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_channel::oneshot;
use iop_core::Instant;
use iop_core::cp::{ConnectionId, ControlPlane, CpEvent, IdHasher};

use super::config::TlsStats;
use super::direct::Direct;
use super::error::StatusRequestError;
use super::followers::Followers;
use super::status_waiters::StatusWaiters;
use crate::io::Claim;
use crate::notice::{Published as _, Publisher};
use crate::signal::Signal;
use crate::tls::ServerTls;
use crate::{Clock, Runtime};

/// One connection's link to its driver task.
#[derive(Default)]
pub(crate) struct ConnSlot {
    pub(crate) wake: Signal,
    pub(crate) aborted: AtomicBool,
    /// The core emitted `Closed` for this connection.
    pub(crate) closed: AtomicBool,
    /// The peer's address, and whether the connection counts among its pending
    /// hellos (until its session is accepted or it closes).
    pub(super) peer: Option<std::net::IpAddr>,
    pub(super) pending_hello: AtomicBool,
    /// The connection's write side, shared with its driver task, through which the
    /// task that queued output may write it itself (see [`CpShared::with_direct`]).
    /// `None` for TLS: rustls buffers what it writes, only the driver flushes it.
    pub(super) direct: Option<Arc<dyn Direct>>,
}

impl ConnSlot {
    /// Writes the output pulled for the connection ([`Claim::Pulled`]), without the
    /// server's lock; what cannot be written at once is left to its task, woken.
    pub(super) fn send_or_wake(&self) {
        if !self.direct.as_ref().is_some_and(|d| d.send()) {
            self.wake.notify();
        }
    }
}

/// Everything under the one lock.
pub(crate) struct CpState {
    pub(crate) cp: ControlPlane,
    /// The fleet's load, folded from the core's events.
    pub(crate) fleet: iop_fleet::Fleet,
    /// Keyed by the driver's own connection counter: ids no peer chooses.
    pub(crate) conns: HashMap<ConnectionId, Arc<ConnSlot>, std::hash::BuildHasherDefault<IdHasher>>,
    pub(super) next_conn: u64,
    /// The deadline the timer task sleeps until.
    pub(super) timer_armed: Option<Instant>,
    pub(crate) status_waiters: StatusWaiters,
    /// The trackers following commands (the records are the core's).
    pub(crate) followers: Followers,
    /// [`ControlPlane::records_dropped`] when the trackers last looked.
    pub(crate) records_dropped: u64,
    pub(crate) events: Publisher<CpEvent>,
    /// Shutdown began: no new connections, trackers end.
    pub(crate) stopped: bool,
    /// Shutdown completed: subscriptions are closed.
    pub(crate) finished: bool,
    /// The accept loop ended (the listener is closed).
    pub(super) accept_done: bool,
    /// Told when the last connection is gone (and the listener closed) after
    /// `stopped`.
    pub(crate) idle_waiters: Vec<oneshot::Sender<()>>,
    /// Connections awaiting their hello, by peer address.
    pub(super) pending_by_ip: HashMap<std::net::IpAddr, usize>,
    /// Log lines about connections refused or dropped, at most one a second.
    pub(super) refusals: crate::RateLog,
    pub(super) failed_handshakes: crate::RateLog,
    /// TLS handshakes under way (they count against the connection cap).
    pub(super) handshaking: usize,
    /// Connections of trusted proxies whose PROXY header is being read.
    pub(super) reading_proxy_headers: usize,
    /// TLS handshakes under way by peer address (they count against its share of
    /// connections awaiting their hello).
    pub(super) handshaking_by_ip: HashMap<std::net::IpAddr, usize>,
    /// TLS handshakes under way for connections over the cap, to be refused
    /// `OVERLOADED` once done (at most [`MAX_REFUSAL_HANDSHAKES`]).
    pub(super) refusing: usize,
    pub(crate) tls_stats: TlsStats,
    /// Load watchers to wake when the fleet's change log moves on.
    pub(crate) load_watchers: Vec<std::sync::Weak<Signal>>,
    /// The latest change the watchers were woken for.
    pub(crate) watched_change: u64,
}

/// State shared by the server's tasks and every handle.
pub(crate) struct CpShared<R: Runtime> {
    /// Taken through [`lock`](Self::lock) (see the `combine` module), never directly.
    pub(super) state: Mutex<CpState>,
    /// Input read while the lock was held, for its holder to apply.
    pub(crate) waiting: super::inbox::Waiting,
    pub(crate) clock: Clock,
    pub(crate) timer: Signal,
    pub(crate) accept_stop: Signal,
    pub(crate) local_addr: SocketAddr,
    pub(crate) shutdown_grace: Duration,
    pub(crate) subscriber_capacity: usize,
    pub(crate) subscriber_byte_budget: usize,
    pub(super) max_pending_hellos_per_ip: usize,
    /// The TLS configuration new handshakes use (`None`: plain TCP, for the server's
    /// life); replaced by [`ControlPlaneHandle::set_tls`].
    pub(crate) tls: Mutex<Option<ServerTls>>,
    pub(super) handshake_timeout: Duration,
    pub(super) max_connections: usize,
    /// Peers whose connections begin with a PROXY header.
    pub(super) proxy_protocol: Option<super::proxy_header::ProxyProtocol>,
    /// PROXY headers read at once at most (the core's pending-hello cap).
    pub(super) max_proxy_reads: usize,
    /// Where commands are recorded before they are sent, if anywhere.
    pub(super) journal: Mutex<Option<Arc<dyn super::journal::CommandJournal>>>,
    pub(super) _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> CpShared<R> {
    /// Runs `f` on the state, then routes every output the core produced.
    pub(crate) fn with<T>(self: &Arc<Self>, f: impl FnOnce(&mut CpState, Instant) -> T) -> T {
        let mut state = self.lock();
        let now = self.clock.now();
        let out = f(&mut state, now);
        self.pump(&mut state);
        out
    }

    /// [`with`](Self::with) for an application's call that queues output for one
    /// connection (a status request, a command): the calling task writes it itself,
    /// without the server's lock, when the connection's driver task has nothing
    /// pending (the common case), instead of waking that task to do it — one task
    /// switch less per request. Whatever cannot be written at once (a full socket
    /// buffer, a busy or TLS connection) is left to the driver task, woken as usual.
    pub(crate) fn with_direct<T>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut CpState, Instant) -> T,
    ) -> T {
        let mut state = self.lock();
        let now = self.clock.now();
        let out = f(&mut state, now);
        // The first connection the call queued output for; the others (if any) are
        // woken by `pump`.
        let mut direct = None;
        let st = &mut *state;
        if let Some(conn) = st.cp.poll_wakeup()
            && let Some(slot) = st.conns.get(&conn)
        {
            match slot.direct.as_ref().map(|d| d.claim(&mut st.cp, conn)) {
                Some(Claim::Nothing) => {}
                Some(Claim::Pulled) => direct = Some(slot.clone()),
                Some(Claim::Driver) | None => slot.wake.notify(),
            }
        }
        self.pump(&mut state);
        drop(state);
        if let Some(slot) = direct {
            slot.send_or_wake();
        }
        out
    }

    /// [`with`](Self::with) for calls that need no time: it does not read the clock
    /// (a read costs about as much as pulling a frame out of the core).
    pub(crate) fn with_state<T>(self: &Arc<Self>, f: impl FnOnce(&mut CpState) -> T) -> T {
        let mut state = self.lock();
        let out = f(&mut state);
        self.pump(&mut state);
        out
    }

    /// Routes wake-ups to connection tasks, events to waiters and subscribers, and
    /// re-arms the timer when the deadline moved earlier.
    pub(crate) fn pump(self: &Arc<Self>, state: &mut CpState) {
        while let Some(conn) = state.cp.poll_wakeup() {
            if let Some(slot) = state.conns.get(&conn) {
                slot.wake.notify();
            }
        }
        while let Some(event) = state.cp.poll_event() {
            if let CpEvent::CommandHeld { edge_id, request } = &event {
                self.record(edge_id, request);
            }
            dispatch(state, event);
        }
        if !state.load_watchers.is_empty() {
            notify_watchers(state);
        }
        // Histories dropped for the core's bounds end the trackers following them.
        if state.cp.records_dropped() != state.records_dropped {
            state.records_dropped = state.cp.records_dropped();
            state.followers.wake_all();
        }
        let next = state.next_deadline();
        let earlier = match (next, state.timer_armed) {
            (Some(n), Some(armed)) => n < armed,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if earlier {
            state.timer_armed = next;
            self.timer.notify();
        }
        if state.stopped && state.conns.is_empty() && state.accept_done {
            for waiter in state.idle_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }
}

impl CpState {
    /// The earliest deadline of the core and of the fleet.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        [self.cp.poll_timeout(), self.fleet.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }
}

fn dispatch(state: &mut CpState, event: CpEvent) {
    crate::log::Log::log(&event);
    state.fleet.handle_event(&event);
    // With no subscriber for status answers the answer goes to its waiter by value:
    // a full status of 1 000 nodes is ~450 KB decoded, and a deep copy of it (then
    // dropping the original) cost about as much as decoding it.
    if !state.events.wants(event.kind_bit())
        && let CpEvent::StatusReceived {
            request, response, ..
        } = event
    {
        state.status_waiters.complete(request, Ok(response));
        return;
    }
    match &event {
        CpEvent::Closed { conn, .. } => {
            if let Some(slot) = state.conns.get(conn).cloned() {
                slot.closed.store(true, Ordering::Release);
                slot.wake.notify();
                release_pending(state, &slot);
            }
        }
        // A hello that passed its checks and waits only on the directory (a cluster's
        // engine) is no flood of silent connections: it stops counting against its
        // address's cap, so a storm from behind one address (a NAT, a load balancer)
        // is not refused while claims are slow.
        CpEvent::SessionAccepted { conn, .. }
        | CpEvent::OwnershipClaim(iop_core::cp::Claim { conn, .. }) => {
            if let Some(slot) = state.conns.get(conn).cloned() {
                release_pending(state, &slot);
            }
        }
        // Copied only for a caller still waiting.
        CpEvent::StatusReceived {
            request, response, ..
        } if state.status_waiters.is_waiting(*request) => {
            state
                .status_waiters
                .complete(*request, Ok(response.clone()));
        }
        CpEvent::StatusTimedOut { request, .. } => {
            state
                .status_waiters
                .complete(*request, Err(StatusRequestError::TimedOut));
        }
        CpEvent::StatusAbandoned { request, .. } => {
            state
                .status_waiters
                .complete(*request, Err(StatusRequestError::Abandoned));
        }
        // The record moved on (the core keeps it): its trackers read on.
        CpEvent::CommandResponded { response, .. } => state.followers.wake(&response.command_id),
        CpEvent::CommandEvent { event: ev, .. } => state.followers.wake(&ev.command_id),
        CpEvent::CommandEnded { command_id, .. } => state.followers.wake(command_id),
        // The records went with the Edge: their trackers end Forgotten.
        CpEvent::EdgeForgotten {
            unfinished_commands,
            ..
        } => {
            for command_id in unfinished_commands {
                state.followers.forgotten(command_id);
            }
        }
        _ => {}
    }
    if !state.events.is_empty() {
        state.events.publish(&event);
    }
}

/// `slot` no longer awaits its hello: one less pending for its address.
pub(super) fn release_pending(state: &mut CpState, slot: &ConnSlot) {
    if slot.pending_hello.swap(false, Ordering::AcqRel)
        && let Some(ip) = slot.peer
        && let Some(n) = state.pending_by_ip.get_mut(&ip)
    {
        *n -= 1;
        if *n == 0 {
            state.pending_by_ip.remove(&ip);
        }
    }
}

/// Wakes every watcher when the fleet's log moved on (or the server finished), and
/// forgets the watchers that are gone.
pub(super) fn notify_watchers(state: &mut CpState) {
    let last = state.fleet.last_change();
    if last == state.watched_change && !state.finished {
        return;
    }
    state.watched_change = last;
    state.load_watchers.retain(|w| match w.upgrade() {
        Some(signal) => {
            signal.notify();
            true
        }
        None => false,
    });
}
