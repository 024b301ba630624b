//! What a replica counts: the engine's health and round-trip time, claims, routed
//! requests and published events.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A replica's counters, shared by its tasks and its [`Router`](crate::Router).
#[derive(Debug, Default)]
pub struct ClusterStats {
    /// The replica runs: started, not shut down.
    serving: AtomicBool,
    fenced: AtomicBool,
    engine_up: AtomicBool,
    engine_rtt_us: AtomicU64,
    claims_granted: AtomicU64,
    claims_held: AtomicU64,
    claims_unavailable: AtomicU64,
    cas_conflicts: AtomicU64,
    ownership_lost: AtomicU64,
    routed_requests: AtomicU64,
    routed_failures: AtomicU64,
    events_published: AtomicU64,
    events_lost: AtomicU64,
    commands_recorded: AtomicU64,
    command_records_failed: AtomicU64,
    commands_adopted: AtomicU64,
    claims_overtaken: AtomicU64,
    releases_failed: AtomicU64,
    phantoms_released: AtomicU64,
    rollbacks: AtomicU64,
    watch_restarts: AtomicU64,
    reconciles: AtomicU64,
    events_retried: AtomicU64,
    events_outbox: AtomicU64,
    owner_writes: AtomicU64,
    owner_batches: AtomicU64,
    owner_batched_writes: AtomicU64,
    owner_single_writes: AtomicU64,
    owner_batches_refused: AtomicU64,
    owner_largest_batch: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterSnapshot {
    /// The last liveness renewal reached the engine.
    pub engine_up: bool,
    /// Another process took this replica's liveness entry (it was started with the
    /// same replica id while this one was paused or cut off): this one decides no more
    /// claims.
    pub fenced: bool,
    /// How long that renewal took, in microseconds.
    pub engine_rtt_us: u64,
    /// Claims answered with a session.
    pub claims_granted: u64,
    /// Claims refused: a live owner holds the Edge (`Reject`).
    pub claims_held: u64,
    /// Claims the engine could not decide (the Edge got `OVERLOADED`).
    pub claims_unavailable: u64,
    /// Compare-and-set writes that found the record moved on.
    pub cas_conflicts: u64,
    /// Sessions closed here because another replica took their Edge.
    pub ownership_lost: u64,
    /// Requests sent to another replica through the router.
    pub routed_requests: u64,
    /// Of those, the ones without an answer from the Edge (any [`RouteError`](crate::RouteError)).
    pub routed_failures: u64,
    /// Events published on the fleet's stream.
    pub events_published: u64,
    /// Events lost before the fleet's stream had them: let go by a full outbox, or
    /// waiting past its horizon, or dropped by the replica's lagging subscription.
    pub events_lost: u64,
    /// Publish attempts of the outbox that failed and were retried.
    pub events_retried: u64,
    /// Events waiting in the outbox now.
    pub events_outbox: u64,
    /// Command records written to the engine.
    pub commands_recorded: u64,
    /// Command records that could not be written (the engine was down).
    pub command_records_failed: u64,
    /// Unfinished commands another replica sent, carried on here.
    pub commands_adopted: u64,
    /// Claims refused `Unavailable` because their record moved on while they were
    /// pending (another replica took the Edge after their write).
    pub claims_overtaken: u64,
    /// Releases of a record that failed and were retried.
    pub releases_failed: u64,
    /// Live records naming this replica with no session here (a lost close, a write
    /// whose acknowledgement was lost), released.
    pub phantoms_released: u64,
    /// Held sessions whose record the engine's leader had behind them, or not at all
    /// (the engine lost acknowledged writes), closed.
    pub rollbacks: u64,
    /// Watches of the owners bucket that ended or failed and were restarted.
    pub watch_restarts: u64,
    /// Reconciles run (periodic, after a watch restart, after a reconnect).
    pub reconciles: u64,
    /// Ownership records written (claims and releases), by the group commit.
    pub owner_writes: u64,
    /// Atomic batches of them sent to the engine (one durable commit each).
    pub owner_batches: u64,
    /// Writes that went in those batches.
    pub owner_batched_writes: u64,
    /// Writes sent on their own (a small group, or a refused batch's writes again).
    pub owner_single_writes: u64,
    /// Batches the engine refused (nothing stored): their writes went one by one.
    pub owner_batches_refused: u64,
    /// The most writes one batch carried.
    pub owner_largest_batch: u64,
}

impl ClusterSnapshot {
    /// Durable commits the engine made per ownership record written: 1.0 when every
    /// write went on its own, lower the more writes shared a batch.
    pub fn commits_per_owner_write(&self) -> f64 {
        if self.owner_writes == 0 {
            return 0.0;
        }
        (self.owner_batches + self.owner_single_writes) as f64 / self.owner_writes as f64
    }
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl ClusterStats {
    /// The counters now.
    pub fn snapshot(&self) -> ClusterSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClusterSnapshot {
            engine_up: self.engine_up.load(Ordering::Relaxed),
            fenced: self.fenced.load(Ordering::Relaxed),
            engine_rtt_us: get(&self.engine_rtt_us),
            claims_granted: get(&self.claims_granted),
            claims_held: get(&self.claims_held),
            claims_unavailable: get(&self.claims_unavailable),
            cas_conflicts: get(&self.cas_conflicts),
            ownership_lost: get(&self.ownership_lost),
            routed_requests: get(&self.routed_requests),
            routed_failures: get(&self.routed_failures),
            events_published: get(&self.events_published),
            events_lost: get(&self.events_lost),
            commands_recorded: get(&self.commands_recorded),
            command_records_failed: get(&self.command_records_failed),
            commands_adopted: get(&self.commands_adopted),
            claims_overtaken: get(&self.claims_overtaken),
            releases_failed: get(&self.releases_failed),
            phantoms_released: get(&self.phantoms_released),
            rollbacks: get(&self.rollbacks),
            watch_restarts: get(&self.watch_restarts),
            reconciles: get(&self.reconciles),
            events_retried: get(&self.events_retried),
            events_outbox: get(&self.events_outbox),
            owner_writes: get(&self.owner_writes),
            owner_batches: get(&self.owner_batches),
            owner_batched_writes: get(&self.owner_batched_writes),
            owner_single_writes: get(&self.owner_single_writes),
            owner_batches_refused: get(&self.owner_batches_refused),
            owner_largest_batch: get(&self.owner_largest_batch),
        }
    }

    pub(crate) fn heartbeat(&self, ok: bool, took: Duration) {
        self.engine_up.store(ok, Ordering::Relaxed);
        if ok {
            let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
            self.engine_rtt_us.store(us, Ordering::Relaxed);
        }
    }

    /// The replica started (true) or stopped (false).
    pub(crate) fn serving(&self, on: bool) {
        self.serving.store(on, Ordering::Relaxed);
    }

    /// Whether a claim can be decided now: the replica runs and its last liveness
    /// renewal reached the engine.
    pub(crate) fn decides_claims(&self) -> bool {
        self.serving.load(Ordering::Relaxed)
            && self.engine_up()
            && !self.fenced.load(Ordering::Relaxed)
    }

    /// Another process took the replica's liveness entry.
    pub(crate) fn fence(&self) {
        self.fenced.store(true, Ordering::Relaxed);
    }

    /// Whether the last liveness renewal reached the engine.
    pub(crate) fn engine_up(&self) -> bool {
        self.engine_up.load(Ordering::Relaxed)
    }
    pub(crate) fn recorded(&self) {
        add(&self.commands_recorded);
    }
    pub(crate) fn record_failed(&self) {
        add(&self.command_records_failed);
    }
    pub(crate) fn adopted(&self, n: usize) {
        self.commands_adopted.fetch_add(n as u64, Ordering::Relaxed);
    }
    pub(crate) fn claim_overtaken(&self) {
        add(&self.claims_overtaken);
    }
    pub(crate) fn release_failed(&self) {
        add(&self.releases_failed);
    }
    pub(crate) fn phantom(&self) {
        add(&self.phantoms_released);
    }
    pub(crate) fn rollback(&self) {
        add(&self.rollbacks);
    }
    pub(crate) fn watch_restart(&self) {
        add(&self.watch_restarts);
    }
    pub(crate) fn reconciled(&self) {
        add(&self.reconciles);
    }
    pub(crate) fn granted(&self) {
        add(&self.claims_granted);
    }
    pub(crate) fn held(&self) {
        add(&self.claims_held);
    }
    pub(crate) fn unavailable(&self) {
        add(&self.claims_unavailable);
    }
    pub(crate) fn conflict(&self) {
        add(&self.cas_conflicts);
    }
    pub(crate) fn lost(&self) {
        add(&self.ownership_lost);
    }
    pub(crate) fn routed(&self, ok: bool) {
        add(&self.routed_requests);
        if !ok {
            add(&self.routed_failures);
        }
    }
    pub(crate) fn published(&self, ok: bool) {
        add(if ok {
            &self.events_published
        } else {
            &self.events_lost
        });
    }
    pub(crate) fn events_lost(&self, n: u64) {
        self.events_lost.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn publish_retried(&self) {
        add(&self.events_retried);
    }
    pub(crate) fn outbox(&self, len: usize) {
        self.events_outbox.store(len as u64, Ordering::Relaxed);
    }
    pub(crate) fn owner_writes(&self, n: usize) {
        self.owner_writes.fetch_add(n as u64, Ordering::Relaxed);
    }
    pub(crate) fn owner_batch(&self, n: usize) {
        add(&self.owner_batches);
        self.owner_batched_writes
            .fetch_add(n as u64, Ordering::Relaxed);
        self.owner_largest_batch
            .fetch_max(n as u64, Ordering::Relaxed);
    }
    pub(crate) fn owner_singles(&self, n: usize) {
        self.owner_single_writes
            .fetch_add(n as u64, Ordering::Relaxed);
    }
    pub(crate) fn owner_batch_refused(&self) {
        add(&self.owner_batches_refused);
    }
}
