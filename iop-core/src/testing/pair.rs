//! [`Pair`]: a Control Plane and any number of Edge processes wired in memory.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::hash::Fnv1a;
use super::link::Link;
use super::monitor::Monitor;
use super::rng::SimRng;
use super::scripted::Peer;
use crate::Instant;
use crate::cp::{
    self, CommandError, CommandSpec, ConfigError, ConnectionId, ControlPlane, CpConfig, CpEvent,
    RequestId, StatusError,
};
use crate::edge::{self, Edge, EdgeConfig, EdgeEvent};
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
    pub(super) conn: Option<ConnectionId>,
    /// It dials a Control Plane the test scripts, not the pair's.
    pub(super) to_scripted_cp: bool,
}

/// A [`ControlPlane`] and N [`Edge`] processes (each with its own [`NodeRegistry`])
/// wired in memory on one thread, with a fake clock and a seeded network — the model
/// runtime: it follows the driving contract of both ends exactly, and checks the protocol's
/// §4–§5 invariants on everything it sees ([`Pair::monitor`]).
///
/// Time only moves through [`advance`](Pair::advance) (every timer fires at its own
/// deadline) or [`jump`](Pair::jump) (a suspended host: timers fire late). Faults:
/// [`disconnect`](Pair::disconnect), [`cut`](Pair::cut),
/// [`half_open`](Pair::half_open), [`partition`](Pair::partition),
/// [`crash`](Pair::crash), [`silence_cp`](Pair::silence_cp),
/// [`stale_close`](Pair::stale_close), [`restart_cp`](Pair::restart_cp), a second
/// process with an Edge id already in use ([`add_edge`](Pair::add_edge)), and scripted
/// fake peers that send what the test writes: an Edge
/// ([`connect_scripted`](Pair::connect_scripted)) and the Control Plane an Edge process
/// dials ([`add_edge_to_scripted_cp`](Pair::add_edge_to_scripted_cp)).
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
    pub(super) links: BTreeMap<ConnectionId, Link>,
    pub(super) rng: SimRng,
    pub(super) next_conn: u64,
    pub(super) cp_silent_until: Instant,
    pub(super) monitor: Monitor,
    pub(super) hash: Fnv1a,
    /// The scripted fake Edges, by connection (kept after their link is gone).
    pub(super) scripted: BTreeMap<ConnectionId, Peer>,
    /// The scripted fake Control Planes, by connection, of the processes that dial one.
    pub(super) scripted_cps: BTreeMap<ConnectionId, Peer>,
    /// Connections given an input since the CP's output was last pulled: their output
    /// needs no wake-up, every other connection's does.
    pub(super) inputs: BTreeSet<ConnectionId>,
}

impl Pair {
    /// A CP with `config` and no Edges yet; `seed` drives latencies and read splits.
    pub fn new(seed: u64, config: CpConfig, net: NetConfig) -> Result<Self, ConfigError> {
        Self::with_policy(seed, config, cp::EnrolmentPolicy::AcceptAny, net)
    }

    /// [`Pair::new`] with the CP's enrolment `policy`.
    pub fn with_policy(
        seed: u64,
        config: CpConfig,
        policy: cp::EnrolmentPolicy,
        net: NetConfig,
    ) -> Result<Self, ConfigError> {
        let directory = Box::new(cp::LocalDirectory::new(config.session_id_floor));
        Self::with_directory(seed, config, policy, directory, net)
    }

    /// [`Pair::with_policy`] with ownership claims put to `directory`
    /// ([`ControlPlane::with_directory`]).
    pub fn with_directory(
        seed: u64,
        config: CpConfig,
        policy: cp::EnrolmentPolicy,
        directory: Box<dyn cp::Directory>,
        net: NetConfig,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            cp: ControlPlane::with_directory(config, policy, directory)?,
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
            scripted: BTreeMap::new(),
            scripted_cps: BTreeMap::new(),
            inputs: BTreeSet::new(),
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
        self.push_edge(config, registry, false)
    }

    /// Starts an Edge process that dials the pair's CP or (`to_scripted_cp`) a
    /// scripted one; returns its index.
    pub(super) fn push_edge(
        &mut self,
        config: EdgeConfig,
        registry: NodeRegistry,
        to_scripted_cp: bool,
    ) -> Result<usize, edge::ConfigError> {
        let edge = Edge::new(config, registry)?;
        self.edges.push(EdgeProcess {
            edge,
            events: Vec::new(),
            alive: true,
            partitioned: false,
            conn: None,
            to_scripted_cp,
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
                to_scripted_cp: p.to_scripted_cp,
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
    ) -> Result<String, CommandError> {
        let id = self.cp.send_command(self.now, edge_id, spec)?;
        self.monitor.on_command_sent(edge_id, &id);
        Ok(id)
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

    pub(super) fn cp_silent(&self) -> bool {
        self.cp_silent_until > self.now
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let silent_end = self.cp_silent().then_some(self.cp_silent_until);
        let cp = if self.cp_silent() {
            None
        } else {
            self.cp.poll_timeout()
        };
        // An Edge's time to dial is one of its deadlines.
        let edges = self
            .edges
            .iter()
            .filter(|p| p.alive)
            .map(|p| p.edge.poll_timeout());
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

    pub(super) fn fire_timers(&mut self) {
        if !self.cp_silent() {
            self.cp.handle_timeout(self.now);
        }
        for p in self.edges.iter_mut().filter(|p| p.alive) {
            p.edge.handle_timeout(self.now);
        }
    }
}
