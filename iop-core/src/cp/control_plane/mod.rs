//! The [`ControlPlane`]: what spans connections — the table of connections and their
//! timer index, the Edges' views and command books, enrolment, the ownership claim,
//! supersession and revocation, the hellos waiting for their ownership claim — and
//! the pull-based outputs. What concerns one connection is its [`Session`]'s: the
//! control plane owns every session, calls into it, and hears from it what a frame
//! needs beyond the connection ([`FromSession`]).
//!
//! Each rule of PROTOCOL.md that spans connections is in the file named for it:
//!
//! * `input` — the transport's inputs (connect, bytes, closed, timeouts), each sent on
//!   to the rule it concerns;
//! * `hello` — a hello's checks that span connections (§4.1.2 steps 4–6: enrolment,
//!   the peer's identity, draining), acceptance and supersession (§5.3);
//! * `claim` — the ownership claim's answers, at once or from the driver (§4.1 step 6);
//! * `admission` — the `retry_after` of a burst refused at the pending-hello cap;
//! * `liveness` — reachability as a session is heard from or goes silent (§4.2);
//! * `status` — status requests, answers into the views, timeouts, resync points (§4.3);
//! * `node_events` — node events and the resync points they make (§4.5);
//! * `commands/` — commands out, their answers in, across sessions, and handed over
//!   from another Control Plane (§4.4, §8);
//! * `enrolment` — revocation and policy changes (§11 `CREDENTIAL_REVOKED`);
//! * `shutdown` — draining and shutdown (§4.7);
//! * `close` — what a connection's end does to its Edge's view and commands (§11);
//! * `views` — the views' retention (§7) and the queries that read them.

mod admission;
mod claim;
mod close;
mod commands;
mod enrolment;
mod hello;
mod input;
mod liveness;
mod load;
mod load_update;
mod node_events;
mod shutdown;
mod status;
mod views;

use std::collections::{BTreeSet, VecDeque};

use iop_proto::Envelope;

use crate::outbound::OutboundError;
use crate::time::Instant;

use super::config::{ConfigError, CpConfig};
use super::conn_table::ConnTable;
use super::directory::{Directory, LocalDirectory};
use super::edges::EdgeTable;
use super::enrolment::EnrolmentPolicy;
use super::ids::ConnectionId;
#[cfg(doc)]
use super::session::FromSession;
use super::session::{ConnBuffers, Io, Session};
use super::stats::CpStats;
use super::{CloseReason, CpEvent};
use crate::transmit::Transmit;

/// The Control Plane endpoint: every Edge connection's [`Session`], and the view of
/// every Edge. Sans-IO: see the [module docs](super) for the driving contract.
#[derive(Debug)]
pub struct ControlPlane {
    config: CpConfig,
    policy: EnrolmentPolicy,
    conns: ConnTable,
    edges: EdgeTable,
    /// (deadline, connection): the earliest timer of every connection that has one.
    timers: BTreeSet<(Instant, ConnectionId)>,
    events: VecDeque<CpEvent>,
    /// The wake-up queue and the frame count the sessions' outputs feed.
    io: Io,
    /// Decides who may take an Edge id (the ownership claim).
    directory: Box<dyn Directory>,
    /// The hellos whose claim the directory deferred.
    claims: claim::Claims,
    /// The control plane's own status requests in flight.
    loads: load::Refreshes,
    last_command_n: u64,
    /// The commands whose records keep their history, and the bound on them.
    records: commands::RecordIndex,
    /// Connections whose hello is not accepted yet (awaited, or claiming).
    pending_hellos: usize,
    /// How fast hellos were taken lately, for the `retry_after` of a burst.
    hello_rate: admission::HelloRate,
    /// Hellos that passed their checks (a running total): accepted at once, or put
    /// to the directory as a claim.
    hellos_checked: u64,
    draining: bool,
    shut_down: bool,
    stats: CpStats,
}

impl ControlPlane {
    /// A Control Plane with `config` (checked by [`CpConfig::validate`]) and enrolment
    /// `policy`, which decides ownership claims itself: a [`LocalDirectory`] whose
    /// session ids start above [`CpConfig::session_id_floor`].
    pub fn new(config: CpConfig, policy: EnrolmentPolicy) -> Result<Self, ConfigError> {
        let directory = Box::new(LocalDirectory::new(config.session_id_floor));
        Self::with_directory(config, policy, directory)
    }

    /// [`new`](Self::new), with ownership claims put to `directory`: an
    /// [`ExternalDirectory`](super::ExternalDirectory) defers each to the driver (a
    /// cluster's replica), or a [`Directory`] of one's own ([`directory`](super::directory)).
    pub fn with_directory(
        config: CpConfig,
        policy: EnrolmentPolicy,
        directory: Box<dyn Directory>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            directory,
            claims: claim::Claims::default(),
            loads: load::Refreshes::default(),
            config,
            policy,
            conns: ConnTable::default(),
            edges: EdgeTable::default(),
            timers: BTreeSet::new(),
            events: VecDeque::new(),
            io: Io::default(),
            last_command_n: 0,
            records: Default::default(),
            pending_hellos: 0,
            hello_rate: Default::default(),
            hellos_checked: 0,
            draining: false,
            shut_down: false,
            stats: CpStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CpConfig {
        &self.config
    }

    /// The earliest deadline at which [`handle_timeout`](Self::handle_timeout) must be
    /// called. It may be earlier than any timer's real deadline: a deadline that moved
    /// later is re-indexed lazily, when this earlier time comes (that call to
    /// `handle_timeout` then only re-indexes).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let conns = self.timers.first().map(|(at, _)| *at);
        let views = self
            .edges
            .oldest_disconnected()
            .map(|at| at + self.config.disconnected_view_ttl);
        [conns, views, self.edges.next_abandon()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Appends bytes for `conn` to `buf` (about `transmit_chunk` at most per call).
    /// Returns [`Transmit::Close`] once a closing connection has handed out every final
    /// byte — the Control Plane then forgets it — and for an unknown connection.
    pub fn poll_transmit(&mut self, conn: ConnectionId, buf: &mut Vec<u8>) -> Transmit {
        let Some(s) = self.conns.get_mut(&conn) else {
            return Transmit::Close;
        };
        let n = s.transmit(buf, self.config.transmit_chunk);
        if n > 0 {
            self.stats.bytes_out += n as u64;
            return Transmit::Bytes(n);
        }
        if s.is_open() {
            return Transmit::Idle;
        }
        self.forget(conn);
        Transmit::Close
    }

    /// The next connection that got output (or a pending close) from an input on
    /// *another* connection, or from an application call: wake its task so it calls
    /// `poll_transmit`. Each connection is listed once until polled.
    pub fn poll_wakeup(&mut self) -> Option<ConnectionId> {
        while let Some(conn) = self.io.next_wakeup() {
            if let Some(s) = self.conns.get_mut(&conn) {
                s.woken();
                return Some(conn);
            }
        }
        None
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<CpEvent> {
        self.events.pop_front()
    }

    /// Counters for metrics.
    pub fn stats(&self) -> CpStats {
        let mut stats = self.stats.clone();
        (stats.frames_in, stats.frames_out) = self.io.frames();
        stats.connections = self.conns.len();
        stats.live_sessions = self.edges.values().filter(|e| e.live().is_some()).count();
        stats.edges_known = self.edges.len();
        stats
    }

    /// The connection `conn`, open or closing.
    pub fn session(&self, conn: ConnectionId) -> Option<&Session> {
        self.conns.get(&conn).map(|s| &**s)
    }

    /// Buffer usage of `conn`.
    pub fn connection_buffers(&self, conn: ConnectionId) -> Option<ConnBuffers> {
        self.session(conn).map(Session::buffers)
    }

    /// Connections held (open or closing).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    // ----- internals -------------------------------------------------------------

    /// Queues `envelope` for `conn`. On a full buffer the connection is dropped as a
    /// slow peer.
    fn send(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        envelope: &Envelope,
    ) -> Result<(), OutboundError> {
        let Some(s) = self.conns.get_mut(&conn) else {
            return Ok(());
        };
        match s.queue(envelope, &mut self.io) {
            Err(e @ OutboundError::Full { .. }) => {
                self.close(now, conn, CloseReason::SlowPeer);
                Err(e)
            }
            other => other,
        }
    }

    fn forget(&mut self, conn: ConnectionId) {
        self.claims.remove(&conn);
        if let Some(s) = self.conns.remove(&conn)
            && let Some(at) = s.indexed_at()
        {
            self.timers.remove(&(at, conn));
        }
    }

    /// Puts `conn` in the timer index under its earliest deadline (lazily: see
    /// [`Session::reindex`]).
    fn reindex(&mut self, conn: ConnectionId) {
        if let Some(s) = self.conns.get_mut(&conn) {
            reindex(&mut self.timers, s);
        }
    }
}

/// Moves `s` in the timer index `timers` as [`Session::reindex`] says.
fn reindex(timers: &mut BTreeSet<(Instant, ConnectionId)>, s: &mut Session) {
    if let Some((old, new)) = s.reindex() {
        let conn = s.conn();
        if let Some(old) = old {
            timers.remove(&(old, conn));
        }
        if let Some(new) = new {
            timers.insert((new, conn));
        }
    }
}
