//! Connection ownership: generations and the outcomes of connect, ready and close.

use std::fmt;

use crate::proto::NodeState;

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
