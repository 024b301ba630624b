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
mod rules;

use arbitrary::Arbitrary;
use iop_core::proto::{NodeEventKind, NodeState};
use iop_core::registry::{
    CloseOutcome, ConfigureOutcome, ConnectError, DequeueOutcome, Generation, Lease, LeaseKind,
    NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig, QueueTicket, ReadyOutcome,
    ReleaseOutcome, RemoveOutcome,
};

use model::{Model, NodeModel, ProviderModel};
use rules::{check, check_budgeted_snapshot, ids_valid};

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
}

#[cfg(test)]
mod tests;
