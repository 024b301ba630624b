//! The ownership-claim seam's answers: applying a [`Directory`]'s answer (at once or
//! deferred to the driver), and losing an Edge to another Control Plane.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use iop_proto::EdgeHelloRequest;

use crate::time::Instant;

use super::ControlPlane;
use crate::cp::command_state::CommandState;
use crate::cp::conn_table::IdHasher;
#[cfg(doc)]
use crate::cp::directory::Directory;
use crate::cp::directory::{Claim, ClaimAnswer, ClaimError};
use crate::cp::enrolment::CredentialHash;
use crate::cp::ids::ConnectionId;
use crate::cp::record::History;
use crate::cp::{CloseReason, CpEvent};

/// The hellos whose ownership claim the directory deferred, by connection: each
/// waits here, its session marked as claiming, until the claim is answered or the
/// connection ends.
pub(super) type Claims = HashMap<ConnectionId, PendingHello, BuildHasherDefault<IdHasher>>;

/// A hello that passed its checks, waiting for (or given) the directory's answer to
/// its claim.
#[derive(Debug)]
pub(super) struct PendingHello {
    /// The claim put to the directory.
    pub(super) claim: Claim,
    pub(super) hello: EdgeHelloRequest,
    pub(super) credential: CredentialHash,
    /// The negotiated protocol version.
    pub(super) version: u32,
    /// Commands another Control Plane sent the Edge, joined to its own on acceptance.
    pub(super) adopted: Vec<(CommandState, Option<History>)>,
}

impl ControlPlane {
    /// The claims deferred to the directory and not answered yet, in connection order:
    /// a driver that started listening to [`CpEvent::OwnershipClaim`] after the first
    /// hellos arrived, or whose feed of them lost some, takes them up from here (each
    /// once: [`claim_waiting`](Self::claim_waiting) tells whether one still waits).
    pub fn claims_waiting(&self) -> Vec<Claim> {
        let mut claims: Vec<Claim> = self.claims.values().map(|p| p.claim.clone()).collect();
        claims.sort_unstable_by_key(|c| c.conn);
        claims
    }

    /// Whether the hello on `conn` waits on the directory's answer to its claim.
    pub fn claim_waiting(&self, conn: ConnectionId) -> bool {
        self.claims.contains_key(&conn)
    }

    /// The directory's deferred answer to the [`CpEvent::OwnershipClaim`] of `conn`: accept the
    /// hello under the granted session id, reject it `DUPLICATE_EDGE`, or end it
    /// `GoAway{OVERLOADED}`. Pull outputs afterwards, as after any input.
    pub fn handle_claim(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        answer: ClaimAnswer,
    ) -> Result<(), ClaimError> {
        // Back to awaiting its hello until accepted or refused below (both count it
        // out of the pending hellos).
        let Some(pending) = self.claims.remove(&conn) else {
            return Err(ClaimError::NotWaiting);
        };
        if let Some(s) = self.conns.get_mut(&conn) {
            s.unclaim();
        }
        let result = self.answer_claim(now, conn, pending, answer);
        if self.conns.contains_key(&conn) {
            self.reindex(conn);
        }
        result
    }

    /// Applies the directory's `answer` to the hello `pending` on `conn`, at once or
    /// deferred: accept it under the granted session id (superseding the Edge's live
    /// session here), reject it `DUPLICATE_EDGE`, or end it `GoAway{OVERLOADED}`.
    pub(super) fn answer_claim(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        pending: PendingHello,
        answer: ClaimAnswer,
    ) -> Result<(), ClaimError> {
        match answer {
            ClaimAnswer::Granted { session_id } => {
                let entry = self.edges.get(&pending.hello.edge_id);
                let last = entry.map_or(0, |e| e.session_id());
                if session_id <= last {
                    self.close(now, conn, CloseReason::Overloaded);
                    return Err(ClaimError::StaleSessionId {
                        last,
                        given: session_id,
                    });
                }
                let old = entry.and_then(|e| e.live());
                self.accept_hello(now, conn, pending, old, session_id);
            }
            ClaimAnswer::Held => self.reject_duplicate(now, conn),
            // Paced as a burst's refusals are: a directory that cannot decide now (a
            // cluster's replica still reading the records, a group of claims the engine
            // did not take in time) is told apart from one that takes none at all (the
            // engine down: the full `retry_after_overloaded`) by the hellos accepted.
            ClaimAnswer::Unavailable => {
                let retry = self.burst_retry_after(now, conn);
                self.close_retrying(now, conn, CloseReason::Overloaded, Some(retry));
            }
        }
        Ok(())
    }

    /// The directory says session `session_id` of `edge_id`, live here, lost its
    /// ownership record to session `by_session_id` elsewhere: it gets
    /// `GoAway{SUPERSEDED}` and closes, and the view here shows the Edge disconnected
    /// (without [`CpEvent::EdgeDisconnected`]: the Edge is live on the other Control
    /// Plane). False, changing nothing, when that session is not the live one here.
    pub fn handle_ownership_lost(
        &mut self,
        now: Instant,
        edge_id: &str,
        session_id: u64,
        by_session_id: u64,
    ) -> bool {
        let Some(entry) = self.edges.get_mut(edge_id) else {
            return false;
        };
        let Some(conn) = entry.live() else {
            return false;
        };
        let Some(session) = self.conns.get(&conn).and_then(|s| s.established()) else {
            return false;
        };
        if session.session_id() != session_id {
            return false;
        }
        let (slot, old_instance_id) = (session.edge(), session.instance_id().map(str::to_owned));
        entry.went_down();
        let total_supersessions = entry.supersessions();
        self.stats.supersessions += 1;
        self.events.push_back(CpEvent::EdgeSuperseded {
            edge_id: edge_id.to_owned(),
            old_session_id: session_id,
            new_session_id: by_session_id,
            old_instance_id,
            new_instance_id: None,
            total_supersessions,
            flapping: false,
            elsewhere: true,
        });
        self.close(now, conn, CloseReason::Superseded { by_session_id });
        self.drop_load_build(edge_id);
        // Live on the other Control Plane: its commands go on there.
        self.edges.disconnected(slot, now, None);
        self.evict_views();
        if self.conns.contains_key(&conn) {
            self.reindex(conn);
        }
        true
    }
}
