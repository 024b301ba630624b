//! The driver's side of the ownership-claim seam ([`Directory::External`]): answering a
//! claim, and losing an Edge to another Control Plane. See [`Directory`].

use crate::time::Instant;

use super::conn::{ConnState, PendingHello};
#[cfg(doc)]
use super::directory::Directory;
use super::directory::{ClaimAnswer, ClaimError};
use super::endpoint::ControlPlane;
use super::event::{CloseReason, CpEvent};
use super::ids::ConnectionId;
use super::view::Reachability;

impl ControlPlane {
    /// The directory's answer to the [`CpEvent::OwnershipClaim`] of `conn`: accept the
    /// hello under the granted session id, reject it `DUPLICATE_EDGE`, or end it
    /// `GoAway{OVERLOADED}`. Pull outputs afterwards, as after any input.
    pub fn handle_claim(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        answer: ClaimAnswer,
    ) -> Result<(), ClaimError> {
        self.saw(now);
        let Some(c) = self.conns.get_mut(&conn) else {
            return Err(ClaimError::NotWaiting);
        };
        if !matches!(c.state, ConnState::Claiming(_)) {
            return Err(ClaimError::NotWaiting);
        }
        // Back to awaiting its hello until accepted or refused below (both count it
        // out of the pending hellos).
        let ConnState::Claiming(pending) =
            std::mem::replace(&mut c.state, ConnState::AwaitingHello)
        else {
            return Err(ClaimError::NotWaiting);
        };
        let result = match answer {
            ClaimAnswer::Granted { session_id } => {
                let entry = self.edges.get(&pending.hello.edge_id);
                let last = entry.map_or(0, |e| e.view.session_id);
                if session_id <= last {
                    self.close(conn, CloseReason::Overloaded);
                    Err(ClaimError::StaleSessionId {
                        last,
                        given: session_id,
                    })
                } else {
                    let old = entry.and_then(|e| e.live);
                    self.last_session_id = self.last_session_id.max(session_id);
                    let PendingHello {
                        hello,
                        credential,
                        version,
                        adopted,
                    } = *pending;
                    self.accept_hello(
                        now, conn, hello, credential, version, old, session_id, adopted,
                    );
                    Ok(())
                }
            }
            ClaimAnswer::Held => {
                self.reject_duplicate(conn);
                Ok(())
            }
            ClaimAnswer::Unavailable => {
                self.close(conn, CloseReason::Overloaded);
                Ok(())
            }
        };
        if self.conns.contains_key(&conn) {
            self.reindex(conn);
        }
        result
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
        self.saw(now);
        let Some(entry) = self.edges.get_mut(edge_id) else {
            return false;
        };
        let Some(conn) = entry.live else {
            return false;
        };
        let Some(session) = self.conns.get(&conn).and_then(|c| c.session()) else {
            return false;
        };
        if session.session_id != session_id {
            return false;
        }
        let (slot, old_instance_id) = (session.edge, session.instance_id.clone());
        entry.live = None;
        entry.view.reachability = Reachability::Disconnected;
        entry.view.fresh = false;
        let total_supersessions = entry.flaps.total;
        self.stats.supersessions += 1;
        self.events.push_back(CpEvent::EdgeSuperseded {
            edge_id: edge_id.to_owned(),
            old_session_id: session_id,
            new_session_id: by_session_id,
            old_instance_id,
            new_instance_id: None,
            total_supersessions,
            flapping: false,
        });
        self.close(conn, CloseReason::Superseded { by_session_id });
        let latest = self.latest_now;
        self.edges.disconnected(slot, latest);
        self.evict_views();
        if self.conns.contains_key(&conn) {
            self.reindex(conn);
        }
        true
    }
}
