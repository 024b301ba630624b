//! The simulation's engine and Control Plane cores: an ownership bucket with every
//! version of every record (for stale reads and rolled-back writes), liveness entries,
//! and per replica a core that holds hellos and sessions as `ControlPlane` does.

use std::collections::BTreeMap;

use iop_cluster::holder::Sessions;
use iop_cluster::ownership::WriteError;
use iop_cluster::{Current, OwnerRecord};
use iop_driver::iop_core::cp::{ClaimAnswer, ConnectionId};

/// The owners bucket: one revision counter (a stream's sequence), every version kept.
#[derive(Debug, Default)]
pub(crate) struct Store {
    pub(crate) sequence: u64,
    /// Edge → every version written, oldest first.
    pub(crate) history: BTreeMap<String, Vec<Current>>,
    /// Edges in write order, for rolling the last writes back.
    writes: Vec<String>,
}

impl Store {
    pub(crate) fn current(&self, edge: &str) -> Option<Current> {
        self.history.get(edge).and_then(|h| h.last()).cloned()
    }

    /// An older version of `edge`'s record (or none), as a follower behind its
    /// leader may serve.
    pub(crate) fn stale(&self, edge: &str, pick: usize) -> Option<Current> {
        let h = self.history.get(edge)?;
        let i = pick % (h.len() + 1);
        if i == h.len() {
            None
        } else {
            Some(h[i].clone())
        }
    }

    pub(crate) fn write(
        &mut self,
        edge: &str,
        record: &OwnerRecord,
        expected: Option<u64>,
    ) -> Result<u64, WriteError> {
        if self.current(edge).map(|c| c.revision) != expected {
            return Err(WriteError::Conflict);
        }
        self.sequence += 1;
        let current = Current {
            record: Some(record.clone()),
            revision: self.sequence,
        };
        self.history
            .entry(edge.to_owned())
            .or_default()
            .push(current);
        self.writes.push(edge.to_owned());
        Ok(self.sequence)
    }

    /// The engine loses its last `n` acknowledged writes (a leader whose unsynced
    /// writes died with it): records and the sequence go back.
    pub(crate) fn roll_back(&mut self, n: usize) -> Vec<String> {
        let mut touched = Vec::new();
        for _ in 0..n {
            let Some(edge) = self.writes.pop() else { break };
            if let Some(h) = self.history.get_mut(&edge) {
                h.pop();
                if h.is_empty() {
                    self.history.remove(&edge);
                }
            }
            self.sequence -= 1;
            touched.push(edge);
        }
        touched
    }
}

/// What a core did that the Edges see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Edge process `proc` got session `session` of `edge`.
    Accepted {
        edge: String,
        proc: usize,
        session: u64,
    },
    /// Edge process `proc`'s hello or session ended.
    Ended { proc: usize },
}

/// One replica's Control Plane, as its holder reaches it.
#[derive(Debug, Default)]
pub(crate) struct Core {
    /// Hellos waiting for their claim: connection → (edge, Edge process).
    pub(crate) waiting: BTreeMap<ConnectionId, (String, usize)>,
    /// Live sessions: edge → (session id, Edge process).
    pub(crate) live: BTreeMap<String, (u64, usize)>,
    /// The highest session id seen per edge (a grant must be above it).
    pub(crate) last: BTreeMap<String, u64>,
    pub(crate) seen: Vec<Seen>,
}

impl Sessions for Core {
    fn waiting(&self, conn: ConnectionId) -> bool {
        self.waiting.contains_key(&conn)
    }

    fn answer(&mut self, conn: ConnectionId, answer: ClaimAnswer) -> bool {
        let Some((edge, proc)) = self.waiting.remove(&conn) else {
            return false;
        };
        let last = self.last.get(&edge).copied().unwrap_or(0);
        match answer {
            ClaimAnswer::Granted { session_id } if session_id > last => {
                self.last.insert(edge.clone(), session_id);
                // A live session of the Edge here is superseded (no disconnect).
                if let Some((_, old)) = self.live.insert(edge.clone(), (session_id, proc)) {
                    self.seen.push(Seen::Ended { proc: old });
                }
                self.seen.push(Seen::Accepted {
                    edge,
                    proc,
                    session: session_id,
                });
                true
            }
            // Refused, or a stale id: the hello is ended `OVERLOADED`.
            ClaimAnswer::Granted { .. } => {
                self.seen.push(Seen::Ended { proc });
                false
            }
            _ => {
                self.seen.push(Seen::Ended { proc });
                true
            }
        }
    }

    fn lose(&mut self, edge_id: &str, session_id: u64, _by: u64) -> bool {
        match self.live.get(edge_id) {
            Some(&(s, proc)) if s == session_id => {
                self.live.remove(edge_id);
                self.seen.push(Seen::Ended { proc });
                true
            }
            _ => false,
        }
    }

    fn live(&self, edge_id: &str, session_id: u64) -> bool {
        self.live
            .get(edge_id)
            .is_some_and(|(s, _)| *s == session_id)
    }
}
