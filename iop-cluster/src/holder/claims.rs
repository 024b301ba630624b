//! The claim procedure (PROTOCOL.md §8 "Ownership"): read the record (or start from
//! the one last seen), [`decide`], write this replica's live record by compare-and-set
//! on the revision read, hand the core the Edge's unfinished commands when it had a
//! session before, and grant — unless a newer revision of the record was seen while the
//! claim was pending.

use iop_driver::iop_core::Instant;
use iop_driver::iop_core::cp::{Claim, ClaimAnswer, ConnectionId};

use super::{Action, Holder, Op, OpResult, Purpose, Sessions, Superseded};
use crate::ownership::{ClaimContext, Decision, Former, MAX_ATTEMPTS, WriteError, decide};
use crate::record::{Current, OwnerRecord};

/// Names one claim a holder is deciding.
pub type ClaimId = u64;

/// A claim being decided.
#[derive(Debug)]
pub(super) struct Run {
    claim: Claim,
    /// Compare-and-set writes that lost a race.
    conflicts: usize,
    stage: Stage,
}

#[derive(Debug)]
enum Stage {
    /// Reading the record; `leader`: from the stream's leader (a refusal is never
    /// decided on a follower's copy, which may lag).
    Read {
        leader: bool,
    },
    Alive(Option<Current>),
    Write {
        expected: Option<u64>,
        former: Option<Former>,
    },
    Adopt {
        session_id: u64,
        former: Option<Former>,
    },
}

fn context(claim: &Claim) -> ClaimContext {
    ClaimContext {
        policy: claim.policy,
        local_session_id: claim.local_session_id,
    }
}

impl Holder {
    /// A claim the core deferred ([`CpEvent::OwnershipClaim`](iop_driver::iop_core::cp::CpEvent::OwnershipClaim)).
    /// It starts from the record as last seen: one write, not a read and a write, when
    /// that is current (a stale one costs a failed write); a record that would refuse
    /// the claim is read again first. A claim taken up twice (from its event and from
    /// the core's list of claims waiting, [`ControlPlaneHandle::claims_waiting`](iop_driver::ControlPlaneHandle::claims_waiting))
    /// is decided once: one being decided, or one answered already (its hello no longer
    /// waits), is left alone.
    pub fn claim(&mut self, _now: Instant, claim: Claim, core: &impl Sessions) {
        if !core.waiting(claim.conn) || !self.claiming.insert(claim.conn) {
            return;
        }
        self.held.entry(claim.edge_id.clone()).or_default().pending += 1;
        self.next_claim += 1;
        let id = self.next_claim;
        let seen = self.fleet.get(&claim.edge_id).cloned();
        let stage = match decide(&self.me, context(&claim), seen.as_ref(), None) {
            Decision::Take { expected, former } => Stage::Write { expected, former },
            _ => Stage::Read { leader: false },
        };
        let run = Run {
            claim,
            conflicts: 0,
            stage,
        };
        self.issue(id, run);
    }

    /// Runs the operation `run`'s stage needs.
    fn issue(&mut self, id: ClaimId, run: Run) {
        let edge_id = run.claim.edge_id.clone();
        let op = match &run.stage {
            Stage::Read { leader } => Op::Read {
                edge_id,
                leader: *leader,
            },
            Stage::Alive(current) => Op::Alive {
                replica: current
                    .as_ref()
                    .and_then(|c| c.record.as_ref())
                    .map(|r| r.replica.clone())
                    .unwrap_or_default(),
            },
            Stage::Write { expected, .. } => Op::Write {
                edge_id,
                record: OwnerRecord::live(&self.me),
                expected: *expected,
            },
            Stage::Adopt { .. } => {
                self.actions.push_back(Action::Adopt {
                    claim: id,
                    edge_id,
                    conn: run.claim.conn,
                });
                self.runs.insert(id, run);
                return;
            }
        };
        self.runs.insert(id, run);
        self.run(Purpose::Claim(id), op);
    }

    pub(super) fn claim_step(
        &mut self,
        now: Instant,
        id: ClaimId,
        result: OpResult,
        core: &mut impl Sessions,
    ) {
        let Some(mut run) = self.runs.remove(&id) else {
            return;
        };
        let edge_id = run.claim.edge_id.clone();
        let placeholder = Stage::Read { leader: false };
        match (std::mem::replace(&mut run.stage, placeholder), result) {
            (Stage::Read { leader }, OpResult::Read(Ok(current))) => {
                if let Some(c) = &current {
                    self.remember(&edge_id, c.revision, c.record.clone(), core);
                }
                self.decided(id, run, current, None, leader, core);
            }
            (Stage::Alive(current), OpResult::Alive(Ok(alive))) => {
                self.decided(id, run, current, Some(alive), true, core);
            }
            (Stage::Write { expected, former }, OpResult::Written(Ok(session_id))) => {
                // Seen newer while pending: another replica took the Edge after this
                // write; granting would leave a session its record does not name.
                let taken = self
                    .fleet
                    .get(&edge_id)
                    .is_some_and(|c| c.revision > session_id);
                self.remember(
                    &edge_id,
                    session_id,
                    Some(OwnerRecord::live(&self.me)),
                    core,
                );
                if taken {
                    self.stats.claim_overtaken();
                    return self.finish(run, ClaimAnswer::Unavailable, core);
                }
                run.stage = Stage::Adopt { session_id, former };
                if expected.is_some() {
                    // The Edge had a record: it may have commands to carry on.
                    self.issue(id, run);
                } else {
                    self.grant(now, run, core);
                }
            }
            (Stage::Write { .. }, OpResult::Written(Err(WriteError::Conflict))) => {
                self.stats.conflict();
                run.conflicts += 1;
                if run.conflicts >= MAX_ATTEMPTS {
                    return self.finish(run, ClaimAnswer::Unavailable, core);
                }
                run.stage = Stage::Read { leader: false };
                self.issue(id, run);
            }
            (Stage::Write { .. }, OpResult::Written(Err(WriteError::Store(_)))) => {
                // The write may have landed (a lost acknowledgement): a live record of
                // ours that nothing here stands for would be a phantom.
                self.finish(run, ClaimAnswer::Unavailable, core);
                self.check(now, &edge_id);
            }
            // The engine could not answer (or an answer of another kind).
            _ => self.finish(run, ClaimAnswer::Unavailable, core),
        }
    }

    /// The claim's decision on the record read (`leader`: from the leader) and the
    /// former owner's liveness.
    fn decided(
        &mut self,
        id: ClaimId,
        mut run: Run,
        current: Option<Current>,
        alive: Option<bool>,
        leader: bool,
        core: &mut impl Sessions,
    ) {
        match decide(&self.me, context(&run.claim), current.as_ref(), alive) {
            Decision::Take { expected, former } => {
                run.stage = Stage::Write { expected, former };
                self.issue(id, run);
            }
            // A refusal is decided on the leader's record (a follower's copy may lag).
            Decision::Held | Decision::AskLiveness(_) if !leader => {
                run.stage = Stage::Read { leader: true };
                self.issue(id, run);
            }
            Decision::AskLiveness(_) if alive.is_none() => {
                run.stage = Stage::Alive(current);
                self.issue(id, run);
            }
            _ => {
                self.stats.held();
                self.finish(run, ClaimAnswer::Held, core);
            }
        }
    }

    /// The core handed the claim's Edge its unfinished commands ([`Action::Adopt`]).
    pub fn adopted(&mut self, now: Instant, id: ClaimId, core: &mut impl Sessions) {
        if self
            .runs
            .get(&id)
            .is_some_and(|r| matches!(r.stage, Stage::Adopt { .. }))
            && let Some(run) = self.runs.remove(&id)
        {
            self.grant(now, run, core);
        }
    }

    /// Grants a claim whose write landed, unless a newer revision was seen meanwhile;
    /// a grant the core refuses (its hello went away) is a record to release.
    fn grant(&mut self, now: Instant, mut run: Run, core: &mut impl Sessions) {
        let Stage::Adopt { session_id, former } =
            std::mem::replace(&mut run.stage, Stage::Read { leader: false })
        else {
            return self.finish(run, ClaimAnswer::Unavailable, core);
        };
        let edge_id = run.claim.edge_id.clone();
        if self
            .fleet
            .get(&edge_id)
            .is_some_and(|c| c.revision > session_id)
        {
            self.stats.claim_overtaken();
            return self.finish(run, ClaimAnswer::Unavailable, core);
        }
        if core.answer(run.claim.conn, ClaimAnswer::Granted { session_id }) {
            self.stats.granted();
            // The core superseded a live session of the Edge here, if it had one.
            self.held.entry(edge_id.clone()).or_default().session = Some(session_id);
            if let Some(former) = former {
                self.actions.push_back(Action::Tell {
                    replica: former.replica,
                    notice: Superseded {
                        edge_id: edge_id.clone(),
                        session_id: former.session_id,
                        by_session_id: session_id,
                        by_replica: self.me.clone(),
                    },
                });
            }
        } else {
            self.owe_release(now, &edge_id, session_id);
        }
        self.unpend(run.claim.conn, &edge_id);
    }

    /// Answers a claim that is not granted.
    fn finish(&mut self, run: Run, answer: ClaimAnswer, core: &mut impl Sessions) {
        if answer == ClaimAnswer::Unavailable {
            self.stats.unavailable();
        }
        core.answer(run.claim.conn, answer);
        self.unpend(run.claim.conn, &run.claim.edge_id);
    }

    fn unpend(&mut self, conn: ConnectionId, edge_id: &str) {
        self.claiming.remove(&conn);
        if let Some(h) = self.held.get_mut(edge_id) {
            h.pending = h.pending.saturating_sub(1);
        }
        self.forget_if_idle(edge_id);
    }
}
