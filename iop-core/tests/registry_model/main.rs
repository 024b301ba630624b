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

mod model;
mod reference;
mod sut;

use reference::RegistryModel;
use sut::*;

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
