//! The fleet's load as replicas tell each other (`iop_proto::cluster`, PROTOCOL.md
//! §8): a replica's share of the totals and of their history, made from its own and
//! added into another's, number by number. What another replica sends is bounded
//! here whatever it sends: at most [`MAX_GROUPS`] models and labels, at most
//! [`MAX_LOAD_SAMPLES`] samples.

use iop_core::cp::load::NodeStates;
use iop_core::proto::cluster;

use super::fleet::{FleetLoad, label_tally, model_tally};
use super::history::FleetSample;
use super::totals::LoadTotals;
use crate::config::MAX_LOAD_SAMPLES;

/// The most model and label groups a share adds (each): past it, groups are left out.
pub const MAX_GROUPS: usize = 10_000;

impl From<&LoadTotals> for cluster::Totals {
    fn from(t: &LoadTotals) -> Self {
        Self {
            providers: t.providers,
            providers_offline: t.providers_offline,
            providers_eligible: t.providers_eligible,
            capacity: t.capacity,
            in_flight: t.in_flight,
            queued: t.queued,
            long_context_capacity: t.long_context_capacity,
            long_context_in_flight: t.long_context_in_flight,
            long_context_queued: t.long_context_queued,
            available: t.available,
            offline_capacity: t.offline_capacity,
            offline_long_context_capacity: t.offline_long_context_capacity,
        }
    }
}

impl From<&cluster::Totals> for LoadTotals {
    fn from(t: &cluster::Totals) -> Self {
        Self {
            providers: t.providers,
            providers_offline: t.providers_offline,
            providers_eligible: t.providers_eligible,
            capacity: t.capacity,
            in_flight: t.in_flight,
            queued: t.queued,
            long_context_capacity: t.long_context_capacity,
            long_context_in_flight: t.long_context_in_flight,
            long_context_queued: t.long_context_queued,
            available: t.available,
            offline_capacity: t.offline_capacity,
            offline_long_context_capacity: t.offline_long_context_capacity,
        }
    }
}

fn totals_of(t: Option<&cluster::Totals>) -> LoadTotals {
    t.map(LoadTotals::from).unwrap_or_default()
}

fn node_states(n: &NodeStates) -> cluster::NodeStates {
    cluster::NodeStates {
        configured: n.configured,
        pending: n.pending,
        ready: n.ready,
        disconnected: n.disconnected,
        other: n.other,
    }
}

impl FleetLoad {
    /// This fleet as a replica's share, for another replica to
    /// [`add_share`](Self::add_share).
    pub fn to_share(&self) -> cluster::FleetShare {
        let group = |key: &str, value: &str, t: &super::fleet::Tally| cluster::Group {
            key: key.to_owned(),
            value: value.to_owned(),
            totals: Some((&t.totals).into()),
            members: t.members,
        };
        cluster::FleetShare {
            total: Some((&self.total).into()),
            by_category: self.by_category.iter().map(Into::into).collect(),
            by_model: self.by_model.iter().map(|(m, t)| group(m, "", t)).collect(),
            by_label: self
                .by_label
                .iter()
                .flat_map(|(k, values)| values.iter().map(move |(v, t)| group(k, v, t)))
                .collect(),
            nodes: Some(node_states(&self.nodes)),
            nodes_offline: self.nodes_offline,
            edges_live: self.edges_live,
            edges_offline: self.edges_offline,
        }
    }

    /// Adds another replica's `share` into this fleet, number by number (saturating):
    /// a cluster's whole is its replicas' shares summed. At most [`MAX_GROUPS`] models
    /// and labels of the share are added, and only the four categories.
    pub fn add_share(&mut self, share: &cluster::FleetShare) {
        self.total.merge(&totals_of(share.total.as_ref()));
        for (mine, theirs) in self.by_category.iter_mut().zip(&share.by_category) {
            mine.merge(&theirs.into());
        }
        for g in share.by_model.iter().take(MAX_GROUPS) {
            if let Some(t) = model_tally(&mut self.by_model, &g.key) {
                t.totals.merge(&totals_of(g.totals.as_ref()));
                t.members = t.members.saturating_add(g.members);
            }
        }
        for g in share.by_label.iter().take(MAX_GROUPS) {
            if let Some(t) = label_tally(&mut self.by_label, &g.key, &g.value) {
                t.totals.merge(&totals_of(g.totals.as_ref()));
                t.members = t.members.saturating_add(g.members);
            }
        }
        if let Some(n) = &share.nodes {
            let mut theirs = NodeStates::default();
            theirs.configured = n.configured;
            theirs.pending = n.pending;
            theirs.ready = n.ready;
            theirs.disconnected = n.disconnected;
            theirs.other = n.other;
            self.nodes.merge(&theirs);
        }
        self.nodes_offline = self.nodes_offline.saturating_add(share.nodes_offline);
        self.edges_live = self.edges_live.saturating_add(share.edges_live);
        self.edges_offline = self.edges_offline.saturating_add(share.edges_offline);
    }
}

impl From<&FleetSample> for cluster::FleetSample {
    fn from(s: &FleetSample) -> Self {
        Self {
            at_unix_ms: s.at_unix_ms,
            totals: Some((&s.totals).into()),
            edges_live: s.edges_live,
            edges_offline: s.edges_offline,
        }
    }
}

/// A replica's share of the fleet's history: its `samples`, taken every
/// `interval_ms`.
pub fn history_share<'a>(
    samples: impl IntoIterator<Item = &'a FleetSample>,
    interval_ms: u64,
) -> cluster::FleetHistoryShare {
    cluster::FleetHistoryShare {
        interval_ms,
        samples: samples.into_iter().map(Into::into).collect(),
    }
}

/// Adds another replica's history `share` into `whole` (oldest first), sample by
/// sample: shares sampled at the same wall-clock multiples add up; a sample only one
/// share has is kept as it is. At most [`MAX_LOAD_SAMPLES`] samples in all.
pub fn add_history_share(whole: &mut Vec<FleetSample>, share: &cluster::FleetHistoryShare) {
    let cap = MAX_LOAD_SAMPLES as usize;
    for s in share.samples.iter().take(cap) {
        let sample = FleetSample::new(
            s.at_unix_ms,
            totals_of(s.totals.as_ref()),
            s.edges_live,
            s.edges_offline,
        );
        match whole.binary_search_by_key(&s.at_unix_ms, |m| m.at_unix_ms) {
            Ok(i) => {
                if let Some(mine) = whole.get_mut(i) {
                    mine.merge(&sample);
                }
            }
            Err(i) if whole.len() < cap => whole.insert(i, sample),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(capacity: u64, in_flight: u64) -> cluster::Totals {
        cluster::Totals {
            providers: 1,
            capacity,
            in_flight,
            ..Default::default()
        }
    }

    #[test]
    fn shares_add_number_by_number_and_a_hostile_share_is_bounded() {
        let mut whole = FleetLoad::default();
        let a = cluster::FleetShare {
            total: Some(totals(4, 1)),
            by_model: vec![cluster::Group {
                key: "a".into(),
                totals: Some(totals(4, 1)),
                members: 1,
                ..Default::default()
            }],
            edges_live: 1,
            ..Default::default()
        };
        let b = cluster::FleetShare {
            total: Some(totals(6, 2)),
            by_model: vec![cluster::Group {
                key: "b".into(),
                totals: Some(totals(6, 2)),
                members: 1,
                ..Default::default()
            }],
            edges_live: 2,
            ..Default::default()
        };
        whole.add_share(&a);
        whole.add_share(&b);
        assert_eq!((whole.total().capacity, whole.total().in_flight), (10, 3));
        assert_eq!(whole.edges_live(), 3);
        let models: Vec<(&str, u64)> = whole.by_model().map(|(m, t)| (m, t.capacity)).collect();
        assert_eq!(models, [("a", 4), ("b", 6)]);
        // The share made of the whole reads back as the same whole.
        let mut again = FleetLoad::default();
        again.add_share(&whole.to_share());
        assert_eq!(again, whole);
        // Too many groups: only the first MAX_GROUPS are added.
        let wide = cluster::FleetShare {
            by_model: (0..MAX_GROUPS + 5)
                .map(|i| cluster::Group {
                    key: format!("m{i}"),
                    members: 1,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let mut w = FleetLoad::default();
        w.add_share(&wide);
        assert_eq!(w.by_model().count(), MAX_GROUPS);
    }

    #[test]
    fn histories_add_at_the_same_instant() {
        let sample = |at, capacity| {
            FleetSample::new(
                at,
                LoadTotals {
                    capacity,
                    ..Default::default()
                },
                1,
                0,
            )
        };
        let mut whole = vec![sample(10, 1), sample(20, 1)];
        let share = history_share(&[sample(20, 2), sample(30, 5), sample(5, 7)], 10);
        add_history_share(&mut whole, &share);
        let got: Vec<(u64, u64)> = whole
            .iter()
            .map(|s| (s.at_unix_ms, s.totals.capacity))
            .collect();
        assert_eq!(got, [(5, 7), (10, 1), (20, 3), (30, 5)]);
    }
}
