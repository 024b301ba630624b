//! Connection ownership: generations and the outcomes of connect, ready and close.

use std::fmt;

use crate::proto::NodeState;

use super::node::Ownership;
use super::{NodeRegistry, RegistryEventKind};

/// The ownership generation of a node connection.
///
/// Every accepted connection gets a strictly increasing generation (registry-wide);
/// `Generation::NONE` (0) means "never connected".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Generation(pub(crate) u64);

impl Generation {
    /// No connection yet.
    pub const NONE: Generation = Generation(0);

    /// The number reported on the wire.
    pub fn get(self) -> u64 {
        self.0
    }

    /// A generation from its wire number (e.g. to refer to a connection by number).
    pub fn from_raw(raw: u64) -> Self {
        Self(raw)
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a node connection was not accepted. Nothing changed and no generation was used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// No such node is configured.
    #[error("node is not configured")]
    UnknownNode,
    /// The node already has a live owner (PENDING or READY): this connection is a
    /// duplicate. Close it; the owner is untouched.
    #[error("duplicate connection: generation {owner} already owns the node ({state:?})")]
    Duplicate {
        /// The live owner's generation.
        owner: Generation,
        /// The live owner's state.
        state: NodeState,
    },
    /// The generation counter is exhausted (after 2^64 − 1 connections).
    #[error("no generations left")]
    GenerationsExhausted,
}

/// What marking a connection dispatch-ready did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub enum ReadyOutcome {
    /// PENDING → READY; `NODE_READY` was queued.
    Ready,
    /// The connection already was the READY owner: nothing changed.
    AlreadyReady,
    /// The generation is not the node's current PENDING owner: nothing changed.
    Stale,
    /// No such node is configured: nothing changed.
    UnknownNode,
}

/// What closing a connection did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub enum CloseOutcome {
    /// The READY owner closed: node → DISCONNECTED, its leases released,
    /// `NODE_DISCONNECTED` queued.
    Disconnected {
        /// How many leases were dropped.
        released_leases: u32,
    },
    /// The PENDING owner closed: the node is back where it was before the connection
    /// (state, generation and transition time), no event.
    PendingAbandoned {
        /// The state it returned to (CONFIGURED or DISCONNECTED).
        restored: NodeState,
    },
    /// Not the current owner's generation (a rejected duplicate, an older connection, or
    /// one already closed): nothing changed, no event.
    Stale,
    /// No such node is configured: nothing changed.
    UnknownNode,
}

impl NodeRegistry {
    /// Accepts a connection for a node: it becomes the PENDING owner with a new
    /// generation. Refused, changing nothing, when the node is unknown or already has a
    /// live owner (duplicate).
    pub fn connect(&mut self, node_id: &str, now_unix_ms: u64) -> Result<Generation, ConnectError> {
        let next = self.last_generation.checked_add(1);
        let entry = self
            .nodes
            .get_mut(node_id)
            .ok_or(ConnectError::UnknownNode)?;
        if entry.live_owner() {
            return Err(ConnectError::Duplicate {
                owner: entry.ownership.generation,
                state: entry.ownership.state,
            });
        }
        let next = next.ok_or(ConnectError::GenerationsExhausted)?;
        entry.before_pending = Some(entry.ownership);
        entry.ownership = Ownership {
            state: NodeState::Pending,
            generation: Generation(next),
            last_transition_unix_ms: now_unix_ms,
        };
        self.last_generation = next;
        self.bump();
        Ok(Generation(next))
    }

    /// [`connect`](Self::connect) and [`mark_ready`](Self::mark_ready) in one step,
    /// for a node that is ready as soon as it is connected (one the Edge runs itself):
    /// READY with a new generation, which [`close`](Self::close) takes later.
    pub fn connect_ready(
        &mut self,
        node_id: &str,
        now_unix_ms: u64,
    ) -> Result<Generation, ConnectError> {
        let generation = self.connect(node_id, now_unix_ms)?;
        // Just connected under this generation: PENDING → READY cannot be refused.
        let ready = self.mark_ready(node_id, generation, now_unix_ms);
        debug_assert_eq!(ready, ReadyOutcome::Ready);
        Ok(generation)
    }

    /// Marks the PENDING owner `generation` dispatch-ready: → READY, `NODE_READY`.
    pub fn mark_ready(
        &mut self,
        node_id: &str,
        generation: Generation,
        now_unix_ms: u64,
    ) -> ReadyOutcome {
        let Some(entry) = self.nodes.get_mut(node_id) else {
            return ReadyOutcome::UnknownNode;
        };
        if entry.ownership.generation != generation {
            return ReadyOutcome::Stale;
        }
        match entry.ownership.state {
            NodeState::Pending => {}
            NodeState::Ready => return ReadyOutcome::AlreadyReady,
            _ => return ReadyOutcome::Stale,
        }
        entry.ownership.state = NodeState::Ready;
        entry.ownership.last_transition_unix_ms = now_unix_ms;
        entry.before_pending = None;
        self.bump();
        self.emit(
            node_id,
            RegistryEventKind::Ready,
            generation,
            now_unix_ms,
            "ready",
        );
        ReadyOutcome::Ready
    }

    /// Reports that connection `generation` of a node closed.
    ///
    /// The READY owner → DISCONNECTED, its leases released, `NODE_DISCONNECTED` with
    /// `reason`. The PENDING owner → the node as it was before it connected, no event.
    /// Any other generation is stale: nothing changes.
    pub fn close(
        &mut self,
        node_id: &str,
        generation: Generation,
        reason: &str,
        now_unix_ms: u64,
    ) -> CloseOutcome {
        let Some(entry) = self.nodes.get_mut(node_id) else {
            return CloseOutcome::UnknownNode;
        };
        if entry.ownership.generation != generation || !entry.live_owner() {
            return CloseOutcome::Stale;
        }
        if entry.ownership.state == NodeState::Pending {
            let before = entry.before_pending.take().unwrap_or(Ownership {
                state: NodeState::Configured,
                generation: Generation::NONE,
                last_transition_unix_ms: now_unix_ms,
            });
            entry.ownership = before;
            let restored = before.state;
            self.bump();
            return CloseOutcome::PendingAbandoned { restored };
        }
        let released_leases = entry.release_all_leases();
        entry.ownership.state = NodeState::Disconnected;
        entry.ownership.last_transition_unix_ms = now_unix_ms;
        self.bump();
        self.emit(
            node_id,
            RegistryEventKind::Disconnected,
            generation,
            now_unix_ms,
            reason,
        );
        CloseOutcome::Disconnected { released_leases }
    }
}
