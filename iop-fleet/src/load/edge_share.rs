//! One Edge's load and history as the replica holding it tells another
//! (`iop_proto::cluster::{EdgeLoad, EdgeHistory}`), and the short summary of its load
//! the list of Edges shows ([`LoadSummary`]).

use std::sync::Arc;

use iop_core::cp::load::EdgeLoad;
use iop_core::proto::cluster;

use super::history::{EdgeHistory, EdgeSample};
use super::totals::LoadTotals;
use super::view::{LastOnline, LoadView};

/// A short summary of an Edge's load, for the list of Edges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadSummary {
    /// The sums over its providers, the Edge connected.
    pub totals: LoadTotals,
    /// When the view was last confirmed ([`LoadView::received_at_unix_ms`]).
    pub received_at_unix_ms: u64,
    /// The view is older than the Edge's latest full answer ([`LoadView::partial`]).
    pub partial: bool,
    /// Its nodes that are READY.
    pub nodes_ready: u64,
}

impl LoadView {
    /// Its summary, for the list of Edges.
    pub fn summary(&self) -> LoadSummary {
        LoadSummary {
            totals: self.totals(),
            received_at_unix_ms: self.received_at_unix_ms,
            partial: self.partial,
            nodes_ready: self.load.node_states().ready,
        }
    }

    /// The view as the replica holding the Edge sends it to another.
    pub fn to_message(&self) -> cluster::EdgeLoad {
        cluster::EdgeLoad {
            status: Some(self.load.to_status()),
            pages: self.load.pages(),
            received_at_unix_ms: self.received_at_unix_ms,
            partial: self.partial,
            live: self.live,
            last_online: self
                .last_online
                .iter()
                .map(|l| cluster::LastOnline {
                    capacity: l.capacity,
                    long_context_capacity: l.long_context_capacity,
                    at_unix_ms: l.at_unix_ms,
                })
                .collect(),
        }
    }

    /// The view another replica sent ([`to_message`](Self::to_message)); `None`
    /// without a status. Last-online capacities past the view's providers are left
    /// out, missing ones read as never seen online.
    pub fn from_message(m: &cluster::EdgeLoad) -> Option<Self> {
        let load = Arc::new(EdgeLoad::from_status(m.status.as_ref()?, m.pages));
        let providers = load.providers().len();
        let mut last_online: Vec<LastOnline> = m
            .last_online
            .iter()
            .take(providers)
            .map(|l| LastOnline {
                capacity: l.capacity,
                long_context_capacity: l.long_context_capacity,
                at_unix_ms: l.at_unix_ms,
            })
            .collect();
        last_online.resize(providers, LastOnline::default());
        Some(Self {
            load,
            last_online: last_online.into(),
            received_at_unix_ms: m.received_at_unix_ms,
            partial: m.partial,
            live: m.live,
        })
    }
}

impl From<&LoadSummary> for cluster::LoadSummary {
    fn from(s: &LoadSummary) -> Self {
        Self {
            totals: Some((&s.totals).into()),
            received_at_unix_ms: s.received_at_unix_ms,
            partial: s.partial,
            nodes_ready: s.nodes_ready,
        }
    }
}

impl From<&cluster::LoadSummary> for LoadSummary {
    fn from(s: &cluster::LoadSummary) -> Self {
        Self {
            totals: s.totals.as_ref().map(Into::into).unwrap_or_default(),
            received_at_unix_ms: s.received_at_unix_ms,
            partial: s.partial,
            nodes_ready: s.nodes_ready,
        }
    }
}

/// `edge_id`'s `history` (sampled every `interval_ms`) as one message, each provider's
/// uses named by `view`'s providers (node by node) when the view is at hand.
pub fn edge_history_message(
    edge_id: &str,
    history: &EdgeHistory,
    view: Option<&EdgeLoad>,
    interval_ms: u64,
) -> cluster::EdgeHistory {
    let mut names = view.into_iter().flat_map(|l| {
        l.nodes().flat_map(|n| {
            n.providers()
                .map(move |p| (n.node_id().to_owned(), p.provider_id().to_owned()))
        })
    });
    cluster::EdgeHistory {
        edge_id: edge_id.to_owned(),
        interval_ms,
        samples: history
            .samples()
            .map(|s| cluster::EdgeSample {
                at_unix_ms: s.at_unix_ms,
                capacity: s.capacity,
                in_flight: s.in_flight,
                queued: s.queued,
            })
            .collect(),
        providers: (0..history.providers())
            .map(|i| {
                let (node_id, provider_id) = names.next().unwrap_or_default();
                cluster::ProviderUses {
                    node_id,
                    provider_id,
                    uses: history.raw_uses(i).collect(),
                }
            })
            .collect(),
    }
}

/// One sample of a [`cluster::EdgeHistory`] as an [`EdgeSample`].
pub fn edge_sample(s: &cluster::EdgeSample) -> EdgeSample {
    EdgeSample {
        at_unix_ms: s.at_unix_ms,
        capacity: s.capacity,
        in_flight: s.in_flight,
        queued: s.queued,
    }
}

/// A provider's use as [`cluster::ProviderUses`] carries it: `in_flight / capacity`
/// (to half a percent, at most 1.0), `None` while it was offline or had no capacity.
pub fn provider_use(raw: u8) -> Option<f32> {
    (raw <= super::history::MAX_USE).then(|| f32::from(raw) / 200.0)
}
