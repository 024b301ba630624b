//! One step of the simulation: an Edge's move, the engine applying or answering an
//! operation, a delivery to a replica, time passing, or a fault.

use super::*;

impl Sim {
    pub(super) fn step(&mut self) {
        match self.rng.index(100) {
            0..=12 => self.hello(),
            13..=34 => self.apply_op(),
            35..=56 => self.deliver_op(),
            57..=68 => self.deliver_watch(),
            69..=71 => self.deliver_inbox(),
            72..=74 => self.deliver_adopt(),
            75..=78 => self.disconnect(),
            79..=80 => self.hello_timeout(),
            81..=91 => {
                let by = Duration::from_millis(self.rng.range(1, 800));
                self.advance(by);
            }
            92 => self.kill_watch(),
            93 => self.pause(),
            94 => self.cut_off(),
            95 => self.crash(),
            96 | 97 => self.restart(),
            98 if self.loses_writes => {
                let n = self.rng.range(1, 3) as usize;
                self.store.roll_back(n);
            }
            _ => self.advance(Duration::from_millis(100)),
        }
        self.check_overlaps();
    }

    /// An Edge process without a connection says hello to a replica.
    fn hello(&mut self) {
        let proc = self.rng.index(PROCS);
        let r = self.rng.index(REPLICAS);
        let node = &self.nodes[r];
        // A crashed replica refuses the connection; a paused one does not read it yet;
        // one cut off from the engine refuses it at once (its directory cannot decide).
        if self.procs[proc].is_some() || !node.reachable() {
            return;
        }
        self.next_conn += 1;
        let conn = ConnectionId(self.next_conn);
        let e = edge(proc);
        let core = &mut self.nodes[r].core;
        core.waiting.insert(conn, (e.clone(), proc));
        let mut claim = Claim::new(conn, e.clone(), self.policy);
        claim.local_session_id = core.live.get(&e).map(|(s, _)| *s);
        claim.last_session_id = core.last.get(&e).copied().unwrap_or(0);
        self.procs[proc] = Some((r, conn));
        self.with(r, |h, now, core| h.claim(now, claim, core));
    }

    /// The engine applies one operation sent to it.
    pub(super) fn apply_op(&mut self) {
        let open: Vec<usize> = (0..self.ops.len())
            .filter(|i| self.ops[*i].result.is_none())
            .collect();
        if open.is_empty() {
            return;
        }
        let i = open[self.rng.index(open.len())];
        let node = &self.nodes[self.ops[i].node];
        let cut = node.cut_off_until.is_some();
        let confirmed = self.now.saturating_duration_since(node.renewed) < HEARTBEAT * 3;
        let failed = || StoreError("timed out".into());
        let result = match self.ops[i].op.clone() {
            Op::Read { .. } if cut => OpResult::Read(Err(failed())),
            Op::Write { .. } if cut => OpResult::Written(Err(WriteError::Store(failed()))),
            Op::Alive { .. } if cut => OpResult::Alive(Err(failed())),
            Op::Read { edge_id, leader } => {
                let current = if !leader && self.rng.chance(1, 4) {
                    self.store.stale(&edge_id, self.rng.index(8))
                } else {
                    self.store.current(&edge_id)
                };
                OpResult::Read(Ok(current))
            }
            // The driver writes nothing while its liveness is not confirmed.
            Op::Write { .. } if !confirmed => OpResult::Written(Err(WriteError::Store(failed()))),
            Op::Write {
                edge_id,
                record,
                expected,
            } => {
                let written = self.store.write(&edge_id, &record, expected);
                if let Ok(revision) = written {
                    self.feed_watches(&edge_id, revision, &record);
                }
                if written.is_ok() && self.rng.chance(1, 10) {
                    // Applied, and the acknowledgement lost.
                    OpResult::Written(Err(WriteError::Store(failed())))
                } else {
                    OpResult::Written(written)
                }
            }
            Op::Alive { replica } => {
                let alive = replica
                    .strip_prefix("cp-")
                    .and_then(|r| r.parse::<usize>().ok())
                    .and_then(|r| self.nodes.get(r))
                    .is_some_and(|n| self.now.saturating_duration_since(n.renewed) < HEARTBEAT * 3);
                OpResult::Alive(Ok(alive))
            }
        };
        self.ops[i].result = Some(result);
    }

    fn feed_watches(&mut self, edge_id: &str, revision: u64, record: &iop_cluster::OwnerRecord) {
        for node in &mut self.nodes {
            if let Some(watch) = &mut node.watch {
                let current = Current {
                    record: Some(record.clone()),
                    revision,
                };
                watch.push_back((edge_id.to_owned(), current));
            }
        }
    }

    /// A replica that is not paused gets one operation's answer.
    pub(super) fn deliver_op(&mut self) {
        let ready: Vec<usize> = (0..self.ops.len())
            .filter(|i| {
                let p = &self.ops[*i];
                p.result.is_some() && self.nodes[p.node].paused_until.is_none()
            })
            .collect();
        if ready.is_empty() {
            return;
        }
        let p = self.ops.swap_remove(ready[self.rng.index(ready.len())]);
        let result = p.result.expect("applied");
        match (&p.op, &result) {
            (Op::Read { edge_id, .. }, OpResult::Read(Ok(Some(c)))) => {
                self.tell(p.node, edge_id, c.revision);
            }
            (Op::Write { edge_id, .. }, OpResult::Written(Ok(revision))) => {
                self.tell(p.node, edge_id, *revision);
            }
            _ => {}
        }
        self.with(p.node, |h, now, core| h.op_done(now, p.id, result, core));
    }

    pub(super) fn deliver_watch(&mut self) {
        let r = self.rng.index(REPLICAS);
        if self.nodes[r].paused_until.is_some() {
            return;
        }
        let Some((edge_id, current)) = self.nodes[r].watch.as_mut().and_then(VecDeque::pop_front)
        else {
            return;
        };
        self.tell(r, &edge_id, current.revision);
        self.with(r, |h, now, core| {
            h.observed(now, &edge_id, current.revision, current.record, core);
        });
        let node = &mut self.nodes[r];
        if node.replay_left > 0 {
            node.replay_left -= 1;
            if node.replay_left == 0 {
                self.with(r, |h, now, _| h.replayed(now));
            }
        }
    }

    pub(super) fn deliver_inbox(&mut self) {
        let r = self.rng.index(REPLICAS);
        if self.nodes[r].paused_until.is_some() {
            return;
        }
        if let Some(notice) = self.nodes[r].inbox.pop_front() {
            self.tell(r, &notice.edge_id, notice.by_session_id);
            self.with(r, |h, now, core| h.told(now, notice, core));
        }
    }

    pub(super) fn deliver_adopt(&mut self) {
        let r = self.rng.index(REPLICAS);
        if self.nodes[r].paused_until.is_some() {
            return;
        }
        if let Some(claim) = self.nodes[r].adopts.pop_front() {
            self.with(r, |h, now, core| h.adopted(now, claim, core));
        }
    }

    /// An Edge process with a live session closes it.
    fn disconnect(&mut self) {
        let proc = self.rng.index(PROCS);
        let Some((r, _)) = self.procs[proc] else {
            return;
        };
        let e = edge(proc);
        let node = &mut self.nodes[r];
        if node.paused_until.is_some() {
            return;
        }
        let Some(&(session, p)) = node.core.live.get(&e) else {
            return;
        };
        if p != proc {
            return;
        }
        node.core.live.remove(&e);
        self.procs[proc] = None;
        self.with(r, |h, now, _| h.session_ended(now, &e, session));
    }

    /// A hello whose claim takes too long ends at its timeout.
    fn hello_timeout(&mut self) {
        let proc = self.rng.index(PROCS);
        let Some((r, conn)) = self.procs[proc] else {
            return;
        };
        if self.nodes[r].core.waiting.remove(&conn).is_some() {
            self.procs[proc] = None;
        }
    }

    /// Time passes: pauses and cuts end, live replicas renew their liveness, timers fire.
    pub(super) fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
        for r in 0..REPLICAS {
            let now = self.now;
            let node = &mut self.nodes[r];
            if node.paused_until.is_some_and(|t| t <= now) {
                node.paused_until = None;
                node.healthy_since = now;
            }
            if node.cut_off_until.is_some_and(|t| t <= now) {
                node.cut_off_until = None;
                node.healthy_since = now;
                self.with(r, |h, now, core| h.engine_reconnected(now, core));
            }
            let node = &mut self.nodes[r];
            if node.reachable() {
                node.renewed = now;
            }
            let due = node.paused_until.is_none()
                && node
                    .holder
                    .as_ref()
                    .and_then(Holder::poll_timeout)
                    .is_some_and(|t| t <= now);
            if due {
                self.with(r, |h, now, core| h.handle_timeout(now, core));
            }
        }
    }

    fn kill_watch(&mut self) {
        let r = self.rng.index(REPLICAS);
        if self.nodes[r].watch.take().is_some() {
            self.nodes[r].replay_left = 0;
            self.with(r, |h, now, _| h.watch_ended(now));
        }
    }

    fn pause(&mut self) {
        let r = self.rng.index(REPLICAS);
        let until = self.now + Duration::from_millis(self.rng.range(1_000, 20_000));
        let node = &mut self.nodes[r];
        if node.holder.is_some() && node.paused_until.is_none() {
            node.paused_until = Some(until);
        }
    }

    fn cut_off(&mut self) {
        let r = self.rng.index(REPLICAS);
        let until = self.now + Duration::from_millis(self.rng.range(1_000, 30_000));
        let node = &mut self.nodes[r];
        if node.holder.is_none() || node.cut_off_until.is_some() {
            return;
        }
        node.cut_off_until = Some(until);
        node.inbox.clear();
        if node.watch.take().is_some() {
            node.replay_left = 0;
            self.with(r, |h, now, _| h.watch_ended(now));
        }
    }

    /// A replica process dies: no release, its sessions and hellos gone with it.
    fn crash(&mut self) {
        let r = self.rng.index(REPLICAS);
        let node = &mut self.nodes[r];
        if node.holder.take().is_none() {
            return;
        }
        node.core = Core::default();
        node.watch = None;
        node.replay_left = 0;
        node.inbox.clear();
        node.adopts.clear();
        node.paused_until = None;
        node.cut_off_until = None;
        self.ops.retain(|p| p.node != r);
        for p in &mut self.procs {
            if p.is_some_and(|(on, _)| on == r) {
                *p = None;
            }
        }
    }

    fn restart(&mut self) {
        let r = self.rng.index(REPLICAS);
        if self.nodes[r].holder.is_none() {
            self.boot(r);
        }
    }
}
