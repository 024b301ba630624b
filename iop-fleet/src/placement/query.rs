//! What a router asks ([`PlacementQuery`]) and what it is answered
//! ([`PlacementAnswer`]): the providers that can take one more request of a model now,
//! best first, and why the others cannot.

use std::sync::Arc;

use super::pick::Pick;

/// The most candidates one placement lists.
pub const MAX_PLACEMENT_LIMIT: usize = 1000;
/// Candidates listed when the query names no limit.
pub const DEFAULT_PLACEMENT_LIMIT: usize = 10;
/// The most node labels one query may require.
pub const MAX_PLACEMENT_LABELS: usize = 16;

/// Which providers a router wants for its next request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlacementQuery {
    /// The model the request is for: a provider must list it.
    pub model: String,
    /// The request is long-context: the provider's long-context pool must have room
    /// too, and its long-context numbers rank it.
    pub long_context: bool,
    /// Candidates listed at most (1 to [`MAX_PLACEMENT_LIMIT`]).
    pub limit: usize,
    /// Node labels the provider's node must carry, each `key = value`.
    pub labels: Vec<(String, String)>,
    /// List providers whose numbers are stale too (marked so), after every current
    /// one: for a router that would rather guess than refuse.
    pub include_stale: bool,
    /// Which candidate a reserving placement reserves (and lists first): the best,
    /// or one drawn at random by free slots ([`Pick`]).
    pub pick: Pick,
}

impl PlacementQuery {
    /// The best [`DEFAULT_PLACEMENT_LIMIT`] providers for one request of `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            long_context: false,
            limit: DEFAULT_PLACEMENT_LIMIT,
            labels: Vec::new(),
            include_stale: false,
            pick: Pick::Best,
        }
    }

    /// Checks the query's bounds.
    pub fn validate(&self) -> Result<(), PlacementError> {
        if self.model.is_empty() || self.model.len() > 128 {
            return Err(PlacementError::Model);
        }
        if self.limit == 0 || self.limit > MAX_PLACEMENT_LIMIT {
            return Err(PlacementError::Limit);
        }
        if self.labels.len() > MAX_PLACEMENT_LABELS
            || self
                .labels
                .iter()
                .any(|(k, v)| k.is_empty() || k.len() > 63 || v.len() > 63)
        {
            return Err(PlacementError::Labels);
        }
        Ok(())
    }
}

/// Why a [`PlacementQuery`] cannot be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// No model, or one over 128 bytes.
    #[error("model: 1 to 128 bytes")]
    Model,
    /// The limit is 0 or over [`MAX_PLACEMENT_LIMIT`].
    #[error("limit: 1 to {MAX_PLACEMENT_LIMIT}")]
    Limit,
    /// More than [`MAX_PLACEMENT_LABELS`] labels, or a key empty or a key or value over
    /// 63 bytes.
    #[error("labels: at most {MAX_PLACEMENT_LABELS}, keys 1 to 63 bytes, values up to 63")]
    Labels,
}

impl PlacementError {
    /// A stable machine-readable code.
    pub fn code(self) -> &'static str {
        match self {
            Self::Model => "bad_model",
            Self::Limit => "bad_limit",
            Self::Labels => "bad_labels",
        }
    }
}

/// One provider that can take the request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Candidate {
    /// Its Edge.
    pub edge_id: Arc<str>,
    /// Its node.
    pub node_id: String,
    /// The provider.
    pub provider_id: String,
    /// Its `capacity`.
    pub capacity: u32,
    /// Its `in_flight`, as last reported.
    pub in_flight: u32,
    /// Its `queued`, as last reported.
    pub queued: u32,
    /// Its `long_context_capacity`.
    pub long_context_capacity: u32,
    /// Its `long_context_in_flight`, as last reported.
    pub long_context_in_flight: u32,
    /// Its `long_context_queued`, as last reported.
    pub long_context_queued: u32,
    /// Its `admission_eligible` (always true for a candidate).
    pub admission_eligible: bool,
    /// Requests placed on it with a reservation since its numbers were last reported:
    /// counted as in flight.
    pub reserved: u32,
    /// Free slots for this request: `capacity − in_flight − reserved` (and at most the
    /// long-context pool's, for a long-context request). The first ranking key.
    pub free: u32,
    /// Milliseconds since its Edge last proved these numbers current (a status answer
    /// or an update carrying them; for an Edge that pushes every change, also any
    /// later heartbeat).
    pub age_ms: u64,
    /// Its numbers are older than its Edge's staleness threshold (listed only with
    /// [`PlacementQuery::include_stale`]).
    pub stale: bool,
}

/// Providers of the model that cannot take the request, by the first reason that
/// rules each out (in this order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Excluded {
    /// Providers (of Edges counted here) that do not list the model.
    pub not_serving: u64,
    /// Offline, or their Edge is not connected.
    pub offline: u64,
    /// No free slot (for a long-context request: in either pool), reservations counted.
    pub full: u64,
    /// Online with room but not `admission_eligible` (node not READY, drained,
    /// unhealthy).
    pub not_eligible: u64,
    /// Free, but their numbers are stale: not listed unless asked for.
    pub stale: u64,
    /// Free and current, but their node lacks a required label.
    pub labels: u64,
}

/// The answer to a [`PlacementQuery`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlacementAnswer {
    /// Best first: the most free slots, then the shortest queue, then the most recently
    /// reported numbers.
    pub candidates: Vec<Candidate>,
    /// Providers that list the model.
    pub serving: u64,
    /// Why the others are not candidates.
    pub excluded: Excluded,
    /// A reserving placement counted one more request in flight on the first
    /// candidate.
    pub reserved: bool,
}
