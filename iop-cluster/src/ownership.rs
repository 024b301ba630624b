//! Who may take an Edge id: the claim decision (PROTOCOL.md §8 "Ownership",
//! "Duplicates across replicas") and the store it is made against.
//!
//! A claim reads the Edge's record, [`decide`]s, and writes its own live record by
//! compare-and-set on the revision it read (or creates it when there is none). The
//! write's revision is the new session's `session_id`. Losing the race — another
//! replica wrote in between — means reading again; after [`MAX_ATTEMPTS`] the claim is
//! answered `Unavailable` (the Edge retries later). The procedure is the
//! [`Holder`](crate::holder::Holder)'s; the decision is a pure function of the record,
//! the claim and the former owner's liveness.

use std::future::Future;

use iop_driver::iop_core::cp::DuplicatePolicy;

use crate::record::{Current, OwnerRecord};

/// Compare-and-set writes a contended claim may lose before it gives up (`Unavailable`).
pub const MAX_ATTEMPTS: usize = 5;

/// Why the engine could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cluster engine: {0}")]
pub struct StoreError(pub String);

/// Why a conditional write did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The record is not at the expected revision (or exists, for a create).
    #[error("the record moved on")]
    Conflict,
    /// The engine could not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The ownership records and replica liveness, as a claim needs them. Implemented over
/// JetStream key-value buckets ([`NatsStore`](crate::NatsStore)) and in memory
/// ([`MemoryStore`](crate::MemoryStore)).
pub trait OwnershipStore: Send + Sync {
    /// The record of `key`, if any.
    fn entry(&self, key: &str) -> impl Future<Output = Result<Option<Current>, StoreError>> + Send;
    /// Writes `record` if `key` has none; its revision.
    fn create(
        &self,
        key: &str,
        record: &OwnerRecord,
    ) -> impl Future<Output = Result<u64, WriteError>> + Send;
    /// Writes `record` if `key` is at revision `expected`; its new revision.
    fn update(
        &self,
        key: &str,
        record: &OwnerRecord,
        expected: u64,
    ) -> impl Future<Output = Result<u64, WriteError>> + Send;
    /// Whether `replica`'s liveness entry is there (it has not expired).
    fn replica_alive(&self, replica: &str)
    -> impl Future<Output = Result<bool, StoreError>> + Send;
    /// The record of `key` as the stream's leader has it (never a follower's copy,
    /// which may lag): for reads that decide whether a session stays.
    fn leader_entry(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<Current>, StoreError>> + Send;
}

/// What a claim knows besides the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimContext {
    /// What a live owner means for the claim.
    pub policy: DuplicatePolicy,
    /// The session id of this replica's own live session of the Edge, if one.
    pub local_session_id: Option<u64>,
}

/// The session a claim takes the Edge id from, on another replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Former {
    /// The replica that held it.
    pub replica: String,
    /// Its session id (the record's revision).
    pub session_id: u64,
}

/// What to do with a claim, given the record read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write this replica's live record: create it (`expected` `None`) or compare-and-set
    /// on `expected`; `former` is told it lost the Edge.
    Take {
        /// The revision read (`None`: no record).
        expected: Option<u64>,
        /// A live session of another replica this write supersedes.
        former: Option<Former>,
    },
    /// A live owner holds the id and the policy is `Reject`.
    Held,
    /// The former owner's liveness must be read first (a live record of another
    /// replica under `Reject`).
    AskLiveness(String),
}

/// The decision for a claim by replica `me`, given the record read (`current`) and,
/// after [`Decision::AskLiveness`], whether the record's replica is alive.
pub fn decide(
    me: &str,
    claim: ClaimContext,
    current: Option<&Current>,
    owner_alive: Option<bool>,
) -> Decision {
    let Some(current) = current else {
        return Decision::Take {
            expected: None,
            former: None,
        };
    };
    let expected = Some(current.revision);
    let record = match &current.record {
        Some(r) if r.live => r,
        // Closed, unreadable or deleted: free.
        _ => {
            return Decision::Take {
                expected,
                former: None,
            };
        }
    };
    if record.replica == me {
        // Ours. A live session under that id here is a duplicate on this replica (the
        // core supersedes it on `Replace`); without one, the record is stale (a lost
        // close, or this replica restarted) and free.
        let ours_live = claim.local_session_id == Some(current.revision);
        return match (ours_live, claim.policy) {
            (true, DuplicatePolicy::Reject) => Decision::Held,
            _ => Decision::Take {
                expected,
                former: None,
            },
        };
    }
    let former = Some(Former {
        replica: record.replica.clone(),
        session_id: current.revision,
    });
    match (claim.policy, owner_alive) {
        (DuplicatePolicy::Reject, None) => Decision::AskLiveness(record.replica.clone()),
        (DuplicatePolicy::Reject, Some(true)) => Decision::Held,
        // Replace, or Reject against an owner whose liveness expired.
        _ => Decision::Take { expected, former },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(replica: &str, live: bool, revision: u64) -> Current {
        Current {
            record: Some(OwnerRecord {
                replica: replica.into(),
                live,
            }),
            revision,
        }
    }

    const REPLACE: ClaimContext = ClaimContext {
        policy: DuplicatePolicy::Replace,
        local_session_id: None,
    };
    const REJECT: ClaimContext = ClaimContext {
        policy: DuplicatePolicy::Reject,
        local_session_id: None,
    };

    #[test]
    fn free_records_are_taken_by_compare_and_set() {
        let take = |expected| Decision::Take {
            expected,
            former: None,
        };
        assert_eq!(decide("a", REJECT, None, None), take(None));
        assert_eq!(
            decide("a", REJECT, Some(&at("b", false, 7)), None),
            take(Some(7))
        );
        let unreadable = Current {
            record: None,
            revision: 9,
        };
        assert_eq!(decide("a", REJECT, Some(&unreadable), None), take(Some(9)));
    }

    #[test]
    fn a_live_owner_elsewhere_is_superseded_or_holds_while_alive() {
        let live_b = at("b", true, 7);
        let former = Some(Former {
            replica: "b".into(),
            session_id: 7,
        });
        assert_eq!(
            decide("a", REPLACE, Some(&live_b), None),
            Decision::Take {
                expected: Some(7),
                former: former.clone()
            }
        );
        assert_eq!(
            decide("a", REJECT, Some(&live_b), None),
            Decision::AskLiveness("b".into())
        );
        assert_eq!(
            decide("a", REJECT, Some(&live_b), Some(true)),
            Decision::Held
        );
        assert_eq!(
            decide("a", REJECT, Some(&live_b), Some(false)),
            Decision::Take {
                expected: Some(7),
                former
            }
        );
    }

    #[test]
    fn our_own_record_is_a_local_duplicate_or_stale() {
        let live_a = at("a", true, 7);
        let mine = |policy| ClaimContext {
            policy,
            local_session_id: Some(7),
        };
        let take = Decision::Take {
            expected: Some(7),
            former: None,
        };
        assert_eq!(
            decide("a", mine(DuplicatePolicy::Reject), Some(&live_a), None),
            Decision::Held
        );
        assert_eq!(
            decide("a", mine(DuplicatePolicy::Replace), Some(&live_a), None),
            take
        );
        // No live session under the record's id here: a lost close or a restart; the
        // record is free.
        assert_eq!(decide("a", REJECT, Some(&live_a), None), take);
    }
}
