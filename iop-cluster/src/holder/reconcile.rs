//! What a holder owes and checks: releases retried until done, reads of records that
//! may be phantoms, the supervised watch, and the periodic reconcile (PROTOCOL.md §8
//! "Watches are supervised, ownership is reconciled").

use iop_driver::iop_core::Instant;

use super::{Action, Holder, Op, OpResult, Owed, Purpose, Sessions};
use crate::ownership::WriteError;
use crate::record::OwnerRecord;

impl Holder {
    /// Owes the release of session `session_id` of `edge_id`, tried at once.
    pub(super) fn owe_release(&mut self, now: Instant, edge_id: &str, session_id: u64) {
        self.owed.insert(
            (edge_id.to_owned(), session_id),
            Owed {
                due: now,
                delay: self.config.retry_base,
                in_flight: false,
            },
        );
        self.issue_releases(now);
    }

    /// Sends every owed release that is due and not in flight.
    fn issue_releases(&mut self, now: Instant) {
        let due: Vec<(String, u64)> = self
            .owed
            .iter_mut()
            .filter(|(_, o)| !o.in_flight && o.due <= now)
            .map(|(k, o)| {
                o.in_flight = true;
                k.clone()
            })
            .collect();
        for (edge_id, session_id) in due {
            let op = Op::Write {
                edge_id: edge_id.clone(),
                record: OwnerRecord::closed(&self.me),
                expected: Some(session_id),
            };
            self.run(
                Purpose::Release {
                    edge_id,
                    session_id,
                },
                op,
            );
        }
    }

    pub(super) fn released(
        &mut self,
        now: Instant,
        edge_id: String,
        session_id: u64,
        result: OpResult,
        core: &mut impl Sessions,
    ) {
        let key = (edge_id, session_id);
        match result {
            OpResult::Written(Ok(revision)) => {
                self.owed.remove(&key);
                self.remember(&key.0, revision, Some(OwnerRecord::closed(&self.me)), core);
            }
            // The record moved on (or a retried release had landed): nothing to do.
            OpResult::Written(Err(WriteError::Conflict)) => {
                self.owed.remove(&key);
            }
            _ => {
                self.stats.release_failed();
                let max = self.config.retry_max;
                if let Some(o) = self.owed.get_mut(&key) {
                    o.in_flight = false;
                    o.due = now + o.delay;
                    o.delay = (o.delay * 2).min(max);
                }
            }
        }
    }

    /// Reads `edge_id`'s record from the leader: a live record of this replica's with
    /// no session here is released.
    pub(super) fn check(&mut self, _now: Instant, edge_id: &str) {
        if self.checking.insert(edge_id.to_owned()) {
            self.to_read.push_back(Purpose::Check {
                edge_id: edge_id.to_owned(),
            });
            self.next_reads();
        }
    }

    /// Issues queued reads while fewer than the cap are in flight.
    pub(super) fn next_reads(&mut self) {
        while self.reads_in_flight < self.config.max_reads_in_flight
            && let Some(purpose) = self.to_read.pop_front()
        {
            let edge_id = match &purpose {
                Purpose::Check { edge_id } | Purpose::Reconcile { edge_id, .. } => edge_id.clone(),
                _ => continue,
            };
            self.run(
                purpose,
                Op::Read {
                    edge_id,
                    leader: true,
                },
            );
        }
    }

    pub(super) fn checked(
        &mut self,
        now: Instant,
        edge_id: String,
        result: OpResult,
        core: &mut impl Sessions,
    ) {
        self.checking.remove(&edge_id);
        if let OpResult::Read(Ok(Some(current))) = result
            && self.remember(&edge_id, current.revision, current.record, core)
        {
            self.stats.phantom();
            self.owe_release(now, &edge_id, current.revision);
        }
    }

    pub(super) fn reconciled(
        &mut self,
        now: Instant,
        edge_id: String,
        session_id: u64,
        result: OpResult,
        core: &mut impl Sessions,
    ) {
        let OpResult::Read(Ok(current)) = result else {
            return;
        };
        match current {
            // Behind the session (or gone): the engine lost the write that granted it,
            // and another claim could be granted the same session id.
            // At the session's revision, another value: the engine lost the grant's
            // write and gave its revision to another.
            Some(c)
                if c.revision == session_id
                    && !c
                        .record
                        .as_ref()
                        .is_some_and(|r| r.live && r.replica == self.me) =>
            {
                self.stats.rollback();
                self.lose(&edge_id, session_id, c.revision, core);
            }
            Some(c) if c.revision < session_id => {
                self.stats.rollback();
                self.lose(&edge_id, session_id, c.revision, core);
            }
            None => {
                self.stats.rollback();
                self.lose(&edge_id, session_id, 0, core);
            }
            Some(c) => {
                if self.remember(&edge_id, c.revision, c.record, core) {
                    self.stats.phantom();
                    self.owe_release(now, &edge_id, c.revision);
                }
            }
        }
    }

    /// Something is due: an owed release, a watch restart, the periodic reconcile.
    pub fn handle_timeout(&mut self, now: Instant, core: &mut impl Sessions) {
        let restart = self.watch.restart_at.is_some_and(|at| at <= now);
        if restart || self.next_reconcile <= now {
            self.reconcile(now, core);
        }
        self.issue_releases(now);
    }

    /// The watch ended or failed: it is restarted after a backoff (at once the first
    /// time after it ran a while), with a reconcile.
    pub fn watch_ended(&mut self, now: Instant) {
        self.stats.watch_restart();
        if now.saturating_duration_since(self.watch.started) >= self.config.retry_max {
            self.watch.delay = self.config.retry_base;
        }
        self.watch.restart_at = Some(now + self.watch.delay);
        self.watch.delay = (self.watch.delay * 2).min(self.config.retry_max);
    }

    /// The driver's connection to the engine came back: reconcile now.
    pub fn engine_reconnected(&mut self, now: Instant, core: &mut impl Sessions) {
        self.reconcile(now, core);
    }

    /// Sweeps sessions the core no longer has, reads every held record from the
    /// leader, checks records naming this replica that nothing here stands for,
    /// retries owed releases, and rebuilds the fleet map from a fresh watch.
    fn reconcile(&mut self, now: Instant, core: &mut impl Sessions) {
        self.stats.reconciled();
        self.next_reconcile = now + self.config.reconcile_every;
        // A disconnect the driver never reported (a lagging subscription).
        let gone: Vec<(String, u64)> = self
            .sessions()
            .filter(|(e, s)| !core.live(e, *s))
            .map(|(e, s)| (e.to_owned(), s))
            .collect();
        for (edge_id, session_id) in gone {
            self.session_ended(now, &edge_id, session_id);
        }
        // A read still queued from the last reconcile is replaced by this one's.
        self.to_read
            .retain(|p| !matches!(p, Purpose::Reconcile { .. }));
        let held: Vec<(String, u64)> = self.sessions().map(|(e, s)| (e.to_owned(), s)).collect();
        for (edge_id, session_id) in held {
            self.to_read.push_back(Purpose::Reconcile {
                edge_id,
                session_id,
            });
        }
        let phantoms: Vec<String> = self
            .fleet
            .iter()
            .filter(|(e, c)| {
                c.record
                    .as_ref()
                    .is_some_and(|r| r.live && r.replica == self.me)
                    && self
                        .held
                        .get(*e)
                        .is_none_or(|h| h.pending == 0 && h.session != Some(c.revision))
            })
            .map(|(e, _)| e.clone())
            .collect();
        for edge_id in phantoms {
            self.check(now, &edge_id);
        }
        for owed in self.owed.values_mut().filter(|o| !o.in_flight) {
            owed.due = now;
        }
        self.start_watch(now);
        self.next_reads();
    }

    /// Asks for a fresh watch, whose replay rebuilds the fleet map.
    pub(super) fn start_watch(&mut self, now: Instant) {
        self.watch.started = now;
        self.watch.restart_at = None;
        self.rebuild = Some(std::collections::HashMap::new());
        self.actions.push_back(Action::Watch);
    }
}
