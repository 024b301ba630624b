//! [`Pair`]: a Control Plane and any number of Edge processes wired in memory.

use std::collections::BTreeMap;
use std::time::Duration;

use super::hash::Fnv1a;
use super::link::{Link, Segment};
use super::monitor::Monitor;
use super::rng::SimRng;
use crate::Instant;
use crate::cp::{
    self, CommandError, CommandSpec, ConnectionId, ControlPlane, CpConfig, CpConfigError, CpEvent,
    RequestId, StatusError,
};
use crate::edge::{self, Edge, EdgeConfig, EdgeEvent};
use crate::proto::PRE_HELLO_MAX_FRAME_LEN;
use crate::registry::NodeRegistry;

/// How the simulated network behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetConfig {
    /// Smallest one-way latency; each direction of each link draws its own.
    pub latency_min: Duration,
    /// Largest one-way latency.
    pub latency_max: Duration,
    /// Deliver each write as random smaller reads.
    pub split_reads: bool,
}

impl Default for NetConfig {
    /// Instant delivery in whole writes.
    fn default() -> Self {
        Self {
            latency_min: Duration::ZERO,
            latency_max: Duration::ZERO,
            split_reads: false,
        }
    }
}

/// Which end of a half-open link learns that it is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The Control Plane.
    Cp,
    /// The Edge process.
    Edge,
}

/// One Edge process: an [`Edge`] and what the harness knows of it.
#[derive(Debug)]
pub struct EdgeProcess {
    /// The state machine.
    pub edge: Edge<NodeRegistry>,
    /// Every event it emitted, in order.
    pub events: Vec<EdgeEvent>,
    /// False once crashed: it gets no more input.
    pub alive: bool,
    /// Its transport is refused (dials fail) while partitioned.
    pub partitioned: bool,
    conn: Option<ConnectionId>,
}

/// A [`ControlPlane`] and N [`Edge`] processes (each with its own [`NodeRegistry`])
/// wired in memory on one thread, with a fake clock and a seeded network — the model
/// runtime: it follows the driving contract of both ends exactly, and checks the SPEC
/// §4–§5 invariants on everything it sees ([`Pair::monitor`]).
///
/// Time only moves through [`advance`](Pair::advance) (every timer fires at its own
/// deadline) or [`jump`](Pair::jump) (a suspended host: timers fire late). Faults:
/// [`disconnect`](Pair::disconnect), [`cut`](Pair::cut),
/// [`half_open`](Pair::half_open), [`partition`](Pair::partition),
/// [`crash`](Pair::crash), [`silence_cp`](Pair::silence_cp),
/// [`stale_close`](Pair::stale_close), [`restart_cp`](Pair::restart_cp), and a second
/// process with an Edge id already in use ([`add_edge`](Pair::add_edge)).
///
/// Everything emitted — each side's events and every byte written — is hashed in
/// order ([`Pair::hash`]): two pairs given the same seed and the same calls end with
/// the same hash.
#[derive(Debug)]
pub struct Pair {
    /// The Control Plane.
    pub cp: ControlPlane,
    /// The Edge processes, by index.
    pub edges: Vec<EdgeProcess>,
    /// Simulated now.
    pub now: Instant,
    /// Every CP event, in order.
    pub cp_events: Vec<CpEvent>,
    /// The network.
    pub net: NetConfig,
    links: BTreeMap<ConnectionId, Link>,
    rng: SimRng,
    next_conn: u64,
    cp_silent_until: Instant,
    monitor: Monitor,
    hash: Fnv1a,
}

impl Pair {
    /// A CP with `config` and no Edges yet; `seed` drives latencies and read splits.
    pub fn new(seed: u64, config: CpConfig, net: NetConfig) -> Result<Self, CpConfigError> {
        Ok(Self {
            cp: ControlPlane::new(config, cp::EnrolmentPolicy::AcceptAny)?,
            edges: Vec::new(),
            now: Instant::ZERO,
            cp_events: Vec::new(),
            net,
            links: BTreeMap::new(),
            rng: SimRng::new(seed),
            next_conn: 0,
            cp_silent_until: Instant::ZERO,
            monitor: Monitor::new(),
            hash: Fnv1a::new(),
        })
    }

    /// Starts an Edge process; returns its index. It dials at once (its first
    /// [`Edge::poll_connect_at`]). A second process with an id already in use is a
    /// duplicate Edge.
    pub fn add_edge(
        &mut self,
        config: EdgeConfig,
        registry: NodeRegistry,
    ) -> Result<usize, edge::ConfigError> {
        let edge = Edge::new(config, registry)?;
        self.edges.push(EdgeProcess {
            edge,
            events: Vec::new(),
            alive: true,
            partitioned: false,
            conn: None,
        });
        Ok(self.edges.len() - 1)
    }

    /// Replaces process `index` with a fresh one (a restart: whatever it held is
    /// forgotten). The old process crashes first, its transport closing cleanly.
    pub fn restart_edge(
        &mut self,
        index: usize,
        config: EdgeConfig,
        registry: NodeRegistry,
    ) -> Result<(), edge::ConfigError> {
        let edge = Edge::new(config, registry)?;
        self.crash(index, true);
        if let Some(p) = self.edges.get_mut(index) {
            *p = EdgeProcess {
                edge,
                events: Vec::new(),
                alive: true,
                partitioned: p.partitioned,
                conn: None,
            };
        }
        Ok(())
    }

    /// The invariant monitor.
    pub fn monitor(&self) -> &Monitor {
        &self.monitor
    }

    /// The invariant monitor, to record checks of your own.
    pub fn monitor_mut(&mut self) -> &mut Monitor {
        &mut self.monitor
    }

    /// The hash of everything emitted so far.
    pub fn hash(&self) -> u64 {
        self.hash.finish()
    }

    /// The connection process `index` currently has, if any.
    pub fn conn_of(&self, index: usize) -> Option<ConnectionId> {
        self.edges.get(index).and_then(|p| p.conn)
    }

    /// Connections the harness still carries bytes for.
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// [`ControlPlane::request_status`], with the request tracked by the monitor.
    pub fn request_status(
        &mut self,
        edge_id: &str,
        node_ids: Vec<String>,
    ) -> Result<RequestId, StatusError> {
        let r = self.cp.request_status(self.now, edge_id, node_ids)?;
        self.monitor.on_status_issued(self.now.as_millis(), r);
        Ok(r)
    }

    /// [`ControlPlane::send_command`], with the command tracked by the monitor.
    pub fn send_command(
        &mut self,
        edge_id: &str,
        spec: CommandSpec,
        command_id: Option<String>,
    ) -> Result<String, CommandError> {
        let id = self.cp.send_command(self.now, edge_id, spec, command_id)?;
        self.monitor.on_command_sent(edge_id, &id);
        Ok(id)
    }

    // ----- faults --------------------------------------------------------------------

    /// The transport of process `index` fails: both ends are told at once.
    pub fn disconnect(&mut self, index: usize) {
        let Some(conn) = self.conn_of(index) else {
            return;
        };
        if let Some(link) = self.links.get_mut(&conn) {
            link.cut();
            if link.cp_open {
                link.cp_open = false;
                self.cp.handle_closed(self.now, conn);
            }
            link.edge_open = false;
        }
        if let Some(p) = self.edges.get_mut(index) {
            p.conn = None;
            p.edge.handle_closed(self.now);
        }
        self.pump();
    }

    /// The link of process `index` goes dark: every byte (and FIN) in flight or sent
    /// later is lost, and neither end is told; liveness must notice.
    pub fn cut(&mut self, index: usize) {
        if let Some(link) = self.conn_of(index).and_then(|c| self.links.get_mut(&c)) {
            link.cut();
        }
    }

    /// The link of process `index` becomes half-open: `told` learns it is closed, the
    /// other end does not, and nothing more crosses it.
    pub fn half_open(&mut self, index: usize, told: Side) {
        let Some(conn) = self.conn_of(index) else {
            return;
        };
        self.cut(index);
        match told {
            Side::Cp => {
                if let Some(link) = self.links.get_mut(&conn)
                    && link.cp_open
                {
                    link.cp_open = false;
                    self.cp.handle_closed(self.now, conn);
                }
            }
            Side::Edge => {
                if let Some(link) = self.links.get_mut(&conn) {
                    link.edge_open = false;
                }
                if let Some(p) = self.edges.get_mut(index) {
                    p.conn = None;
                    p.edge.handle_closed(self.now);
                }
            }
        }
        self.pump();
    }

    /// Partitions process `index` from the CP (its link is cut, its dials fail) or
    /// heals the partition.
    pub fn partition(&mut self, index: usize, on: bool) {
        if on {
            self.cut(index);
        }
        if let Some(p) = self.edges.get_mut(index) {
            p.partitioned = on;
        }
    }

    /// Process `index` dies. With `fin` its OS closes the socket (the CP hears of it
    /// after the latency); without, the CP's end stays half-open.
    pub fn crash(&mut self, index: usize, fin: bool) {
        let now = self.now;
        let Some(p) = self.edges.get_mut(index) else {
            return;
        };
        p.alive = false;
        if let Some(link) = p.conn.take().and_then(|c| self.links.get_mut(&c)) {
            link.edge_open = false;
            if fin {
                link.send_to_cp(now, Segment::Fin);
            } else {
                link.cut();
            }
        }
    }

    /// The CP's host stalls for `d`: it reads, writes and handles timers only after.
    pub fn silence_cp(&mut self, d: Duration) {
        self.cp_silent_until = self.cp_silent_until.max(self.now + d);
    }

    /// The runtime reports a close for a connection the CP already forgot (or never
    /// had): it must change nothing.
    pub fn stale_close(&mut self) {
        let live: Vec<ConnectionId> = self.links.keys().copied().collect();
        let stale = (1..=self.next_conn)
            .map(ConnectionId)
            .find(|c| !live.contains(c))
            .unwrap_or(ConnectionId(u64::MAX));
        self.cp.handle_closed(self.now, stale);
        self.pump();
    }

    /// The CP restarts with `config` (its `session_id_floor` should exceed every
    /// session id issued so far): every connection drops and the new CP knows nothing.
    pub fn restart_cp(&mut self, config: CpConfig) -> Result<(), CpConfigError> {
        self.cp = ControlPlane::new(config, cp::EnrolmentPolicy::AcceptAny)?;
        let conns: Vec<ConnectionId> = self.links.keys().copied().collect();
        for conn in conns {
            if let Some(index) = self.links.get(&conn).map(|l| l.edge)
                && let Some(p) = self.edges.get_mut(index)
                && p.conn == Some(conn)
            {
                p.conn = None;
                p.edge.handle_closed(self.now);
            }
        }
        self.links.clear();
        self.monitor.forget_cp();
        self.pump();
        Ok(())
    }

    // ----- time ----------------------------------------------------------------------

    /// Lets `d` pass, firing every timer, dial and delivery at its own time.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.pump();
            match self.next_wakeup() {
                Some(at) if at <= end => {
                    self.now = self.now.max(at);
                    self.fire_timers();
                }
                _ => break,
            }
        }
        self.now = end;
        self.fire_timers();
        self.pump();
    }

    /// The clock jumps `d` forward at once (a suspended host): timers, dials and
    /// deliveries that fell due meanwhile all happen late, at the new time.
    pub fn jump(&mut self, d: Duration) {
        self.now = self.now + d;
        self.fire_timers();
        self.pump();
    }

    fn cp_silent(&self) -> bool {
        self.cp_silent_until > self.now
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let silent_end = self.cp_silent().then_some(self.cp_silent_until);
        let cp = if self.cp_silent() {
            None
        } else {
            self.cp.poll_timeout()
        };
        let edges = self.edges.iter().filter(|p| p.alive).flat_map(|p| {
            let dial = if p.conn.is_none() {
                p.edge.poll_connect_at()
            } else {
                None
            };
            [p.edge.poll_timeout(), dial]
        });
        let links = self.links.values().flat_map(|l| {
            let to_cp = l.to_cp.front().map(|(t, _)| (*t).max(self.cp_silent_until));
            let to_edge = l.to_edge.front().map(|(t, _)| *t);
            [to_cp, to_edge]
        });
        [cp, silent_end]
            .into_iter()
            .chain(edges)
            .chain(links)
            .flatten()
            .min()
    }

    fn fire_timers(&mut self) {
        if !self.cp_silent() {
            self.cp.handle_timeout(self.now);
        }
        for p in self.edges.iter_mut().filter(|p| p.alive) {
            p.edge.handle_timeout(self.now);
        }
    }

    // ----- the driver loop -----------------------------------------------------------

    /// Drives both ends at the current time until nothing moves: dials, writes,
    /// deliveries that are due, and events.
    pub fn pump(&mut self) {
        loop {
            let mut moved = self.dial();
            moved |= self.edge_writes();
            moved |= self.cp_writes();
            moved |= self.deliver();
            moved |= self.collect_events();
            self.links.retain(|_, l| !l.is_done());
            if !moved {
                break;
            }
        }
        self.cross_check();
    }

    fn dial(&mut self) -> bool {
        let mut moved = false;
        for index in 0..self.edges.len() {
            let Some(p) = self.edges.get_mut(index) else {
                continue;
            };
            let due = p.alive
                && p.conn.is_none()
                && p.edge.poll_connect_at().is_some_and(|at| at <= self.now);
            if !due {
                continue;
            }
            moved = true;
            if p.partitioned {
                p.edge.handle_connect_failed(self.now);
                continue;
            }
            self.next_conn += 1;
            let conn = ConnectionId(self.next_conn);
            if self.cp.handle_connect(self.now, conn).is_err()
                || p.edge.handle_connected(self.now).is_err()
            {
                self.monitor
                    .fail(self.now.as_millis(), format!("dial of {conn:?} refused"));
                p.edge.handle_connect_failed(self.now);
                continue;
            }
            p.conn = Some(conn);
            let (lo, hi) = (
                self.net.latency_min.as_millis() as u64,
                self.net.latency_max.as_millis() as u64,
            );
            let up = Duration::from_millis(self.rng.range(lo, hi));
            let down = Duration::from_millis(self.rng.range(lo, hi));
            self.links.insert(conn, Link::new(index, up, down));
        }
        moved
    }

    fn edge_writes(&mut self) -> bool {
        let mut moved = false;
        let at_ms = self.now.as_millis();
        let limit = self.cp.config().max_frame_len;
        for index in 0..self.edges.len() {
            let Some(p) = self.edges.get_mut(index) else {
                continue;
            };
            let Some(conn) = p.conn.filter(|_| p.alive) else {
                continue;
            };
            let mut buf = Vec::new();
            let mut close = false;
            loop {
                match p.edge.poll_transmit(&mut buf) {
                    edge::Transmit::Bytes(_) => {}
                    edge::Transmit::Idle => break,
                    edge::Transmit::Close => {
                        close = true;
                        break;
                    }
                }
            }
            if close {
                p.conn = None;
                p.edge.handle_closed(self.now);
            }
            let Some(link) = self.links.get_mut(&conn) else {
                continue;
            };
            if !buf.is_empty() {
                moved = true;
                self.hash.record(b'e', &buf);
                let first = link.tap_to_cp.frames_seen() == 0;
                for frame in link.tap_to_cp.feed(&buf) {
                    let limit = if first {
                        PRE_HELLO_MAX_FRAME_LEN
                    } else {
                        limit
                    };
                    self.monitor.on_frame(
                        at_ms,
                        conn,
                        false,
                        frame.len,
                        limit,
                        frame.envelope.as_ref(),
                    );
                }
                link.send_to_cp(self.now, Segment::Data(buf));
            }
            if close {
                moved = true;
                link.edge_open = false;
                link.send_to_cp(self.now, Segment::Fin);
            }
        }
        moved
    }

    fn cp_writes(&mut self) -> bool {
        if self.cp_silent() {
            return false;
        }
        while self.cp.poll_wakeup().is_some() {}
        let mut moved = false;
        let at_ms = self.now.as_millis();
        for (conn, link) in self.links.iter_mut().filter(|(_, l)| l.cp_open) {
            let mut buf = Vec::new();
            let mut close = false;
            loop {
                match self.cp.poll_transmit(*conn, &mut buf) {
                    cp::Transmit::Bytes(_) => {}
                    cp::Transmit::Idle => break,
                    cp::Transmit::Close => {
                        close = true;
                        break;
                    }
                }
            }
            if !buf.is_empty() {
                moved = true;
                self.hash.record(b'c', &buf);
                let limit = crate::proto::DEFAULT_MAX_FRAME_LEN;
                for frame in link.tap_to_edge.feed(&buf) {
                    self.monitor.on_frame(
                        at_ms,
                        *conn,
                        true,
                        frame.len,
                        limit,
                        frame.envelope.as_ref(),
                    );
                }
                link.send_to_edge(self.now, Segment::Data(buf));
            }
            if close {
                moved = true;
                link.cp_open = false;
                link.send_to_edge(self.now, Segment::Fin);
            }
        }
        moved
    }

    fn deliver(&mut self) -> bool {
        let mut moved = false;
        let now = self.now;
        let cp_silent = self.cp_silent();
        for (conn, link) in self.links.iter_mut() {
            while !cp_silent && link.to_cp.front().is_some_and(|(t, _)| *t <= now) {
                let Some((_, segment)) = link.to_cp.pop_front() else {
                    break;
                };
                moved = true;
                if !link.cp_open {
                    continue;
                }
                match segment {
                    Segment::Data(bytes) => {
                        for piece in split(&mut self.rng, self.net.split_reads, &bytes) {
                            self.cp.handle_bytes(now, *conn, piece);
                        }
                    }
                    Segment::Fin => {
                        link.cp_open = false;
                        self.cp.handle_closed(now, *conn);
                    }
                }
            }
            while link.to_edge.front().is_some_and(|(t, _)| *t <= now) {
                let Some((_, segment)) = link.to_edge.pop_front() else {
                    break;
                };
                moved = true;
                let Some(p) = self.edges.get_mut(link.edge) else {
                    continue;
                };
                if !link.edge_open || !p.alive || p.conn != Some(*conn) {
                    continue;
                }
                match segment {
                    Segment::Data(bytes) => {
                        for piece in split(&mut self.rng, self.net.split_reads, &bytes) {
                            p.edge.handle_bytes(now, piece);
                        }
                    }
                    Segment::Fin => {
                        link.edge_open = false;
                        p.conn = None;
                        p.edge.handle_closed(now);
                    }
                }
            }
        }
        moved
    }

    fn collect_events(&mut self) -> bool {
        let mut moved = false;
        let at_ms = self.now.as_millis();
        while let Some(e) = self.cp.poll_event() {
            moved = true;
            self.hash.record(b'C', format!("{at_ms} {e:?}").as_bytes());
            self.monitor.on_cp_event(at_ms, &e);
            self.cp_events.push(e);
        }
        for (index, p) in self.edges.iter_mut().enumerate() {
            while let Some(e) = p.edge.poll_event() {
                moved = true;
                self.hash
                    .record(b'E', format!("{at_ms} {index} {e:?}").as_bytes());
                self.monitor.on_edge_event(at_ms, index, &e);
                p.events.push(e);
            }
        }
        moved
    }

    /// The monitor's view of live sessions must be the CP's own.
    fn cross_check(&mut self) {
        let at_ms = self.now.as_millis();
        let mut problems = Vec::new();
        for (edge_id, (conn, _)) in self.monitor.live_sessions() {
            if self.cp.live_conn(edge_id) != Some(*conn) {
                problems.push(format!(
                    "{edge_id}: CP's live connection is {:?}, events say {conn:?}",
                    self.cp.live_conn(edge_id)
                ));
            }
        }
        let (cp_errors, _) = self.monitor.protocol_errors();
        if self.cp.stats().protocol_errors != cp_errors {
            problems.push(format!(
                "CP counts {} protocol errors, its events {cp_errors}",
                self.cp.stats().protocol_errors
            ));
        }
        for p in problems {
            self.monitor.fail(at_ms, p);
        }
    }
}

/// `bytes` as one read, or as random smaller reads.
fn split<'a>(rng: &mut SimRng, split_reads: bool, bytes: &'a [u8]) -> Vec<&'a [u8]> {
    if !split_reads || bytes.len() < 2 {
        return vec![bytes];
    }
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let take = (rng.range(1, rest.len() as u64) as usize).min(rest.len());
        let (a, b) = rest.split_at(take);
        out.push(a);
        rest = b;
    }
    out
}
