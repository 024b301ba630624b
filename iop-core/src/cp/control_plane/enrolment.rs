//! Who may stay enrolled (PROTOCOL.md §4.1.2 step 4, §11 `CREDENTIAL_REVOKED`):
//! revoking an Edge, and replacing the enrolment policy, end the live sessions that no
//! longer pass it.

use crate::cp::CloseReason;
use crate::cp::enrolment::EnrolmentPolicy;
use crate::cp::error::RevokeError;
use crate::cp::ids::ConnectionId;
use crate::time::Instant;

use super::ControlPlane;

impl ControlPlane {
    /// Revokes `edge_id`: removes it from the allow list (if the policy is one) and
    /// ends its live session with `GoAway{CREDENTIAL_REVOKED}`. With
    /// [`EnrolmentPolicy::AcceptAny`] the Edge may enrol again.
    pub fn revoke(&mut self, now: Instant, edge_id: &str) -> Result<(), RevokeError> {
        let listed = match &mut self.policy {
            EnrolmentPolicy::AllowList(list) => list.remove(edge_id),
            EnrolmentPolicy::AcceptAny => false,
        };
        let live = self.live_conn(edge_id);
        if let Some(conn) = live {
            self.close(now, conn, CloseReason::CredentialRevoked);
        }
        if listed || live.is_some() {
            Ok(())
        } else {
            Err(RevokeError::UnknownEdge(edge_id.to_owned()))
        }
    }

    /// Replaces the enrolment policy. Every live session whose Edge id and credential
    /// no longer pass it ends with `GoAway{CREDENTIAL_REVOKED}`.
    pub fn set_enrolment_policy(&mut self, now: Instant, policy: EnrolmentPolicy) {
        self.policy = policy;
        let revoked: Vec<ConnectionId> = self
            .edges
            .values()
            .filter_map(|e| e.live())
            .filter(|conn| {
                self.conns
                    .get(conn)
                    .and_then(|s| s.established())
                    .is_some_and(|s| self.policy.check(s.edge_id(), s.credential()).is_err())
            })
            .collect();
        for conn in revoked {
            self.close(now, conn, CloseReason::CredentialRevoked);
        }
    }

    /// The enrolment policy in force.
    pub fn enrolment_policy(&self) -> &EnrolmentPolicy {
        &self.policy
    }
}
