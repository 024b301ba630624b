//! Model-based test of the node registry: a small reference model and the real registry
//! are driven by the same random operation sequences; after every step the registry's
//! snapshot, outcome and events must equal the model's, and every PROTOCOL.md §5 invariant
//! must hold on the snapshot.

use std::collections::{BTreeMap, BTreeSet};

use iop_core::proto::{
    EdgeNodeSnapshot, EdgeStatusResponse, Message, NodeConfigSummary, NodeState, ProviderHealth,
    ProviderSnapshot, ProviderStatus,
};
use iop_core::registry::{
    AdmitError, Candidate, CloseOutcome, ConfigError, ConfigureOutcome, ConnectError,
    DequeueOutcome, Generation, Lease, LeaseKind, NodeConfig, NodeEndpoint, NodeRegistry,
    ProviderCategory, ProviderConfig, QueueTicket, ReadyOutcome, RegistryEventKind, ReleaseOutcome,
    RemoveOutcome, ResolveError, Selector, Target,
};
use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};

const NODES: [&str; 4] = ["n0", "n1", "n2", "n3"];
const PROVIDERS: [&str; 3] = ["p0", "p1", "p2"];
const MODELS: [&str; 3] = ["m0", "m1", "m2"];
const LABEL_KEYS: [&str; 2] = ["zone", "team/x"];
const LABEL_VALUES: [&str; 2] = ["a", "b"];
const EDGE: &str = "edge-model";

fn secret_address(node: usize) -> String {
    format!("10.77.0.{node}:7443")
}

fn secret_token(node: usize) -> String {
    format!("SECRET-TOKEN-{node}-zq")
}

// ---------------------------------------------------------------- transitions

#[derive(Debug, Clone, PartialEq)]
struct ProvSpec {
    category: ProviderCategory,
    capacity: u32,
    long_capacity: u32,
    models: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
struct CfgSpec {
    labels: BTreeMap<usize, usize>,
    revision: usize,
    models: Vec<usize>,
    providers: BTreeMap<usize, ProvSpec>,
}

#[derive(Debug, Clone)]
enum Step {
    Configure(usize, CfgSpec),
    Remove(usize),
    Connect(usize),
    Ready(usize, u64),
    Close(usize, u64),
    Admit(usize, usize, LeaseKind),
    Release(usize),
    Enqueue(LeaseKind, BTreeSet<(usize, usize)>),
    Dequeue(usize),
    Drain(usize),
    Resume(usize),
    Online(usize, usize, bool),
    Healthy(usize, usize, bool),
}

/// What an operation returned, in a form both sides can produce.
#[derive(Debug, Clone, PartialEq)]
enum Out {
    Added,
    Updated,
    Unchanged,
    ConfigInvalid,
    ConfigBusy,
    Removed(u32),
    UnknownNode,
    Connected(u64),
    Duplicate(u64, NodeState),
    Ready,
    AlreadyReady,
    Stale,
    Disconnected(u32),
    Abandoned(NodeState),
    Admitted,
    AdmitErr(AdmitError),
    Released,
    Enqueued,
    Dequeued,
    UnknownTicket,
    Changed(bool),
    UnknownProvider,
}

// ---------------------------------------------------------------- reference model

#[derive(Debug, Clone)]
struct MProv {
    spec: ProvSpec,
    offline: bool,
    unhealthy: bool,
    in_flight: u32,
    long_in_flight: u32,
}

#[derive(Debug, Clone)]
struct MNode {
    cfg: CfgSpec,
    provs: BTreeMap<usize, MProv>,
    state: NodeState,
    generation: u64,
    t: u64,
    before: Option<(NodeState, u64, u64)>,
    drained: bool,
}

#[derive(Debug, Clone)]
struct MLease {
    node: usize,
    prov: usize,
    kind: LeaseKind,
    live: bool,
    consumed: bool,
}

#[derive(Debug, Clone)]
struct MTicket {
    kind: LeaseKind,
    candidates: BTreeSet<(usize, usize)>,
    queued: bool,
}

#[derive(Debug, Clone)]
struct Model {
    nodes: BTreeMap<usize, MNode>,
    last_generation: u64,
    revision: u64,
    now: u64,
    leases: Vec<MLease>,
    tickets: Vec<MTicket>,
    out: Option<Out>,
    events: Vec<(usize, RegistryEventKind, u64)>,
}

fn arb_cfg() -> impl Strategy<Value = CfgSpec> {
    let prov = (
        prop_oneof![
            Just(ProviderCategory::Cli),
            Just(ProviderCategory::Api),
            Just(ProviderCategory::LocalInference)
        ],
        prop_oneof![1 => Just(0u32), 4 => 1u32..4]
            .prop_flat_map(|c| (Just(c), prop_oneof![9 => 0..=c, 1 => Just(c + 1)])),
        proptest::sample::subsequence(vec![0usize, 1, 2], 0..=2),
    )
        .prop_map(|(category, (capacity, long_capacity), models)| ProvSpec {
            category,
            capacity,
            long_capacity,
            models,
        });
    (
        proptest::collection::btree_map(0..LABEL_KEYS.len(), 0..LABEL_VALUES.len(), 0..=2),
        0..3usize,
        proptest::sample::subsequence(vec![0usize, 1, 2], 0..=3),
        proptest::collection::btree_map(0..PROVIDERS.len(), prov, 0..=3),
    )
        .prop_map(|(labels, revision, models, providers)| CfgSpec {
            labels,
            revision,
            models,
            providers,
        })
}

fn node_config(node: usize, spec: &CfgSpec) -> NodeConfig {
    let mut c = NodeConfig::new(NODES[node])
        .with_revision(format!("rev-{}", spec.revision))
        .with_endpoint(
            NodeEndpoint::new(secret_address(node), secret_token(node))
                .with_transport("tls_server_name", format!("secret-sni-{node}.internal")),
        );
    for (k, v) in &spec.labels {
        c = c.with_label(LABEL_KEYS[*k], LABEL_VALUES[*v]);
    }
    for m in &spec.models {
        c = c.with_model(MODELS[*m]);
    }
    // Insert providers in reverse order: the registry must sort them.
    for (p, ps) in spec.providers.iter().rev() {
        let mut pc = ProviderConfig::new(PROVIDERS[*p], ps.category, ps.capacity, ps.long_capacity);
        for m in &ps.models {
            pc = pc.with_model(MODELS[*m]);
        }
        c = c.with_provider(pc);
    }
    c
}

impl Model {
    fn bump(&mut self) {
        self.revision += 1;
    }

    fn event(&mut self, node: usize, kind: RegistryEventKind, generation: u64) {
        self.events.push((node, kind, generation));
    }

    fn kill_leases(&mut self, node: usize) {
        for l in self.leases.iter_mut().filter(|l| l.node == node) {
            l.live = false;
        }
    }

    fn apply_step(&mut self, step: &Step) -> Out {
        match step {
            Step::Configure(n, spec) => {
                if spec
                    .providers
                    .values()
                    .any(|p| p.long_capacity > p.capacity)
                {
                    return Out::ConfigInvalid;
                }
                let fresh = |ps: &ProvSpec| MProv {
                    spec: ps.clone(),
                    offline: false,
                    unhealthy: false,
                    in_flight: 0,
                    long_in_flight: 0,
                };
                let now = self.now;
                let out = match self.nodes.get_mut(n) {
                    None => {
                        self.nodes.insert(
                            *n,
                            MNode {
                                cfg: spec.clone(),
                                provs: spec.providers.iter().map(|(p, s)| (*p, fresh(s))).collect(),
                                state: NodeState::Configured,
                                generation: 0,
                                t: now,
                                before: None,
                                drained: false,
                            },
                        );
                        Out::Added
                    }
                    Some(node) => {
                        if node.cfg == *spec {
                            return Out::Unchanged;
                        }
                        let busy = node.provs.iter().any(|(p, mp)| {
                            mp.in_flight > 0
                                && spec.providers.get(p).is_none_or(|s| {
                                    s.capacity < mp.in_flight || s.long_capacity < mp.long_in_flight
                                })
                        });
                        if busy {
                            return Out::ConfigBusy;
                        }
                        let mut provs = BTreeMap::new();
                        for (p, s) in &spec.providers {
                            let mp = match node.provs.get(p) {
                                Some(old) => MProv {
                                    spec: s.clone(),
                                    ..old.clone()
                                },
                                None => fresh(s),
                            };
                            provs.insert(*p, mp);
                        }
                        node.provs = provs;
                        node.cfg = spec.clone();
                        Out::Updated
                    }
                };
                let g = self.nodes[n].generation;
                self.bump();
                self.event(*n, RegistryEventKind::Configured, g);
                out
            }
            Step::Remove(n) => match self.nodes.remove(n) {
                None => Out::UnknownNode,
                Some(node) => {
                    let released = node.provs.values().map(|p| p.in_flight).sum();
                    self.kill_leases(*n);
                    self.bump();
                    self.event(*n, RegistryEventKind::Removed, node.generation);
                    Out::Removed(released)
                }
            },
            Step::Connect(n) => {
                let now = self.now;
                let Some(node) = self.nodes.get_mut(n) else {
                    return Out::UnknownNode;
                };
                if matches!(node.state, NodeState::Pending | NodeState::Ready) {
                    return Out::Duplicate(node.generation, node.state);
                }
                self.last_generation += 1;
                node.before = Some((node.state, node.generation, node.t));
                node.state = NodeState::Pending;
                node.generation = self.last_generation;
                node.t = now;
                let g = self.last_generation;
                self.bump();
                Out::Connected(g)
            }
            Step::Ready(n, g) => {
                let now = self.now;
                let Some(node) = self.nodes.get_mut(n) else {
                    return Out::UnknownNode;
                };
                if node.generation != *g {
                    return Out::Stale;
                }
                match node.state {
                    NodeState::Pending => {
                        node.state = NodeState::Ready;
                        node.t = now;
                        node.before = None;
                        self.bump();
                        self.event(*n, RegistryEventKind::Ready, *g);
                        Out::Ready
                    }
                    NodeState::Ready => Out::AlreadyReady,
                    _ => Out::Stale,
                }
            }
            Step::Close(n, g) => {
                let now = self.now;
                let Some(node) = self.nodes.get_mut(n) else {
                    return Out::UnknownNode;
                };
                if node.generation != *g {
                    return Out::Stale;
                }
                match node.state {
                    NodeState::Pending => {
                        let (s, gen_before, t) = node.before.take().expect("pending has a before");
                        node.state = s;
                        node.generation = gen_before;
                        node.t = t;
                        self.bump();
                        Out::Abandoned(s)
                    }
                    NodeState::Ready => {
                        let mut released = 0;
                        for p in node.provs.values_mut() {
                            released += p.in_flight;
                            p.in_flight = 0;
                            p.long_in_flight = 0;
                        }
                        node.state = NodeState::Disconnected;
                        node.t = now;
                        self.kill_leases(*n);
                        self.bump();
                        self.event(*n, RegistryEventKind::Disconnected, *g);
                        Out::Disconnected(released)
                    }
                    _ => Out::Stale,
                }
            }
            Step::Admit(n, p, kind) => {
                let Some(node) = self.nodes.get_mut(n) else {
                    return Out::AdmitErr(AdmitError::UnknownNode);
                };
                let (state, drained) = (node.state, node.drained);
                let Some(mp) = node.provs.get_mut(p) else {
                    return Out::AdmitErr(AdmitError::UnknownProvider);
                };
                let err = if state != NodeState::Ready {
                    Some(AdmitError::NodeNotReady { state })
                } else if drained {
                    Some(AdmitError::NodeDrained)
                } else if mp.offline {
                    Some(AdmitError::ProviderOffline)
                } else if mp.unhealthy {
                    Some(AdmitError::ProviderUnhealthy)
                } else if mp.in_flight >= mp.spec.capacity {
                    Some(AdmitError::AtCapacity {
                        capacity: mp.spec.capacity,
                    })
                } else if *kind == LeaseKind::LongContext
                    && mp.long_in_flight >= mp.spec.long_capacity
                {
                    Some(AdmitError::AtLongContextCapacity {
                        long_context_capacity: mp.spec.long_capacity,
                    })
                } else {
                    None
                };
                if let Some(e) = err {
                    return Out::AdmitErr(e);
                }
                mp.in_flight += 1;
                if *kind == LeaseKind::LongContext {
                    mp.long_in_flight += 1;
                }
                self.leases.push(MLease {
                    node: *n,
                    prov: *p,
                    kind: *kind,
                    live: true,
                    consumed: false,
                });
                self.bump();
                Out::Admitted
            }
            Step::Release(i) => {
                let lease = &mut self.leases[*i];
                lease.consumed = true;
                if !lease.live {
                    return Out::Stale;
                }
                lease.live = false;
                let (n, p, kind) = (lease.node, lease.prov, lease.kind);
                let mp = self
                    .nodes
                    .get_mut(&n)
                    .and_then(|node| node.provs.get_mut(&p))
                    .expect("a live lease has its provider");
                mp.in_flight -= 1;
                if kind == LeaseKind::LongContext {
                    mp.long_in_flight -= 1;
                }
                self.bump();
                Out::Released
            }
            Step::Enqueue(kind, candidates) => {
                self.tickets.push(MTicket {
                    kind: *kind,
                    candidates: candidates.clone(),
                    queued: true,
                });
                self.bump();
                Out::Enqueued
            }
            Step::Dequeue(i) => {
                let t = &mut self.tickets[*i];
                if !t.queued {
                    return Out::UnknownTicket;
                }
                t.queued = false;
                self.bump();
                Out::Dequeued
            }
            Step::Drain(n) | Step::Resume(n) => {
                let want = matches!(step, Step::Drain(_));
                let Some(node) = self.nodes.get_mut(n) else {
                    return Out::UnknownNode;
                };
                let changed = node.drained != want;
                node.drained = want;
                if changed {
                    self.bump();
                }
                Out::Changed(changed)
            }
            Step::Online(n, p, on) | Step::Healthy(n, p, on) => {
                let online_op = matches!(step, Step::Online(..));
                let Some(node) = self.nodes.get_mut(n) else {
                    return Out::UnknownNode;
                };
                let Some(mp) = node.provs.get_mut(p) else {
                    return Out::UnknownProvider;
                };
                let flag = if online_op {
                    &mut mp.offline
                } else {
                    &mut mp.unhealthy
                };
                let changed = *flag == *on;
                *flag = !*on;
                if changed {
                    self.bump();
                }
                Out::Changed(changed)
            }
        }
    }

    /// The snapshot PROTOCOL.md §5 asks for, computed straight from the model.
    fn snapshot(&self) -> EdgeStatusResponse {
        let nodes = self
            .nodes
            .iter()
            .map(|(n, node)| {
                let ready = node.state == NodeState::Ready;
                let provider_snapshots = node
                    .provs
                    .iter()
                    .map(|(p, mp)| {
                        let mut s = ProviderSnapshot {
                            provider_id: PROVIDERS[*p].to_owned(),
                            category: mp.spec.category.to_wire() as i32,
                            models: mp
                                .spec
                                .models
                                .iter()
                                .map(|m| MODELS[*m].to_owned())
                                .collect(),
                            ..Default::default()
                        };
                        if !ready || mp.offline {
                            s.status = ProviderStatus::Unavailable as i32;
                            s.health = ProviderHealth::Offline as i32;
                            return s;
                        }
                        let (queued, long_queued) = self.pressure(*n, *p);
                        s.health = if mp.unhealthy {
                            ProviderHealth::Unhealthy
                        } else {
                            ProviderHealth::Healthy
                        } as i32;
                        s.status = if mp.unhealthy || node.drained {
                            ProviderStatus::Degraded
                        } else {
                            ProviderStatus::Available
                        } as i32;
                        s.capacity = mp.spec.capacity;
                        s.long_context_capacity = mp.spec.long_capacity;
                        s.in_flight = mp.in_flight;
                        s.long_context_in_flight = mp.long_in_flight;
                        s.queued = queued;
                        s.long_context_queued = long_queued;
                        s.admission_eligible =
                            !node.drained && !mp.unhealthy && mp.in_flight < mp.spec.capacity;
                        s
                    })
                    .collect();
                EdgeNodeSnapshot {
                    node_id: NODES[*n].to_owned(),
                    connected: ready,
                    config: Some(NodeConfigSummary {
                        revision: format!("rev-{}", node.cfg.revision),
                        provider_ids: node
                            .provs
                            .keys()
                            .map(|p| PROVIDERS[*p].to_owned())
                            .collect(),
                        models: node
                            .cfg
                            .models
                            .iter()
                            .map(|m| MODELS[*m].to_owned())
                            .collect(),
                    }),
                    provider_snapshots,
                    state: node.state as i32,
                    generation: node.generation,
                    last_transition_unix_ms: node.t,
                    labels: node
                        .cfg
                        .labels
                        .iter()
                        .map(|(k, v)| (LABEL_KEYS[*k].to_owned(), LABEL_VALUES[*v].to_owned()))
                        .collect(),
                }
            })
            .collect();
        EdgeStatusResponse {
            edge_id: EDGE.to_owned(),
            nodes,
            observed_at_unix_ms: self.now,
            registry_revision: self.revision,
            truncated: false,
        }
    }

    fn pressure(&self, n: usize, p: usize) -> (u32, u32) {
        let listing = self
            .tickets
            .iter()
            .filter(|t| t.queued && t.candidates.contains(&(n, p)));
        let queued = listing.clone().count() as u32;
        let long = listing.filter(|t| t.kind == LeaseKind::LongContext).count() as u32;
        (queued, long)
    }
}

struct RegistryModel;

impl ReferenceStateMachine for RegistryModel {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model {
            nodes: BTreeMap::new(),
            last_generation: 0,
            revision: 0,
            now: 1_000,
            leases: Vec::new(),
            tickets: Vec::new(),
            out: None,
            events: Vec::new(),
        })
        .boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Step> {
        // Mostly configured nodes; sometimes any (unknown-node paths).
        let configured: Vec<usize> = state.nodes.keys().copied().collect();
        let node: BoxedStrategy<usize> = if configured.is_empty() {
            (0..NODES.len()).boxed()
        } else {
            prop_oneof![5 => proptest::sample::select(configured), 1 => 0..NODES.len()].boxed()
        };
        let prov = 0..PROVIDERS.len();
        let kind = prop_oneof![Just(LeaseKind::Normal), Just(LeaseKind::LongContext)];
        // Generations to aim ready/close at: mostly the node's current one, sometimes any
        // generation ever issued (stale), or one never issued.
        let gens: Vec<u64> = (0..NODES.len())
            .map(|n| state.nodes.get(&n).map_or(0, |m| m.generation))
            .collect();
        let last = state.last_generation;
        let aimed = || {
            let gens = gens.clone();
            node.clone().prop_flat_map(move |n| {
                let current = gens[n];
                (Just(n), prop_oneof![3 => Just(current), 1 => 0..=last + 1])
            })
        };
        let mut options: Vec<(u32, BoxedStrategy<Step>)> = vec![
            (
                if state.nodes.len() < 2 { 12 } else { 4 },
                (0..NODES.len(), arb_cfg())
                    .prop_map(|(n, c)| Step::Configure(n, c))
                    .boxed(),
            ),
            (1, node.clone().prop_map(Step::Remove).boxed()),
            (3, node.clone().prop_map(Step::Connect).boxed()),
            (3, aimed().prop_map(|(n, g)| Step::Ready(n, g)).boxed()),
            (5, aimed().prop_map(|(n, g)| Step::Close(n, g)).boxed()),
            (
                4,
                (node.clone(), prov.clone(), kind.clone())
                    .prop_map(|(n, p, k)| Step::Admit(n, p, k))
                    .boxed(),
            ),
            (
                3,
                (
                    kind.clone(),
                    proptest::collection::btree_set((node.clone(), prov.clone()), 1..=3),
                )
                    .prop_map(|(k, c)| Step::Enqueue(k, c))
                    .boxed(),
            ),
            (1, node.clone().prop_map(Step::Drain).boxed()),
            (1, node.clone().prop_map(Step::Resume).boxed()),
            (
                2,
                (node.clone(), prov.clone(), any::<bool>())
                    .prop_map(|(n, p, b)| Step::Online(n, p, b))
                    .boxed(),
            ),
            (
                2,
                (node.clone(), prov, any::<bool>())
                    .prop_map(|(n, p, b)| Step::Healthy(n, p, b))
                    .boxed(),
            ),
        ];
        // Aim at the interesting targets more often than chance would: configured
        // providers of READY nodes (admit), PENDING nodes (ready), nodes without a live
        // owner (connect).
        let ready_targets: Vec<(usize, usize)> = state
            .nodes
            .iter()
            .filter(|(_, m)| m.state == NodeState::Ready)
            .flat_map(|(n, m)| m.provs.keys().map(move |p| (*n, *p)))
            .collect();
        if !ready_targets.is_empty() {
            options.push((
                16,
                (proptest::sample::select(ready_targets), kind.clone())
                    .prop_map(|((n, p), k)| Step::Admit(n, p, k))
                    .boxed(),
            ));
        }
        let pending: Vec<(usize, u64)> = state
            .nodes
            .iter()
            .filter(|(_, m)| m.state == NodeState::Pending)
            .map(|(n, m)| (*n, m.generation))
            .collect();
        if !pending.is_empty() {
            options.push((
                6,
                proptest::sample::select(pending)
                    .prop_map(|(n, g)| Step::Ready(n, g))
                    .boxed(),
            ));
        }
        let idle: Vec<usize> = state
            .nodes
            .iter()
            .filter(|(_, m)| !matches!(m.state, NodeState::Pending | NodeState::Ready))
            .map(|(n, _)| *n)
            .collect();
        if !idle.is_empty() {
            options.push((
                4,
                proptest::sample::select(idle)
                    .prop_map(Step::Connect)
                    .boxed(),
            ));
        }
        let unconsumed: Vec<usize> = state
            .leases
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.consumed)
            .map(|(i, _)| i)
            .collect();
        if !unconsumed.is_empty() {
            options.push((
                4,
                proptest::sample::select(unconsumed)
                    .prop_map(Step::Release)
                    .boxed(),
            ));
        }
        // Dead leases whose provider is busy again under a newer owner: the releases
        // that must not touch the new generation's counts.
        let stale_on_busy: Vec<usize> = state
            .leases
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.consumed && !l.live)
            .filter(|(_, l)| {
                state
                    .nodes
                    .get(&l.node)
                    .and_then(|m| m.provs.get(&l.prov))
                    .is_some_and(|mp| mp.in_flight > 0)
            })
            .map(|(i, _)| i)
            .collect();
        if !stale_on_busy.is_empty() {
            options.push((
                8,
                proptest::sample::select(stale_on_busy)
                    .prop_map(Step::Release)
                    .boxed(),
            ));
        }
        if !state.tickets.is_empty() {
            options.push((3, (0..state.tickets.len()).prop_map(Step::Dequeue).boxed()));
        }
        proptest::strategy::Union::new_weighted(options).boxed()
    }

    fn preconditions(state: &Model, step: &Step) -> bool {
        match step {
            Step::Release(i) => state.leases.get(*i).is_some_and(|l| !l.consumed),
            Step::Dequeue(i) => *i < state.tickets.len(),
            _ => true,
        }
    }

    fn apply(mut state: Model, step: &Step) -> Model {
        state.now += 7;
        state.events.clear();
        let out = state.apply_step(step);
        state.out = Some(out);
        state
    }
}

// ---------------------------------------------------------------- system under test

struct Sut {
    reg: NodeRegistry,
    leases: Vec<Option<Lease>>,
    tickets: Vec<QueueTicket>,
    last: EdgeStatusResponse,
}

fn run(sut: &mut Sut, step: Step, now: u64) -> Out {
    let reg = &mut sut.reg;
    match step {
        Step::Configure(n, spec) => match reg.configure(node_config(n, &spec), now) {
            Ok(ConfigureOutcome::Added) => Out::Added,
            Ok(ConfigureOutcome::Updated) => Out::Updated,
            Ok(ConfigureOutcome::Unchanged) => Out::Unchanged,
            Err(ConfigError::ProviderBusy { .. }) => Out::ConfigBusy,
            Err(ConfigError::LongContextCapacityAboveCapacity { .. }) => Out::ConfigInvalid,
            other => panic!("unexpected configure outcome {other:?}"),
        },
        Step::Remove(n) => match reg.remove(NODES[n], now) {
            RemoveOutcome::Removed { released_leases } => Out::Removed(released_leases),
            RemoveOutcome::UnknownNode => Out::UnknownNode,
            other => panic!("unexpected {other:?}"),
        },
        Step::Connect(n) => match reg.connect(NODES[n], now) {
            Ok(g) => Out::Connected(g.get()),
            Err(ConnectError::UnknownNode) => Out::UnknownNode,
            Err(ConnectError::Duplicate { owner, state }) => Out::Duplicate(owner.get(), state),
            Err(other) => panic!("unexpected {other:?}"),
        },
        Step::Ready(n, g) => match reg.mark_ready(NODES[n], Generation::from_raw(g), now) {
            ReadyOutcome::Ready => Out::Ready,
            ReadyOutcome::AlreadyReady => Out::AlreadyReady,
            ReadyOutcome::Stale => Out::Stale,
            ReadyOutcome::UnknownNode => Out::UnknownNode,
            other => panic!("unexpected {other:?}"),
        },
        Step::Close(n, g) => match reg.close(NODES[n], Generation::from_raw(g), "closed", now) {
            CloseOutcome::Disconnected { released_leases } => Out::Disconnected(released_leases),
            CloseOutcome::PendingAbandoned { restored } => Out::Abandoned(restored),
            CloseOutcome::Stale => Out::Stale,
            CloseOutcome::UnknownNode => Out::UnknownNode,
            other => panic!("unexpected {other:?}"),
        },
        Step::Admit(n, p, kind) => match reg.admit(NODES[n], PROVIDERS[p], kind) {
            Ok(lease) => {
                assert_eq!(lease.node_id(), NODES[n]);
                assert_eq!(lease.provider_id(), PROVIDERS[p]);
                assert_eq!(lease.kind(), kind);
                sut.leases.push(Some(lease));
                Out::Admitted
            }
            Err(e) => Out::AdmitErr(e),
        },
        Step::Release(i) => {
            let lease = sut.leases[i].take().expect("not yet released");
            match reg.release(lease) {
                ReleaseOutcome::Released => Out::Released,
                ReleaseOutcome::Stale => Out::Stale,
                other => panic!("unexpected {other:?}"),
            }
        }
        Step::Enqueue(kind, candidates) => {
            // Repeat the candidates: repeats must count once.
            let mut list: Vec<Candidate> = candidates
                .iter()
                .map(|(n, p)| Candidate::new(NODES[*n], PROVIDERS[*p]))
                .collect();
            list.extend(list.clone());
            let ticket = reg.enqueue(kind, list).expect("enqueue");
            sut.tickets.push(ticket);
            Out::Enqueued
        }
        Step::Dequeue(i) => match reg.dequeue(sut.tickets[i]) {
            DequeueOutcome::Dequeued => Out::Dequeued,
            DequeueOutcome::UnknownTicket => Out::UnknownTicket,
            other => panic!("unexpected {other:?}"),
        },
        Step::Drain(n) => reg.drain(NODES[n]).map_or(Out::UnknownNode, Out::Changed),
        Step::Resume(n) => reg.resume(NODES[n]).map_or(Out::UnknownNode, Out::Changed),
        Step::Online(n, p, on) | Step::Healthy(n, p, on) => {
            let r = if matches!(step, Step::Online(..)) {
                reg.set_provider_online(NODES[n], PROVIDERS[p], on)
            } else {
                reg.set_provider_healthy(NODES[n], PROVIDERS[p], on)
            };
            match r {
                Ok(changed) => Out::Changed(changed),
                Err(iop_core::registry::ProviderRefError::UnknownNode) => Out::UnknownNode,
                Err(iop_core::registry::ProviderRefError::UnknownProvider) => Out::UnknownProvider,
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
    }
}

/// Every PROTOCOL.md §5 invariant that can be read off one snapshot.
fn check_spec_invariants(s: &EdgeStatusResponse) {
    let ids: Vec<&str> = s.nodes.iter().map(|n| n.node_id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(ids, sorted, "nodes sorted by id, no repeats");
    for node in &s.nodes {
        let ready = node.state == NodeState::Ready as i32;
        assert_eq!(node.connected, ready, "connected iff READY: {node:?}");
        for p in &node.provider_snapshots {
            let offline = p.health == ProviderHealth::Offline as i32;
            if !ready {
                assert!(offline, "providers of a node not READY are offline");
            }
            if offline {
                assert_eq!(p.status, ProviderStatus::Unavailable as i32);
                assert!(!p.admission_eligible);
                assert_eq!(
                    [
                        p.capacity,
                        p.in_flight,
                        p.queued,
                        p.long_context_capacity,
                        p.long_context_in_flight,
                        p.long_context_queued
                    ],
                    [0; 6],
                    "offline provider reports zeros"
                );
            } else {
                let healthy = p.health == ProviderHealth::Healthy as i32;
                assert!(healthy || p.health == ProviderHealth::Unhealthy as i32);
                if !healthy {
                    assert_eq!(p.status, ProviderStatus::Degraded as i32);
                }
                assert_ne!(p.status, ProviderStatus::Unavailable as i32);
                let available = p.status == ProviderStatus::Available as i32;
                assert_eq!(
                    p.admission_eligible,
                    available && p.in_flight < p.capacity,
                    "eligibility formula"
                );
            }
            assert!(!p.provider_id.is_empty(), "identity kept");
            assert!(p.in_flight <= p.capacity);
            assert!(p.long_context_in_flight <= p.long_context_capacity);
            assert!(p.long_context_in_flight <= p.in_flight);
            assert!(p.long_context_queued <= p.queued);
        }
    }
}

/// Selectors resolve against configured nodes in any state.
fn check_selectors(reg: &NodeRegistry, model: &Model) {
    let expect = |pred: &dyn Fn(&MNode) -> bool| {
        let ids: Vec<String> = model
            .nodes
            .iter()
            .filter(|(_, m)| pred(m))
            .map(|(n, _)| NODES[*n].to_owned())
            .collect();
        if ids.is_empty() {
            Err(ResolveError::NoMatchingTarget)
        } else {
            Ok(Target::Nodes(ids))
        }
    };
    assert_eq!(reg.resolve(&Selector::All), expect(&|_| true), "`*`");
    for (k, key) in LABEL_KEYS.iter().enumerate() {
        let selector = Selector::parse(&format!("label:{key}={}", LABEL_VALUES[0]))
            .expect("valid label selector");
        assert_eq!(
            reg.resolve(&selector),
            expect(&|m| m.cfg.labels.get(&k) == Some(&0)),
            "label selector"
        );
    }
    for (n, id) in NODES.iter().enumerate() {
        let p0 = Selector::parse(&format!("provider:{id}/{}", PROVIDERS[0])).expect("valid");
        let found = model
            .nodes
            .get(&n)
            .is_some_and(|m| m.provs.contains_key(&0));
        assert_eq!(reg.resolve(&p0).is_ok(), found, "provider selector");
    }
}

fn assert_no_secrets(bytes: &[u8], what: &str) {
    let text = String::from_utf8_lossy(bytes);
    for n in 0..NODES.len() {
        assert!(!text.contains(&secret_token(n)), "{what} leaks a token");
        assert!(
            !text.contains(&secret_address(n)),
            "{what} leaks an address"
        );
        assert!(
            !text.contains("secret-sni"),
            "{what} leaks transport details"
        );
    }
}

struct RegistryUnderTest;

impl StateMachineTest for RegistryUnderTest {
    type SystemUnderTest = Sut;
    type Reference = RegistryModel;

    fn init_test(model: &Model) -> Sut {
        let reg = NodeRegistry::new();
        let last = reg.snapshot(EDGE, model.now, &[] as &[&str], usize::MAX);
        Sut {
            reg,
            leases: Vec::new(),
            tickets: Vec::new(),
            last,
        }
    }

    fn apply(mut sut: Sut, model: &Model, step: Step) -> Sut {
        let out = run(&mut sut, step, model.now);
        assert_eq!(Some(&out), model.out.as_ref(), "outcome");

        let mut events = Vec::new();
        while let Some(e) = sut.reg.poll_event() {
            assert_eq!(e.occurred_at_unix_ms, model.now);
            assert_no_secrets(format!("{e:?}").as_bytes(), "event Debug");
            let n = NODES
                .iter()
                .position(|id| *id == e.node_id)
                .expect("known node");
            events.push((n, e.kind, e.generation.get()));
        }
        assert_eq!(events, model.events, "events");

        let snap = sut
            .reg
            .snapshot(EDGE, model.now, &[] as &[&str], usize::MAX);
        assert_eq!(snap, model.snapshot(), "snapshot");
        check_spec_invariants(&snap);
        let bytes = snap.encode_to_vec();
        assert_no_secrets(&bytes, "snapshot bytes");
        let mut direct = Vec::new();
        let _ = sut
            .reg
            .encode_snapshot(EDGE, model.now, &[] as &[&str], usize::MAX, &mut direct);
        assert_eq!(direct, bytes, "direct encoding equals the built snapshot");
        check_selectors(&sut.reg, model);

        let mut before = sut.last.clone();
        before.registry_revision = snap.registry_revision;
        before.observed_at_unix_ms = snap.observed_at_unix_ms;
        if before != snap {
            assert!(
                snap.registry_revision > sut.last.registry_revision,
                "a visible change bumps the revision"
            );
        }
        assert!(snap.registry_revision >= sut.last.registry_revision);
        sut.last = snap;
        sut
    }

    fn check_invariants(sut: &Sut, _model: &Model) {
        assert_no_secrets(format!("{:?}", sut.reg).as_bytes(), "registry Debug");
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        max_shrink_iters: 4096,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(
                "proptest-regressions/registry_model.txt",
            ),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn registry_matches_reference_model(sequential 1..60 => RegistryUnderTest);
}
