//! The reference state machine: which steps may come next, and their effect on the model.

use super::*;

pub(super) struct RegistryModel;

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
