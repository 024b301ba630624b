//! What the simulation asserts: the bound on two live sessions at every step, and the
//! settled state once every fault healed.

use super::*;

impl Sim {
    fn live_sessions(&self, e: &str) -> Vec<(usize, u64)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.holder.is_some())
            .filter_map(|(r, n)| n.core.live.get(e).map(|(s, _)| (r, *s)))
            .collect()
    }

    /// Two live sessions of one Edge id: the older one's replica may keep it only while
    /// it cannot reach the engine, plus one reconcile interval (and the time its
    /// operations and watch entries take to arrive).
    pub(super) fn check_overlaps(&mut self) {
        let mut still = BTreeMap::new();
        for p in 0..EDGES {
            let e = edge(p);
            let live = self.live_sessions(&e);
            let Some(newest) = live.iter().map(|(_, s)| *s).max() else {
                continue;
            };
            for &(r, s) in live.iter().filter(|(_, s)| *s < newest) {
                let since = self
                    .overlaps
                    .get(&e)
                    .filter(|(_, older)| *older == (r, s))
                    .map_or(self.now, |(t, _)| *t);
                still.insert(e.clone(), (since, (r, s)));
                let node = &self.nodes[r];
                let start = since.max(node.healthy_since);
                assert!(
                    !node.reachable()
                        || self.now.saturating_duration_since(start) <= RECONCILE + SLACK,
                    "{e}: session {s} on cp-{r} still live {:?} after session {newest} elsewhere \
                     (reachable since {:?})",
                    self.now.saturating_duration_since(since),
                    node.healthy_since,
                );
            }
        }
        self.overlaps = still;
    }

    /// Every fault heals; everything in flight is delivered while two reconcile
    /// intervals pass; then the cluster has converged.
    pub(super) fn settle(&mut self) {
        for r in 0..REPLICAS {
            if self.nodes[r].holder.is_none() {
                self.boot(r);
            }
            self.nodes[r].paused_until = None;
            if self.nodes[r].cut_off_until.take().is_some() {
                self.with(r, |h, now, core| h.engine_reconnected(now, core));
            }
            self.nodes[r].healthy_since = self.now;
        }
        let until = self.now + RECONCILE * 2 + SLACK;
        while self.now < until {
            self.drain();
            self.advance(Duration::from_secs(1));
            self.check_overlaps();
        }
        self.drain();
        self.check_settled();
    }

    /// Delivers everything in flight, until nothing is.
    fn drain(&mut self) {
        for _ in 0..10_000 {
            let busy = !self.ops.is_empty()
                || self.nodes.iter().any(|n| {
                    n.watch.as_ref().is_some_and(|w| !w.is_empty())
                        || !n.inbox.is_empty()
                        || !n.adopts.is_empty()
                });
            if !busy {
                return;
            }
            for _ in 0..self.ops.len() {
                self.apply_op();
            }
            for _ in 0..self.ops.len() {
                self.deliver_op();
            }
            for _ in 0..REPLICAS * 8 {
                self.deliver_watch();
                self.deliver_inbox();
                self.deliver_adopt();
            }
        }
        let ops: Vec<(usize, &Op)> = self.ops.iter().map(|p| (p.node, &p.op)).take(8).collect();
        panic!("the cluster never went quiet: {ops:?}");
    }

    fn check_settled(&self) {
        for p in 0..EDGES {
            let e = edge(p);
            let live = self.live_sessions(&e);
            assert!(
                live.len() <= 1,
                "{e}: live sessions {live:?} after settling"
            );
            let current = self.store.current(&e);
            match (
                live.first(),
                current.as_ref().and_then(|c| c.record.as_ref()),
            ) {
                (Some(&(r, s)), _) => {
                    let c = current.clone().expect("a record");
                    assert_eq!(
                        (c.revision, c.record),
                        (s, Some(iop_cluster::OwnerRecord::live(&name(r)))),
                        "{e}: the record is not its live session {s} on cp-{r}"
                    );
                }
                (None, Some(record)) => assert!(
                    !record.live,
                    "{e}: a live record of {} with no session (a phantom) after settling",
                    record.replica
                ),
                (None, None) => {}
            }
            for (r, node) in self.nodes.iter().enumerate() {
                let holder = node.holder.as_ref().expect("booted");
                assert_eq!(
                    holder.record(&e),
                    current.as_ref(),
                    "{e}: cp-{r}'s fleet map is not the engine's record"
                );
            }
        }
        for node in &self.nodes {
            let holder = node.holder.as_ref().expect("booted");
            assert_eq!(
                holder.backlog(),
                (0, 0, 0),
                "{}: work left",
                holder.replica_id()
            );
        }
    }
}
