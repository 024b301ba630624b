//! Queue candidate pressure: queued requests and the providers they could run on.
//!
//! A queued request lists candidate `(node_id, provider_id)` pairs. A provider's
//! `queued` is the number of queued requests listing it (`long_context_queued` the
//! long-context ones among them). Entries keep their candidate lists as given: a
//! candidate counts only while its node and provider are configured, so removing a
//! node drops its pressure and configuring it again brings the pressure of still-queued
//! requests back.

use std::collections::BTreeMap;

use super::NodeRegistry;
use super::lease::LeaseKind;

/// Most requests the queue holds.
pub const MAX_QUEUED_REQUESTS: usize = 65_536;
/// Most candidates one queued request may list.
pub const MAX_CANDIDATES: usize = 1_024;

/// One candidate provider of a queued request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Candidate {
    /// The node.
    pub node_id: String,
    /// The provider on that node.
    pub provider_id: String,
}

impl Candidate {
    /// A candidate pair.
    pub fn new(node_id: impl Into<String>, provider_id: impl Into<String>) -> Self {
        Self {
            node_id: node_id.into(),
            provider_id: provider_id.into(),
        }
    }
}

/// Names a queued request, for [`dequeue`](super::NodeRegistry::dequeue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueTicket(pub(crate) u64);

impl QueueTicket {
    /// The ticket's number (unique within one registry).
    pub fn get(self) -> u64 {
        self.0
    }
}

/// Why a request was not queued. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnqueueError {
    /// The request lists no candidate.
    #[error("a queued request needs at least one candidate")]
    NoCandidates,
    /// The request lists more candidates than allowed.
    #[error("{count} candidates, more than the {max} allowed")]
    TooManyCandidates {
        /// How many were given (after removing repeats).
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The queue is full.
    #[error("the queue already holds {max} requests")]
    QueueFull {
        /// The limit.
        max: usize,
    },
}

/// What dequeuing did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub enum DequeueOutcome {
    /// The request left the queue; its candidates' pressure went down.
    Dequeued,
    /// No queued request has this ticket (never issued, or already dequeued).
    UnknownTicket,
}

#[derive(Debug, Clone)]
pub(crate) struct QueuedRequest {
    pub(crate) kind: LeaseKind,
    /// Sorted, without repeats.
    pub(crate) candidates: Vec<Candidate>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    pub(crate) entries: BTreeMap<u64, QueuedRequest>,
    pub(crate) next_ticket: u64,
}

impl NodeRegistry {
    /// Queues a request of `kind` listing `candidates` (repeats are ignored); each
    /// configured candidate provider's `queued` (and for long-context requests its
    /// `long_context_queued`) goes up by one.
    pub fn enqueue(
        &mut self,
        kind: LeaseKind,
        mut candidates: Vec<Candidate>,
    ) -> Result<QueueTicket, EnqueueError> {
        candidates.sort();
        candidates.dedup();
        if candidates.is_empty() {
            return Err(EnqueueError::NoCandidates);
        }
        if candidates.len() > MAX_CANDIDATES {
            return Err(EnqueueError::TooManyCandidates {
                count: candidates.len(),
                max: MAX_CANDIDATES,
            });
        }
        if self.queue.entries.len() >= MAX_QUEUED_REQUESTS {
            return Err(EnqueueError::QueueFull {
                max: MAX_QUEUED_REQUESTS,
            });
        }
        for c in &candidates {
            if let Some(p) = self
                .nodes
                .get_mut(&c.node_id)
                .and_then(|n| n.provider_mut(&c.provider_id))
            {
                p.add_queued(kind);
            }
        }
        let ticket = self.queue.next_ticket;
        self.queue.next_ticket = ticket.saturating_add(1);
        self.queue
            .entries
            .insert(ticket, QueuedRequest { kind, candidates });
        self.bump();
        Ok(QueueTicket(ticket))
    }

    /// Takes a request out of the queue (it was dispatched or abandoned).
    pub fn dequeue(&mut self, ticket: QueueTicket) -> DequeueOutcome {
        let Some(request) = self.queue.entries.remove(&ticket.0) else {
            return DequeueOutcome::UnknownTicket;
        };
        for c in &request.candidates {
            if let Some(p) = self
                .nodes
                .get_mut(&c.node_id)
                .and_then(|n| n.provider_mut(&c.provider_id))
            {
                p.remove_queued(request.kind);
            }
        }
        self.bump();
        DequeueOutcome::Dequeued
    }

    /// Recomputes one node's queue pressure from the queued requests.
    pub(super) fn recount_queue_for(&mut self, node_id: &str) {
        let Some(entry) = self.nodes.get_mut(node_id) else {
            return;
        };
        for p in &mut entry.providers {
            p.queued = 0;
            p.long_queued = 0;
        }
        for request in self.queue.entries.values() {
            for c in request.candidates.iter().filter(|c| c.node_id == node_id) {
                if let Some(p) = entry.provider_mut(&c.provider_id) {
                    p.add_queued(request.kind);
                }
            }
        }
    }
}
