//! The system under test: the real registry, driven step by step, and the checks
//! made on its snapshots.

use super::*;

// ---------------------------------------------------------------- system under test

pub(super) struct Sut {
    pub(super) reg: NodeRegistry,
    pub(super) leases: Vec<Option<Lease>>,
    pub(super) tickets: Vec<QueueTicket>,
    pub(super) last: EdgeStatusResponse,
}

pub(super) fn run(sut: &mut Sut, step: Step, now: u64) -> Out {
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
pub(super) fn check_spec_invariants(s: &EdgeStatusResponse) {
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
pub(super) fn check_selectors(reg: &NodeRegistry, model: &Model) {
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

pub(super) fn assert_no_secrets(bytes: &[u8], what: &str) {
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
