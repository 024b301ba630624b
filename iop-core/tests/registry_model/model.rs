//! The reference model's rules: what each step does to the model.

use super::*;

impl Model {
    pub(super) fn bump(&mut self) {
        self.revision += 1;
    }

    pub(super) fn event(&mut self, node: usize, kind: RegistryEventKind, generation: u64) {
        self.events.push((node, kind, generation));
    }

    pub(super) fn kill_leases(&mut self, node: usize) {
        for l in self.leases.iter_mut().filter(|l| l.node == node) {
            l.live = false;
        }
    }

    pub(super) fn apply_step(&mut self, step: &Step) -> Out {
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
    pub(super) fn snapshot(&self) -> EdgeStatusResponse {
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

    pub(super) fn pressure(&self, n: usize, p: usize) -> (u32, u32) {
        let listing = self
            .tickets
            .iter()
            .filter(|t| t.queued && t.candidates.contains(&(n, p)));
        let queued = listing.clone().count() as u32;
        let long = listing.filter(|t| t.kind == LeaseKind::LongContext).count() as u32;
        (queued, long)
    }
}
