//! `registry_ops`: structured sequences of [`NodeRegistry`] operations, checked
//! after every step against a small reference model and the PROTOCOL.md §5 rules.
//!
//! The input is an [`Input`] derived with `arbitrary`: an event-queue bound and a
//! list of [`Op`]s over a tiny universe of ids (three valid node ids and one invalid,
//! three valid provider ids and one invalid), so that the fuzzer hits collisions,
//! duplicates and stale handles all the time.
//!
//! After every op ([`check`]):
//! - the snapshot lists exactly the configured nodes (never drops one), sorted, with
//!   the model's state and generation; `connected` ⇔ READY;
//! - every provider of a node that is not READY, or marked offline, reports
//!   UNAVAILABLE/OFFLINE, all six numbers zero and not eligible; others report the
//!   model's leases and queue pressure, DEGRADED when unhealthy or drained,
//!   eligibility exactly per §5.2, `in_flight ≤ capacity`,
//!   `long_in_flight ≤ min(long_capacity, in_flight)`;
//! - the revision never decreases: +1 for a call that changed something, unchanged
//!   for a rejected, stale, duplicate or no-op call;
//! - events: exactly the model's (CONFIGURED/REMOVED/READY/DISCONNECTED, in order,
//!   the queue bound respected and drops counted); stale closes, duplicates and
//!   pending abandons emit none;
//! - `encode_snapshot` gives the bytes of `snapshot`; a budgeted snapshot is a
//!   complete prefix within the budget, `truncated` exactly when nodes were left out.

mod model;

use arbitrary::Arbitrary;
use iop_core::proto::{Message, NodeEventKind, NodeState, ProviderHealth, ProviderStatus};
use iop_core::registry::{
    AdmitError, CloseOutcome, ConfigureOutcome, ConnectError, DequeueOutcome, EventSequencer,
    Generation, Lease, LeaseKind, NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig,
    QueueTicket, ReadyOutcome, ReleaseOutcome, RemoveOutcome, Target, TargetLevel, resolve_target,
};

use model::{Model, NodeModel, ProviderModel};

/// Node ids the ops pick from; the last breaks the id grammar.
const NODES: [&str; 4] = ["n0", "n1", "n2", "bad node"];
/// Provider ids the ops pick from; the last breaks the id grammar.
const PROVIDERS: [&str; 4] = ["p0", "p1", "p2", "p/3"];
const EDGE_ID: &str = "edge-1";

/// A whole fuzz input.
#[derive(Debug, Arbitrary)]
pub struct Input {
    /// Bound of the registry's event queue (`% 8`, so that events get dropped).
    pub event_capacity: u8,
    /// The calls, in order (at most 256 are run).
    pub ops: Vec<Op>,
}

/// A provider in a `Configure` op.
#[derive(Debug, Arbitrary)]
pub struct ProviderSpec {
    /// Index into the provider ids.
    pub id: u8,
    /// CLI, API or local inference (`% 3`).
    pub category: u8,
    /// Capacity (`% 4`).
    pub capacity: u8,
    /// Long-context capacity (`% 4`; above capacity is a config error).
    pub long_capacity: u8,
}

/// One registry call (or a test-harness step).
#[derive(Debug, Arbitrary)]
pub enum Op {
    /// `configure` a node with these providers and maybe a label.
    Configure {
        node: u8,
        providers: Vec<ProviderSpec>,
        label: Option<u8>,
    },
    /// `remove` a node.
    Remove { node: u8 },
    /// `connect` a node.
    Connect { node: u8 },
    /// `mark_ready` with a generation handed out earlier (or a made-up one).
    MarkReady { node: u8, generation: u8 },
    /// `close` with a generation handed out earlier (or a made-up one).
    Close { node: u8, generation: u8 },
    /// `admit` a lease.
    Admit { node: u8, provider: u8, long: bool },
    /// `release` one of the leases held.
    Release { lease: u8 },
    /// `enqueue` a request.
    Enqueue {
        long: bool,
        candidates: Vec<(u8, u8)>,
    },
    /// `dequeue` a ticket handed out earlier (or a made-up one).
    Dequeue { ticket: u8 },
    /// `set_provider_online`.
    SetOnline {
        node: u8,
        provider: u8,
        online: bool,
    },
    /// `set_provider_healthy`.
    SetHealthy {
        node: u8,
        provider: u8,
        healthy: bool,
    },
    /// `drain` or `resume`.
    Drain { node: u8, drained: bool },
    /// A snapshot of some nodes under a byte budget.
    Snapshot { nodes: Vec<u8>, budget: u16 },
    /// Pull every queued event (they pile up, and overflow, in between).
    DrainEvents,
    /// `resolve_target` on a fuzzer-chosen selector.
    Resolve { selector: String, node_level: bool },
    /// Wall-clock time passes.
    Advance { ms: u16 },
}

fn node(i: u8) -> &'static str {
    NODES[usize::from(i) % NODES.len()]
}

fn provider(i: u8) -> &'static str {
    PROVIDERS[usize::from(i) % PROVIDERS.len()]
}

fn kind(long: bool) -> LeaseKind {
    if long {
        LeaseKind::LongContext
    } else {
        LeaseKind::Normal
    }
}

/// Everything one run holds besides the registry and the model.
struct Harness {
    reg: NodeRegistry,
    model: Model,
    now: u64,
    /// Every generation handed out, to refer to old ones.
    generations: Vec<Generation>,
    leases: Vec<Lease>,
    tickets: Vec<QueueTicket>,
}

/// Whether an op should have bumped the revision.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    Bump,
    None,
}

/// Runs the target on one input.
pub fn run(input: Input) {
    let capacity = usize::from(input.event_capacity % 8);
    let mut h = Harness {
        reg: NodeRegistry::with_event_capacity(capacity),
        model: Model::new(capacity),
        now: 1_000,
        generations: Vec::new(),
        leases: Vec::new(),
        tickets: Vec::new(),
    };
    for op in input.ops.into_iter().take(256) {
        let before = h.reg.revision();
        let change = h.apply(op);
        let after = h.reg.revision();
        match change {
            Change::Bump => assert_eq!(after, before + 1, "a change must bump the revision once"),
            Change::None => assert_eq!(after, before, "a no-op changed the revision"),
        }
        check(&h.reg, &h.model);
    }
    h.drain_events();
}

impl Harness {
    fn generation(&self, i: u8) -> Generation {
        match self.generations.len() {
            0 => Generation::from_raw(u64::from(i % 4)),
            n => match self.generations.get(usize::from(i) % (n + 2)) {
                Some(g) => *g,
                // Never issued: zero, or past the last one.
                None if i.is_multiple_of(2) => Generation::NONE,
                None => Generation::from_raw(u64::from(i) + 1_000),
            },
        }
    }

    fn apply(&mut self, op: Op) -> Change {
        match op {
            Op::Configure {
                node: n,
                providers,
                label,
            } => self.configure(node(n), &providers, label),
            Op::Remove { node: n } => {
                let id = node(n);
                let outcome = self.reg.remove(id, self.now);
                match self.model.nodes.remove(id) {
                    Some(removed) => {
                        let leases = self.model.drop_leases(id);
                        assert_eq!(
                            outcome,
                            RemoveOutcome::Removed {
                                released_leases: leases
                            }
                        );
                        self.model.expect_event(
                            id,
                            NodeEventKind::NodeRemoved,
                            removed.generation,
                            self.now,
                            "removed",
                        );
                        Change::Bump
                    }
                    None => {
                        assert_eq!(outcome, RemoveOutcome::UnknownNode);
                        Change::None
                    }
                }
            }
            Op::Connect { node: n } => self.connect(node(n)),
            Op::MarkReady {
                node: n,
                generation,
            } => {
                let (id, generation) = (node(n), self.generation(generation));
                let outcome = self.reg.mark_ready(id, generation, self.now);
                let expected = match self.model.nodes.get_mut(id) {
                    None => ReadyOutcome::UnknownNode,
                    Some(m) if m.generation != generation.get() => ReadyOutcome::Stale,
                    Some(m) => match m.state {
                        NodeState::Pending => {
                            m.state = NodeState::Ready;
                            m.before_pending = None;
                            ReadyOutcome::Ready
                        }
                        NodeState::Ready => ReadyOutcome::AlreadyReady,
                        _ => ReadyOutcome::Stale,
                    },
                };
                assert_eq!(outcome, expected, "mark_ready({id}, {generation})");
                if expected == ReadyOutcome::Ready {
                    self.model.expect_event(
                        id,
                        NodeEventKind::NodeReady,
                        generation.get(),
                        self.now,
                        "ready",
                    );
                    Change::Bump
                } else {
                    Change::None
                }
            }
            Op::Close {
                node: n,
                generation,
            } => self.close(node(n), self.generation(generation)),
            Op::Admit {
                node: n,
                provider: p,
                long,
            } => self.admit(node(n), provider(p), kind(long)),
            Op::Release { lease } => {
                if self.leases.is_empty() {
                    return Change::None;
                }
                let lease = self.leases.remove(usize::from(lease) % self.leases.len());
                let live = self.model.take_lease(&lease);
                let outcome = self.reg.release(lease);
                if live {
                    assert_eq!(outcome, ReleaseOutcome::Released);
                    Change::Bump
                } else {
                    assert_eq!(outcome, ReleaseOutcome::Stale);
                    Change::None
                }
            }
            Op::Enqueue { long, candidates } => {
                let candidates: Vec<_> = candidates
                    .iter()
                    .take(8)
                    .map(|&(n, p)| iop_core::registry::Candidate::new(node(n), provider(p)))
                    .collect();
                let mut wanted: Vec<(String, String)> = candidates
                    .iter()
                    .map(|c| (c.node_id.clone(), c.provider_id.clone()))
                    .collect();
                wanted.sort();
                wanted.dedup();
                match self.reg.enqueue(kind(long), candidates) {
                    Ok(ticket) => {
                        assert!(!wanted.is_empty(), "enqueued a request with no candidates");
                        self.model.queue.insert(ticket.get(), (long, wanted));
                        self.tickets.push(ticket);
                        Change::Bump
                    }
                    Err(err) => {
                        assert!(wanted.is_empty(), "enqueue refused: {err}");
                        Change::None
                    }
                }
            }
            Op::Dequeue { ticket } => {
                let Some(&t) = self
                    .tickets
                    .get(usize::from(ticket) % self.tickets.len().max(1))
                else {
                    return Change::None;
                };
                let outcome = self.reg.dequeue(t);
                if self.model.queue.remove(&t.get()).is_some() {
                    assert_eq!(outcome, DequeueOutcome::Dequeued);
                    Change::Bump
                } else {
                    assert_eq!(outcome, DequeueOutcome::UnknownTicket);
                    Change::None
                }
            }
            Op::SetOnline {
                node: n,
                provider: p,
                online,
            } => {
                let (id, pid) = (node(n), provider(p));
                let result = self.reg.set_provider_online(id, pid, online);
                self.mark(id, pid, result, |m| {
                    let changed = m.offline == online;
                    m.offline = !online;
                    changed
                })
            }
            Op::SetHealthy {
                node: n,
                provider: p,
                healthy,
            } => {
                let (id, pid) = (node(n), provider(p));
                let result = self.reg.set_provider_healthy(id, pid, healthy);
                self.mark(id, pid, result, |m| {
                    let changed = m.unhealthy == healthy;
                    m.unhealthy = !healthy;
                    changed
                })
            }
            Op::Drain { node: n, drained } => {
                let id = node(n);
                let result = if drained {
                    self.reg.drain(id)
                } else {
                    self.reg.resume(id)
                };
                match self.model.nodes.get_mut(id) {
                    None => {
                        assert!(result.is_err());
                        Change::None
                    }
                    Some(m) => {
                        let changed = m.drained != drained;
                        m.drained = drained;
                        assert_eq!(result, Ok(changed));
                        if changed { Change::Bump } else { Change::None }
                    }
                }
            }
            Op::Snapshot { nodes, budget } => {
                let ids: Vec<&str> = nodes.iter().take(6).map(|&n| node(n)).collect();
                check_budgeted_snapshot(&self.reg, &ids, usize::from(budget));
                Change::None
            }
            Op::DrainEvents => {
                self.drain_events();
                Change::None
            }
            Op::Resolve {
                selector,
                node_level,
            } => {
                self.resolve(&selector, node_level);
                Change::None
            }
            Op::Advance { ms } => {
                self.now += u64::from(ms);
                Change::None
            }
        }
    }

    fn configure(&mut self, id: &str, specs: &[ProviderSpec], label: Option<u8>) -> Change {
        let mut config = NodeConfig::new(id);
        if let Some(l) = label {
            config = config.with_label("zone", ["a", "b"][usize::from(l % 2)]);
        }
        for s in specs.iter().take(4) {
            let category = match s.category % 3 {
                0 => ProviderCategory::Cli,
                1 => ProviderCategory::Api,
                _ => ProviderCategory::LocalInference,
            };
            config = config.with_provider(ProviderConfig::new(
                provider(s.id),
                category,
                u32::from(s.capacity % 4),
                u32::from(s.long_capacity % 4),
            ));
        }
        let valid = ids_valid(&config);
        let result = self.reg.configure(config.clone(), self.now);
        let Some(new) = (if valid {
            NodeModel::sorted(&config)
        } else {
            None
        }) else {
            assert!(result.is_err(), "accepted an invalid config: {config:?}");
            return Change::None;
        };
        let existing = self.model.nodes.get(id);
        if existing.is_some_and(|m| m.config == new) {
            assert_eq!(result, Ok(ConfigureOutcome::Unchanged));
            return Change::None;
        }
        let busy = existing.is_some_and(|m| self.model.would_drop_leases(id, m, &new));
        if busy {
            assert!(result.is_err(), "dropped a provider's leases: {result:?}");
            return Change::None;
        }
        let generation = existing.map_or(0, |m| m.generation);
        let (outcome, reason) = match existing {
            None => (ConfigureOutcome::Added, "added"),
            Some(_) => (ConfigureOutcome::Updated, "updated"),
        };
        assert_eq!(result, Ok(outcome));
        self.model.configure(id, new);
        self.model.expect_event(
            id,
            NodeEventKind::NodeConfigured,
            generation,
            self.now,
            reason,
        );
        Change::Bump
    }

    fn connect(&mut self, id: &str) -> Change {
        let result = self.reg.connect(id, self.now);
        let Some(m) = self.model.nodes.get_mut(id) else {
            assert_eq!(result, Err(ConnectError::UnknownNode));
            return Change::None;
        };
        if matches!(m.state, NodeState::Pending | NodeState::Ready) {
            assert_eq!(
                result,
                Err(ConnectError::Duplicate {
                    owner: Generation::from_raw(m.generation),
                    state: m.state,
                }),
                "a duplicate must be rejected without touching the owner"
            );
            return Change::None;
        }
        let Ok(generation) = result else {
            panic!("connect refused: {result:?}");
        };
        assert!(
            generation.get() > self.model.last_generation,
            "generations must strictly increase"
        );
        self.model.last_generation = generation.get();
        m.before_pending = Some((m.state, m.generation));
        m.state = NodeState::Pending;
        m.generation = generation.get();
        self.generations.push(generation);
        Change::Bump
    }

    fn close(&mut self, id: &str, generation: Generation) -> Change {
        let outcome = self.reg.close(id, generation, "closed", self.now);
        let Some(m) = self.model.nodes.get_mut(id) else {
            assert_eq!(outcome, CloseOutcome::UnknownNode);
            return Change::None;
        };
        let live = matches!(m.state, NodeState::Pending | NodeState::Ready);
        if m.generation != generation.get() || !live {
            assert_eq!(outcome, CloseOutcome::Stale, "close({id}, {generation})");
            return Change::None;
        }
        if m.state == NodeState::Pending {
            let (state, before) = m
                .before_pending
                .take()
                .unwrap_or((NodeState::Configured, 0));
            m.state = state;
            m.generation = before;
            assert_eq!(outcome, CloseOutcome::PendingAbandoned { restored: state });
            return Change::Bump;
        }
        m.state = NodeState::Disconnected;
        let released = self.model.drop_leases(id);
        assert_eq!(
            outcome,
            CloseOutcome::Disconnected {
                released_leases: released
            }
        );
        self.model.expect_event(
            id,
            NodeEventKind::NodeDisconnected,
            generation.get(),
            self.now,
            "closed",
        );
        Change::Bump
    }

    fn admit(&mut self, id: &str, pid: &str, kind: LeaseKind) -> Change {
        let result = self.reg.admit(id, pid, kind);
        let expected = self.model.admission(id, pid, kind);
        match result {
            Ok(lease) => {
                assert_eq!(expected, Ok(()), "admitted against §5.2");
                self.model.add_lease(&lease);
                self.leases.push(lease);
                Change::Bump
            }
            Err(err) => {
                assert_eq!(Err(err), expected, "admit({id}, {pid}, {kind:?})");
                Change::None
            }
        }
    }

    fn mark(
        &mut self,
        id: &str,
        pid: &str,
        result: Result<bool, iop_core::registry::ProviderRefError>,
        set: impl FnOnce(&mut ProviderModel) -> bool,
    ) -> Change {
        match self
            .model
            .nodes
            .get_mut(id)
            .and_then(|m| m.providers.get_mut(pid))
        {
            None => {
                assert!(result.is_err());
                Change::None
            }
            Some(p) => {
                let changed = set(p);
                assert_eq!(result, Ok(changed));
                if changed { Change::Bump } else { Change::None }
            }
        }
    }

    fn drain_events(&mut self) {
        let mut polled = Vec::new();
        while let Some(event) = self.reg.poll_event() {
            polled.push(event);
        }
        let dropped = self.reg.take_dropped_events();
        let expected = std::mem::take(&mut self.model.events);
        let kept = expected.len().min(self.model.event_capacity);
        assert_eq!(dropped, (expected.len() - kept) as u64, "dropped events");
        let got: Vec<_> = polled
            .iter()
            .map(|e| {
                (
                    e.node_id.clone(),
                    e.kind.to_wire(),
                    e.generation.get(),
                    e.occurred_at_unix_ms,
                    e.reason.clone(),
                )
            })
            .collect();
        let want: Vec<_> = expected
            .iter()
            .take(kept)
            .map(|e| {
                (
                    e.node_id.clone(),
                    e.kind,
                    e.generation,
                    e.at,
                    e.reason.to_owned(),
                )
            })
            .collect();
        assert_eq!(got, want, "events");

        // Numbered for the wire, drops leave gaps: every number used exactly once.
        let mut sequencer = EventSequencer::new();
        for (i, event) in polled.iter().enumerate() {
            assert_eq!(sequencer.next(EDGE_ID, event).sequence, i as u64 + 1);
        }
        for _ in 0..dropped {
            sequencer.skip();
        }
        assert_eq!(sequencer.peek(), polled.len() as u64 + dropped + 1);
    }

    fn resolve(&self, selector: &str, node_level: bool) {
        let level = if node_level {
            TargetLevel::Node
        } else {
            TargetLevel::Edge
        };
        match resolve_target(&self.reg, selector, level) {
            Ok(Target::Edge) => assert_eq!(level, TargetLevel::Edge),
            Ok(Target::Nodes(nodes)) => {
                assert_eq!(level, TargetLevel::Node);
                assert!(!nodes.is_empty(), "resolved to no nodes");
                assert!(nodes.windows(2).all(|w| w[0] < w[1]), "unsorted");
                for n in &nodes {
                    assert!(self.model.nodes.contains_key(n), "resolved to unknown {n}");
                }
            }
            Ok(Target::Provider {
                node_id,
                provider_id,
            }) => {
                assert_eq!(level, TargetLevel::Node);
                let m = self.model.nodes.get(&node_id);
                assert!(m.is_some_and(|m| m.providers.contains_key(&provider_id)));
            }
            Err(err) => {
                let _ = err.reject_reason();
            }
        }
    }
}

fn ids_valid(config: &NodeConfig) -> bool {
    iop_core::ids::is_valid_id(&config.node_id)
        && config.providers.iter().all(|p| {
            iop_core::ids::is_valid_id(&p.provider_id) && p.long_context_capacity <= p.capacity
        })
}

/// The PROTOCOL.md §5 invariants, on the full snapshot, against the model.
fn check(reg: &NodeRegistry, model: &Model) {
    let full = reg.snapshot(EDGE_ID, 7, &[] as &[&str], usize::MAX);
    assert!(!full.truncated);
    assert_eq!(full.registry_revision, reg.revision());
    let ids: Vec<&str> = full.nodes.iter().map(|n| n.node_id.as_str()).collect();
    let want: Vec<&str> = model.nodes.keys().map(String::as_str).collect();
    assert_eq!(
        ids, want,
        "configured nodes are never dropped, sorted by id"
    );

    for node in &full.nodes {
        let m = &model.nodes[&node.node_id];
        let ready = m.state == NodeState::Ready;
        assert_eq!(node.state, m.state as i32, "{}: state", node.node_id);
        assert_eq!(
            node.generation, m.generation,
            "{}: generation",
            node.node_id
        );
        assert_eq!(node.connected, ready, "connected ⇔ READY");
        assert_eq!(
            reg.node_state(&node.node_id),
            Some((m.state, Generation::from_raw(m.generation)))
        );
        let pids: Vec<&str> = node
            .provider_snapshots
            .iter()
            .map(|p| p.provider_id.as_str())
            .collect();
        let want: Vec<&str> = m.providers.keys().map(String::as_str).collect();
        assert_eq!(pids, want, "{}: providers", node.node_id);
        for p in &node.provider_snapshots {
            let pm = &m.providers[&p.provider_id];
            let numbers = [
                p.capacity,
                p.in_flight,
                p.queued,
                p.long_context_capacity,
                p.long_context_in_flight,
                p.long_context_queued,
            ];
            if !ready || pm.offline {
                assert_eq!(p.status, ProviderStatus::Unavailable as i32);
                assert_eq!(p.health, ProviderHealth::Offline as i32);
                assert_eq!(numbers, [0; 6], "offline provider reports zeros");
                assert!(!p.admission_eligible);
                continue;
            }
            let (leases, long_leases) = model.leases_of(&node.node_id, &p.provider_id);
            let (queued, long_queued) = model.queued_of(&node.node_id, &p.provider_id);
            assert_eq!(
                numbers,
                [
                    pm.capacity,
                    leases,
                    queued,
                    pm.long_capacity,
                    long_leases,
                    long_queued
                ],
                "{}/{}: numbers",
                node.node_id,
                p.provider_id
            );
            assert!(p.in_flight <= p.capacity);
            assert!(p.long_context_in_flight <= p.long_context_capacity.min(p.in_flight));
            assert!(p.long_context_queued <= p.queued);
            let degraded = pm.unhealthy || m.drained;
            let status = if degraded {
                ProviderStatus::Degraded
            } else {
                ProviderStatus::Available
            };
            let health = if pm.unhealthy {
                ProviderHealth::Unhealthy
            } else {
                ProviderHealth::Healthy
            };
            assert_eq!((p.status, p.health), (status as i32, health as i32));
            let eligible = !m.drained && !pm.unhealthy && p.in_flight < p.capacity;
            assert_eq!(p.admission_eligible, eligible, "admission_eligible");
        }
    }

    let mut encoded = Vec::new();
    let _ = reg.encode_snapshot(EDGE_ID, 7, &[] as &[&str], usize::MAX, &mut encoded);
    assert_eq!(encoded, full.encode_to_vec(), "encode_snapshot ≠ snapshot");
}

/// A snapshot of `ids` within `budget` bytes: a complete prefix of the unbudgeted one.
fn check_budgeted_snapshot(reg: &NodeRegistry, ids: &[&str], budget: usize) {
    let all = reg.snapshot(EDGE_ID, 7, ids, usize::MAX);
    let some = reg.snapshot(EDGE_ID, 7, ids, budget);
    assert!(
        some.encoded_len() <= budget || some.nodes.is_empty(),
        "{} bytes over a budget of {budget}",
        some.encoded_len()
    );
    assert!(some.nodes.len() <= all.nodes.len());
    assert_eq!(
        some.nodes[..],
        all.nodes[..some.nodes.len()],
        "not a prefix"
    );
    assert_eq!(some.truncated, some.nodes.len() < all.nodes.len());
    let mut encoded = Vec::new();
    let _ = reg.encode_snapshot(EDGE_ID, 7, ids, budget, &mut encoded);
    assert_eq!(
        encoded,
        some.encode_to_vec(),
        "budgeted encode_snapshot ≠ snapshot"
    );
}

/// Admission per PROTOCOL.md §5.2, from the model.
impl Model {
    fn admission(&self, id: &str, pid: &str, kind: LeaseKind) -> Result<(), AdmitError> {
        let m = self.nodes.get(id).ok_or(AdmitError::UnknownNode)?;
        let p = m.providers.get(pid).ok_or(AdmitError::UnknownProvider)?;
        if m.state != NodeState::Ready {
            return Err(AdmitError::NodeNotReady { state: m.state });
        }
        if m.drained {
            return Err(AdmitError::NodeDrained);
        }
        if p.offline {
            return Err(AdmitError::ProviderOffline);
        }
        if p.unhealthy {
            return Err(AdmitError::ProviderUnhealthy);
        }
        let (leases, long_leases) = self.leases_of(id, pid);
        if leases >= p.capacity {
            return Err(AdmitError::AtCapacity {
                capacity: p.capacity,
            });
        }
        if kind == LeaseKind::LongContext && long_leases >= p.long_capacity {
            return Err(AdmitError::AtLongContextCapacity {
                long_context_capacity: p.long_capacity,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: u8, capacity: u8, long_capacity: u8) -> ProviderSpec {
        ProviderSpec {
            id,
            category: 2,
            capacity,
            long_capacity,
        }
    }

    /// A realistic life, so the model is known to agree with the registry on the
    /// paths that matter (and the checks do not only pass on rejected calls).
    #[test]
    fn a_full_lifecycle_agrees_with_the_model() {
        let ops = vec![
            Op::Configure {
                node: 0,
                providers: vec![spec(0, 2, 1), spec(1, 1, 0)],
                label: Some(0),
            },
            Op::Connect { node: 0 },
            Op::Connect { node: 0 }, // duplicate
            Op::MarkReady {
                node: 0,
                generation: 0,
            }, // first generation issued
            Op::Admit {
                node: 0,
                provider: 0,
                long: true,
            },
            Op::Admit {
                node: 0,
                provider: 0,
                long: true,
            }, // long-context pool full
            Op::Admit {
                node: 0,
                provider: 0,
                long: false,
            },
            Op::Admit {
                node: 0,
                provider: 0,
                long: false,
            }, // at capacity
            Op::Enqueue {
                long: true,
                candidates: vec![(0, 0), (0, 1), (0, 0), (1, 0)],
            },
            Op::SetOnline {
                node: 0,
                provider: 1,
                online: false,
            },
            Op::SetHealthy {
                node: 0,
                provider: 0,
                healthy: false,
            },
            Op::Drain {
                node: 0,
                drained: true,
            },
            Op::Snapshot {
                nodes: vec![],
                budget: 40,
            },
            Op::Configure {
                node: 0,
                providers: vec![spec(1, 1, 0)],
                label: None,
            }, // busy
            Op::Release { lease: 0 },
            Op::Close {
                node: 0,
                generation: 0,
            },
            Op::Release { lease: 0 }, // stale after the close
            Op::Close {
                node: 0,
                generation: 0,
            }, // stale close
            Op::Connect { node: 0 },
            Op::Close {
                node: 0,
                generation: 1,
            }, // pending abandoned
            Op::Resolve {
                selector: "label:zone=a".into(),
                node_level: true,
            },
            Op::Dequeue { ticket: 0 },
            Op::Remove { node: 0 },
            Op::DrainEvents,
        ];
        run(Input {
            event_capacity: 7,
            ops,
        });
    }
}
